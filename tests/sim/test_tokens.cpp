// parse_tokens (sim/tokens.hpp): the one parser of token counts.
#include <catch2/catch.hpp>

#include "sim/errors.hpp"
#include "sim/limits.hpp"
#include "sim/tokens.hpp"

using ulysses::InputError;
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
  CHECK(tok(std::to_string(ulysses::limits::kMaxSeqLen)) == ulysses::limits::kMaxSeqLen);
  CHECK(tok("1024Gi") == ulysses::limits::kMaxSeqLen);
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
  CHECK(rule_of("2000G").find("at most") != std::string::npos);  // past limits::kMaxSeqLen
  CHECK(rule_of(std::to_string(ulysses::limits::kMaxSeqLen + 1)).find("at most") != std::string::npos);
  CHECK(rule_of("99999999999999999999999999999999").find("at most") != std::string::npos);
}
