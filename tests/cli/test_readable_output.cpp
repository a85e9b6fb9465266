// Output people can read and reproduce: token counts in and out, --version and the version key,
// predict --fail-if-not-fits (exit 3), time units in tables.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "reports/format.hpp"
#include "tests/cli/run_cli.hpp"

using nlohmann::json;
using ulysses::test::count_lines;
using ulysses::test::run_cli;

TEST_CASE("token counts for --seq-len and --granularity: 1M = 1,000,000, 128Ki = 131072", "[cli][tokens]") {
  const auto m = run_cli("predict --model llama-3.1-8b --gpus 8 --sp-size 8 --seq-len 1M --format json");
  INFO(m.err);
  REQUIRE(m.rc == 0);
  CHECK(json::parse(m.out)["seq_len"] == 1000000);
  const auto ki = run_cli("predict --model llama-3.1-8b --gpus 8 --sp-size 8 --seq-len 128Ki --format json");
  REQUIRE(ki.rc == 0);
  CHECK(json::parse(ki.out)["seq_len"] == 131072);
  const auto exact = run_cli("predict --model llama-3.1-8b --gpus 8 --sp-size 8 --seq-len 131072 --format json");
  REQUIRE(exact.rc == 0);
  CHECK(json::parse(exact.out)["gpu_memory_bytes"] == json::parse(ki.out)["gpu_memory_bytes"]);
  const auto plan = run_cli("plan --model llama-3.1-8b --gpus 8 --granularity 64K --format json");
  REQUIRE(plan.rc == 0);
  const auto pj = json::parse(plan.out);
  CHECK(pj["granularity"] == 64000);
  CHECK(pj["seq_len"].get<std::int64_t>() % 64000 == 0);
}

TEST_CASE("bad token counts: one line naming the flag, exit 2", "[cli][tokens]") {
  for (const char* bad : {"1.5", "-4K", "1m", "12Q", "2000G", "1.0001K"}) {
    INFO(bad);
    const auto r = run_cli(std::string("predict --model llama-3.1-8b --gpus 8 --seq-len '") + bad + "'");
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("--seq-len") != std::string::npos);
    CHECK(r.err.find("token count") != std::string::npos);
  }
  const auto g = run_cli("plan --model llama-3.1-8b --gpus 8 --granularity 0.5");
  CHECK(g.rc == 2);
  CHECK(count_lines(g.err) == 1);
  CHECK(g.err.find("--granularity") != std::string::npos);
}

TEST_CASE("tables: token counts decimal, times scaled", "[cli][tokens]") {
  const auto r = run_cli("plan --model llama-3.1-8b --gpus 8 --all-features");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = json::parse(run_cli("plan --model llama-3.1-8b --gpus 8 --all-features --format json").out);
  const auto S = j["seq_len"].get<std::int64_t>();
  // "longest sequence: 4526080 tokens (4.53M)": the exact count and the decimal one beside it
  CHECK(r.out.find(std::to_string(S) + " tokens (" + ulysses::reports::human_tokens(S) + ")") != std::string::npos);
  CHECK(ulysses::reports::human_tokens(S).back() == 'M');
  CHECK(r.out.find("(us)") == std::string::npos);  // no fixed microsecond column any more
  CHECK((r.out.find(" ms") != std::string::npos || r.out.find(" s ") != std::string::npos));
}

TEST_CASE("version: --version and the version key of JSON results", "[cli]") {
  const auto v = run_cli("--version");
  REQUIRE(v.rc == 0);
  CHECK(v.out.rfind("ulysses ", 0) == 0);
  CHECK(v.out.find("git ") != std::string::npos);
  CHECK(v.out.find("JSON schema ") != std::string::npos);
  const auto p = run_cli("predict --model llama-3.1-8b --gpus 8 --seq-len 64K --format json");
  REQUIRE(p.rc == 0);
  const auto j = json::parse(p.out);
  REQUIRE(j.contains("version"));
  CHECK(v.out.find(j["version"]["tool"].get<std::string>()) != std::string::npos);
  CHECK(v.out.find(j["version"]["git"].get<std::string>()) != std::string::npos);
  CHECK(j["version"]["schema"].is_number_integer());
  CHECK(j["scenario"]["plan"].contains("rmsnorm_implementation"));
  CHECK(j["scenario"]["plan"].contains("reduce_bucket_size"));
  CHECK(j["scenario"]["model"].contains("qk_norm"));
  CHECK(j["scenario"]["model"].contains("qkv_bias"));
}

TEST_CASE("predict --fail-if-not-fits: exit 3 when it does not fit, 0 when it fits", "[cli]") {
  const std::string flags = "predict --model llama-3.1-8b --gpus 8 --sp-size 8 ";
  const auto fits = run_cli(flags + "--seq-len 64K --fail-if-not-fits");
  CHECK(fits.rc == 0);
  const auto over = run_cli(flags + "--seq-len 100M --fail-if-not-fits");
  CHECK(over.rc == 3);
  CHECK(over.out.find("DOES NOT FIT") != std::string::npos);  // the output is still written
  const auto over_json = run_cli(flags + "--seq-len 100M --fail-if-not-fits --format json");
  CHECK(over_json.rc == 3);
  CHECK(json::parse(over_json.out)["binding"] != "none");
  const auto no_flag = run_cli(flags + "--seq-len 100M");
  CHECK(no_flag.rc == 0);  // without the flag: the documented 0
}
