// `ulysses bench attention --points/--sweep/--quick`: the point-list parser (bench/attn_points.hpp)
// called directly, the issue's grid, and bad --points through the binary (one line, exit 2;
// parsed before any CUDA work, so this holds on a machine without a GPU too).
#include <catch2/catch.hpp>
#include <set>
#include <tuple>

#include "bench/attn_points.hpp"
#include "tests/cli/run_cli.hpp"

using ulysses::core::InputError;
using ulysses::bench::AttnPoint;
using ulysses::bench::parse_attn_points;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_attn_points(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("attention points: valid lists parse in order", "[cli][bench]") {
  const auto pts = parse_attn_points("32768:16:16:128:1,16384:32:8:64:0,4K:16:8:64:1");
  REQUIRE(pts.size() == 3);
  CHECK(pts[0] == AttnPoint{32768, 16, 16, 128, true});
  CHECK(pts[1] == AttnPoint{16384, 32, 8, 64, false});
  CHECK(pts[2] == AttnPoint{4096, 16, 8, 64, true});
  CHECK(parse_attn_points("1:1:1:64:0").at(0) == AttnPoint{1, 1, 1, 64, false});
  CHECK(parse_attn_points("128k:4:1:128:1").at(0).S == 131072);
}

TEST_CASE("attention points: each bad input names --points, the point and the rule", "[cli][bench]") {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"", "is empty"},
      {"32768:16:16:128", "has 4 fields, not 5"},
      {"32768:16:16:128:1:0", "has 6 fields, not 5"},
      {"32768:16:16:128:1,", "point 2 '' has 0 fields"},
      {"0:16:16:128:1", "S must be an integer in 1..4194304"},
      {"-5:16:16:128:1", "S must be an integer"},
      {"32x:16:16:128:1", "S must be an integer"},
      {"8M:16:16:128:1", "S must be an integer"},
      {"8192K:16:16:128:1", "S must be an integer in 1..4194304"},
      {"32768:0:16:128:1", "H must be an integer in 1..1024"},
      {"32768:16:0:128:1", "HKV must be an integer in 1..1024"},
      {"32768:16:6:128:1", "H must be a multiple of HKV"},
      {"32768:16:16:96:1", "D must be 64 or 128"},
      {"32768:16:16:256:1", "D must be 64 or 128"},
      {"32768:16:16:128:2", "CAUSAL must be 0 or 1"},
      {"32768:16:16:128:yes", "CAUSAL must be 0 or 1"},
      {"32768:16:16:128:1, 4096:16:16:64:1", "point 2 ' 4096:16:16:64:1'"},
      {"4096:16:16:64:1,4K:16:16:64:1", "is given twice (4096:16:16:64:1)"},
  };
  for (const auto& c : cases) {
    INFO("input: '" << c.text << "'");
    const std::string msg = error_of(c.text);
    CHECK(msg.rfind("command line: --points: ", 0) == 0);
    CHECK(msg.find(c.expect) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
  // the item is named by its position
  CHECK(error_of("4096:16:16:64:1,16384:32:8:64:0,4096:16:16:64").find("point 3 '4096:16:16:64'") != std::string::npos);
}

TEST_CASE("attention points: the issue's grid is 64 distinct points, quick a subset", "[cli][bench]") {
  const auto grid = ulysses::bench::attn_issue_grid();
  REQUIRE(grid.size() == 64);
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool>> seen;
  for (const auto& p : grid) {
    CHECK((p.S == 4096 || p.S == 16384 || p.S == 32768 || p.S == 131072));
    CHECK((p.H == 16 || p.H == 32));
    CHECK((p.H_kv == p.H || p.H_kv == 8));
    CHECK((p.D == 64 || p.D == 128));
    seen.insert({p.S, p.H, p.H_kv, p.D, p.causal});
    // every grid point round-trips through the --points syntax
    CHECK(parse_attn_points(ulysses::bench::attn_point_name(p)).at(0) == p);
  }
  CHECK(seen.size() == 64);
  const auto quick = ulysses::bench::attn_quick_grid();
  CHECK(quick.size() == 16);
  for (const auto& p : quick) CHECK(seen.count({p.S, p.H, p.H_kv, p.D, p.causal}) == 1);
}

TEST_CASE("bench attention: bad --points is one line and exit 2", "[cli][bench]") {
  using ulysses::test::run_cli;
  const auto r = run_cli("bench attention --points 32768:16:6:128:1");
  CHECK(r.rc == 2);
  CHECK(r.err.find("--points") != std::string::npos);
  CHECK(r.err.find("H must be a multiple of HKV") != std::string::npos);
  CHECK(ulysses::test::count_lines(r.err) == 1);
  CHECK(r.out.empty());

  const auto both = run_cli("bench attention --sweep --points 4096:16:16:64:1");
  CHECK(both.rc == 2);
  CHECK(both.err.find("--points") != std::string::npos);
  CHECK(ulysses::test::count_lines(both.err) == 1);

  const auto other = run_cli("bench exchange --points 4096:16:16:64:1 --model llama-3.1-8b --profile h200-sxm-141gb");
  CHECK(other.rc == 2);
  CHECK(other.err.find("--points") != std::string::npos);
  CHECK(ulysses::test::count_lines(other.err) == 1);

  const auto reps = run_cli("bench attention --points 4096:16:16:64:1 --min-reps 0");
  CHECK(reps.rc == 2);
  CHECK(reps.err.find("--min-reps") != std::string::npos);
}
