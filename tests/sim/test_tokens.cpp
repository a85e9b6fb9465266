// parse_tokens (sim/tokens.hpp): the one parser of token counts.
#include <catch2/catch.hpp>
#include <unistd.h>

#include "core/errors.hpp"
#include "sim/limits.hpp"
#include "sim/tokens.hpp"

using ulysses::core::InputError;
using ulysses::parse_tokens;

namespace {
std::int64_t tok(const std::string& t) { return parse_tokens(t, "f.yaml", "plan.seq_len"); }
std::string rule_of(const std::string& t) {
  try {
    tok(t);
  } catch (const InputError& e) {
    CHECK(e.file() == "f.yaml");
    CHECK(e.key() == "plan.seq_len");
    return e.rule();
  }
  return "";
}
}  // namespace

TEST_CASE("parse_tokens: integers, decimal and binary suffixes", "[sim][tokens]") {
  CHECK(tok("131072") == 131072);
  CHECK(tok("1") == 1);
  CHECK(tok("64K") == 64000);
  CHECK(tok("64k") == 64000);
  CHECK(tok("1M") == 1000000);
  CHECK(tok("1.5M") == 1500000);
  CHECK(tok("4.6M") == 4600000);
  CHECK(tok("0.5K") == 500);
  CHECK(tok("2G") == 2000000000);
  CHECK(tok("128Ki") == 131072);
  CHECK(tok("1Mi") == 1048576);
  CHECK(tok("1.5Ki") == 1536);
  CHECK(tok("1Gi") == std::int64_t{1} << 30);
  CHECK(tok(std::to_string(ulysses::kMaxSeqLen)) == ulysses::kMaxSeqLen);
  CHECK(tok("1024Gi") == ulysses::kMaxSeqLen);
}

TEST_CASE("parse_tokens: bad counts are one InputError naming file and key", "[sim][tokens]") {
  for (const char* bad : {"", "-1", "+5", "0", "0K", "1.5", "1.0005K", "1.", ".5M", "1X", "1 M", "M", "1e6", "1,000",
                          "1MM", "1Ki5", "0x10", "1.5Mi1"}) {
    INFO(bad);
    const std::string rule = rule_of(bad);
    CHECK(!rule.empty());
    CHECK(rule.find("token count") != std::string::npos);
  }
  CHECK(rule_of("1.0005K").find("whole number") != std::string::npos);
  CHECK(rule_of("1.5").find("whole number") != std::string::npos);
  CHECK(rule_of("-1").find("no sign") != std::string::npos);
  CHECK(rule_of("1m").find("upper case") != std::string::npos);
  CHECK(rule_of("2000G").find("at most") != std::string::npos);  // past kMaxSeqLen
  CHECK(rule_of(std::to_string(ulysses::kMaxSeqLen + 1)).find("at most") != std::string::npos);
  CHECK(rule_of("99999999999999999999999999999999").find("at most") != std::string::npos);
}

#include <filesystem>
#include <fstream>

#include "sim/config.hpp"

TEST_CASE("token counts in scenarios and sweep specs: seq_len, granularity, geometric axes", "[sim][tokens]") {
  const auto dir = std::filesystem::temp_directory_path() / ("ulysses-tokens-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string base = std::string(ULYSSES_SOURCE_DIR) + "/scenarios/llama8b-h100-sp8.yaml";
  const std::string spec = (dir / "t.yaml").string();
  std::ofstream(spec) << "base: " << base << "\n"
                      << "granularity: 64K\n"
                      << "axes:\n"
                      << "  plan.seq_len: {geometric: {start: 64K, stop: 1M, factor: 2}}\n"
                      << "mode: plan\n";
  const ulysses::SweepSpec s = ulysses::load_sweep(spec);
  CHECK(s.granularity == 64000);
  REQUIRE(s.axes.size() == 1);
  CHECK(s.axes[0].values == std::vector<std::string>{"64000", "128000", "256000", "512000"});

  ulysses::Scenario sc = ulysses::load_scenario(base);
  ulysses::set_key(sc, "plan.seq_len", "2Mi", "--seq-len");
  CHECK(sc.plan.seq_len == 2097152);
  try {
    ulysses::set_key(sc, "plan.seq_len", "2.5", "--seq-len");
    FAIL("2.5 tokens accepted");
  } catch (const InputError& e) {
    CHECK(e.key() == "--seq-len");
  }
  std::ofstream(spec) << "base: " << base << "\n"
                      << "granularity: 1.5\n"
                      << "axes:\n  plan.sp_size: [8]\n";
  try {
    ulysses::load_sweep(spec);
    FAIL("granularity 1.5 accepted");
  } catch (const InputError& e) {
    CHECK(e.file() == spec);
    CHECK(e.key() == "granularity");
  }
  std::filesystem::remove_all(dir);
}
