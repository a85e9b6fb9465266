// Calibrated attention curves keyed by shape (sim/attn_key.hpp): the grammar, the lookup order
// of attn_eff (H_l interpolation > head dim + mask > bare implementation > datasheet),
// and the profile loader accepting / rejecting keys.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "sim/attn_key.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/timing.hpp"

using namespace ulysses;

namespace {

Curve flat(double y) { return Curve{{{1024, y}, {131072, y}}}; }

Scenario scenario_with(std::vector<std::pair<std::string, Curve>> fwd) {
  Scenario sc;
  sc.hw.attn_fwd_eff = 0.3, sc.hw.attn_bwd_eff = 0.3;
  sc.hw.has_calibration = true;
  sc.hw.calibrated.attn_fwd_eff = std::move(fwd);
  sc.plan.attn_implementation = "ulysses_flash";
  sc.plan.sp_size = 2;
  sc.model.heads = 32, sc.model.kv_heads = 8, sc.model.head_dim = 128;
  sc.workload.causal = true;
  return sc;
}

}  // namespace

TEST_CASE("attention curve keys: grammar", "[sim][calibration]") {
  AttnCurveKey k;
  REQUIRE(parse_attn_curve_key("ulysses_flash", k));
  CHECK(k.impl == "ulysses_flash");
  CHECK(k.D == 0);
  REQUIRE(parse_attn_curve_key("ulysses_flash@d128.causal", k));
  CHECK(k.D == 128);
  CHECK(k.causal == 1);
  CHECK(k.h_local == 0);
  REQUIRE(parse_attn_curve_key("sdpa@d64.full.h16", k));
  CHECK(k.impl == "sdpa");
  CHECK(k.D == 64);
  CHECK(k.causal == 0);
  CHECK(k.h_local == 16);
  REQUIRE(parse_attn_curve_key("ulysses_flash@d128.full.kv4", k));
  CHECK(k.kv_local == 4);
  CHECK(k.h_local == 0);
  std::string_view phase;
  std::int64_t P = 0;
  REQUIRE(parse_a2a_phase_key("a2a.qkv.bwd@p2", phase, P));
  CHECK(phase == "a2a.qkv.bwd");
  CHECK(P == 2);
  for (const char* bad : {"attn.fwd@p2", "a2a.qkv.fwd@p1", "a2a.qkv.fwd", "a2a.qkv.fwd@2", "a2a.out.fwd@p2x"})
    CHECK_FALSE(parse_a2a_phase_key(bad, phase, P));
  for (const char* bad : {"x@d128.causal.kv0", "x@d128.causal.kv", "x@d128.causal.h4.kv2", "x@", "x@d.causal", "x@d128", "x@d128.maybe", "x@d128.causal.h",
                          "x@d128.causal.h0", "x@d128.causal.h4x", "x@d-1.full"})
    CHECK_FALSE(parse_attn_curve_key(bad, k));
}

TEST_CASE("attn_eff picks the most specific calibrated curve", "[sim][calibration]") {
  // sp 2, 32 heads: H_l = 16
  SECTION("datasheet value without any matching curve") {
    const Scenario sc = scenario_with({{"sdpa", flat(0.9)}});
    CHECK(attn_eff(sc, true, 8192) == Approx(0.3));
  }
  SECTION("bare implementation key") {
    const Scenario sc = scenario_with({{"ulysses_flash", flat(0.5)}});
    CHECK(attn_eff(sc, true, 8192) == Approx(0.5));
  }
  SECTION("head dim and mask beat the bare key; other shapes are ignored") {
    const Scenario sc = scenario_with({{"ulysses_flash", flat(0.5)},
                                       {"ulysses_flash@d128.causal", flat(0.6)},
                                       {"ulysses_flash@d64.causal", flat(0.1)},
                                       {"ulysses_flash@d128.full", flat(0.2)}});
    CHECK(attn_eff(sc, true, 8192) == Approx(0.6));
  }
  SECTION("heads per rank: exact, interpolated in log(H_local), clamped") {
    std::vector<std::pair<std::string, Curve>> c = {{"ulysses_flash@d128.causal", flat(0.6)},
                                                    {"ulysses_flash@d128.causal.h4", flat(0.2)},
                                                    {"ulysses_flash@d128.causal.h64", flat(0.6)}};
    Scenario sc = scenario_with(c);
    // H_l 16 is halfway between 4 and 64 in log: 0.2 + 0.5 * 0.4
    CHECK(attn_eff(sc, true, 8192) == Approx(0.4));
    sc.model.heads = 8;  // H_l 4: exact
    CHECK(attn_eff(sc, true, 8192) == Approx(0.2));
    sc.model.heads = 4;  // H_l 2: below the smallest, clamped
    CHECK(attn_eff(sc, true, 8192) == Approx(0.2));
    sc.model.heads = 256;  // H_l 128: above the largest, clamped
    CHECK(attn_eff(sc, true, 8192) == Approx(0.6));
    sc.workload.causal = false;  // no full-mask curve: datasheet
    CHECK(attn_eff(sc, true, 8192) == Approx(0.3));
  }
  SECTION("kv heads per rank beat query heads per rank (the flash backward's grid)") {
    // sp 2: 32 heads -> H_l 16; 8 kv heads -> kv_local 4
    Scenario sc = scenario_with({{"ulysses_flash@d128.causal.h16", flat(0.5)}, {"ulysses_flash@d128.causal.kv2", flat(0.2)},
                                 {"ulysses_flash@d128.causal.kv8", flat(0.4)}});
    CHECK(attn_eff(sc, true, 8192) == Approx(0.3));  // kv 4: halfway between 2 and 8 in log
    sc.model.kv_heads = 1;  // kv replication: one kv head per rank, below the smallest: clamped
    CHECK(attn_eff(sc, true, 8192) == Approx(0.2));
  }
}

TEST_CASE("profiles accept keyed attention curves and reject malformed keys", "[sim][calibration]") {
  const auto dir = std::filesystem::temp_directory_path() / ("ulysses-attn-keys-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string base = std::string(ULYSSES_SOURCE_DIR) + "/profiles/h100-sxm-80gb.yaml";
  auto write = [&](const std::string& name, const std::string& section) {
    std::ifstream in(base);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const auto at = text.find("\ncalibrated:");
    if (at != std::string::npos) text = text.substr(0, at + 1);
    const std::string p = (dir / name).string();
    std::ofstream(p) << text << "\ncalibrated:\n" << section;
    return p;
  };
  const std::string good = write("good.yaml",
                                 "  attn_fwd_eff:\n    ulysses_flash@d128.causal.h16: [[2048, 0.3], [8192, 0.35]]\n"
                                 "    ulysses_flash: [[2048, 0.3]]\n");
  const HardwareProfile p = load_profile(good);
  REQUIRE(p.calibrated.attn_fwd_eff.size() == 2);
  CHECK(p.calibrated.attn_fwd_eff[0].first == "ulysses_flash@d128.causal.h16");
  const std::string bad = write("bad.yaml", "  attn_fwd_eff:\n    ulysses_flash@d128.sideways: [[2048, 0.3]]\n");
  try {
    load_profile(bad);
    FAIL("a malformed key was accepted");
  } catch (const core::InputError& e) {
    CHECK(std::string(e.what()).find("ulysses_flash@d128.sideways") != std::string::npos);
  }
  const std::string unknown = write("unknown.yaml", "  attn_fwd_eff:\n    nosuchkernel@d128.causal: [[2048, 0.3]]\n");
  CHECK_THROWS_AS(load_profile(unknown), core::InputError);
  std::filesystem::remove_all(dir);
}
