// ulysses sweep and report through the built binary.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.hpp"

using nlohmann::json;
using ulysses::test::count_lines;
using ulysses::test::run_cli;
using ulysses::test::slurp;
using ulysses::test::TempDir;

namespace {

// 3 sp sizes x 2 lengths = 6 points; sp 3 breaks the rules (32 heads, 8 GPUs): 2 skipped.
std::string write_tiny_spec(const TempDir& dir) {
  const std::string path = dir / "tiny.yaml";
  std::ofstream(path) << "name: tiny\n"
                      << "base: " << ulysses::test::source_path("scenarios/llama8b-h100-sp8.yaml") << "\n"
                      << "axes:\n"
                      << "  plan.sp_size: [1, 3, 8]\n"
                      << "  plan.seq_len: [65536, 131072]\n"
                      << "mode: predict\n";
  return path;
}

}  // namespace

TEST_CASE("sweep writes every point and counts skipped points by reason", "[cli]") {
  TempDir dir;
  const std::string spec = write_tiny_spec(dir);
  const auto r = run_cli("sweep '" + spec + "' --out '" + (dir / "out") + "' --threads 2 --format json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const json s = json::parse(slurp(dir / "out/tiny.summary.json"));
  CHECK(s["points"] == 6);
  CHECK(s["valid"] == 4);
  CHECK(s["skipped_total"] == 2);
  std::int64_t by_reason = 0;
  for (auto it = s["skipped"].begin(); it != s["skipped"].end(); ++it) {
    CHECK(!it.key().empty());
    by_reason += it.value().get<std::int64_t>();
  }
  CHECK(by_reason == 2);
  CHECK(s["points_per_s"].get<double>() > 0);
  CHECK(s.contains("elapsed_s"));

  const std::string csv = slurp(dir / "out/tiny.csv");
  CHECK(count_lines(csv) == 1 + 6);
  CHECK(csv.rfind("plan.sp_size,plan.seq_len,valid,skip_reason,seq_len,", 0) == 0);
  // rows in product order, last axis fastest; the sp=3 rows are the skipped ones
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  const char* expect[] = {"1,65536,1,", "1,131072,1,", "3,65536,0,", "3,131072,0,", "8,65536,1,", "8,131072,1,"};
  for (const char* e : expect) {
    std::getline(lines, line);
    CHECK(line.rfind(e, 0) == 0);
  }
}

TEST_CASE("sweep output does not depend on the thread count", "[cli]") {
  TempDir dir;
  const std::string spec = ulysses::test::source_path("scenarios/sweep-main.yaml");
  REQUIRE(run_cli("sweep '" + spec + "' --out '" + (dir / "a") + "' --threads 1").rc == 0);
  REQUIRE(run_cli("sweep '" + spec + "' --out '" + (dir / "b") + "' --threads 3").rc == 0);
  const std::string a = slurp(dir / "a/sweep-main.csv"), b = slurp(dir / "b/sweep-main.csv");
  CHECK(count_lines(a) > 1000);
  CHECK(a == b);
}

TEST_CASE("sweep: bad spec value is an input error naming the file", "[cli]") {
  TempDir dir;
  const std::string path = dir / "bad.yaml";
  std::ofstream(path) << "base: " << ulysses::test::source_path("scenarios/llama8b-h100-sp8.yaml") << "\n"
                      << "axes:\n  plan.zero_stage: [1, 9]\n";
  const auto r = run_cli("sweep '" + path + "' --out '" + (dir / "out") + "'");
  CHECK(r.rc == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find("bad.yaml") != std::string::npos);
}

TEST_CASE("report renders plan JSON into a Markdown summary (and plots when matplotlib is there)", "[cli]") {
  TempDir dir;
  for (int gpus : {1, 8}) {
    for (const char* ab : {"baseline", "all"}) {
      const std::string flags = std::string(ab) == "all" ? "--all-features" : "--sp-size 1";
      const auto r = run_cli("plan --model llama-3.1-8b --gpus " + std::to_string(gpus) + " " + flags + " --label " + ab +
                             " --format json");
      REQUIRE(r.rc == 0);
      std::ofstream(dir / ("p" + std::to_string(gpus) + ab + ".json")) << r.out;
    }
  }
  const auto md = run_cli("report '" + dir.path.string() + "' --out '" + (dir / "rep") + "' --no-plots");
  INFO(md.err);
  REQUIRE(md.rc == 0);
  CHECK(md.out.find("## Longest sequence that fits") != std::string::npos);
  CHECK(md.out.find("| 8 |") != std::string::npos);
  CHECK(md.out.find("llama-3.1-8b on h100-sxm-80gb") != std::string::npos);
  CHECK(slurp(dir / "rep/summary.md") == md.out);

  const bool have_mpl = std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0 ||
                        std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
  if (have_mpl) {
    const auto plots = run_cli("report '" + dir.path.string() + "' --out '" + (dir / "rep2") + "'");
    INFO(plots.err);
    REQUIRE(plots.rc == 0);
    CHECK(std::filesystem::exists(dir / "rep2/ablation_llama-3.1-8b_h100-sxm-80gb.png"));
    CHECK(std::filesystem::file_size(dir / "rep2/ablation_llama-3.1-8b_h100-sxm-80gb.png") > 1000);
  }

  const auto bad = run_cli("report '" + (dir / "nothing-here") + "'");
  CHECK(bad.rc == 2);
  CHECK(count_lines(bad.err) == 1);
}
