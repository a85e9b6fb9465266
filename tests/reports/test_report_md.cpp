// summary.md of `ulysses report` (reports/report_md): units of step time and tokens, the memory
// family table in the Markdown, plots embedded by file name, and a result with an unknown memory
// term rejected as one input error (through the binary, exit 2).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "reports/report_md.hpp"
#include "core/errors.hpp"
#include "tests/cli/run_cli.hpp"

using namespace ulysses;
using test::count_lines;
using test::run_cli;
using test::TempDir;

TEST_CASE("report summary: memory by family, speed table, plots by file name", "[reports][summary]") {
  TempDir dir;
  const auto r = run_cli("plan --model llama-3.1-8b --gpus 8 --all-features --label all --format json");
  REQUIRE(r.rc == 0);
  reports::ReportInputs in;
  in.results.push_back(reports::Json::parse(r.out));
  const std::string md = reports::report_markdown(in, "t", "", {"a.png\tcaption A", "b.png"});
  CHECK(md.find("## Step time and throughput at the longest sequence") != std::string::npos);
  CHECK(md.find("**GPU: weights/params**") != std::string::npos);
  CHECK(md.find("**GPU: fixed/allocator**") != std::string::npos);
  CHECK(md.find("&nbsp;&nbsp;cuda_context |") != std::string::npos);
  CHECK(md.find("![caption A](a.png)") != std::string::npos);
  CHECK(md.find("![b.png](b.png)") != std::string::npos);
  CHECK_THROWS(reports::report_markdown(in, "t", "", {"../a.png"}));
  CHECK_THROWS(reports::report_markdown(in, "t", "", {"/tmp/a.png"}));
}

TEST_CASE("report: a memory term without a family is one input error", "[cli][summary]") {
  TempDir dir;
  const auto r = run_cli("plan --model llama-3.1-8b --gpus 8 --format json");
  REQUIRE(r.rc == 0);
  auto j = nlohmann::ordered_json::parse(r.out);
  j["gpu_memory_bytes"]["mystery_buffers"] = 0;
  std::ofstream(dir / "p.json") << j.dump();
  const auto bad = run_cli("report '" + (dir / "p.json") + "' --out '" + (dir / "rep") + "' --no-plots");
  CHECK(bad.rc == 2);
  CHECK(count_lines(bad.err) == 1);
  CHECK(bad.err.find("p.json") != std::string::npos);
  CHECK(bad.err.find("gpu_memory_bytes.mystery_buffers") != std::string::npos);
}
