// Profile writing (calib/profile_out.hpp): the `calibrated:` section spliced into a profile file and
// read back by sim's profile loader; where `calibrate` puts its result (printed, or a copy of the base).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "calib/profile_out.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "tests/cli/run_cli.hpp"

using namespace ulysses;
using namespace ulysses::test;

namespace {

// Curves and values of several kinds: per-P busbw, per-implementation attention, scalars in GiB.
Calibration sample() {
  Calibration c;
  c.provenance = "test: 2x H200, \"quoted\" text";
  c.a2a_busbw_GBps = {{2, Curve{{{1048576, 19.0}, {1073741824, 331.4}}}}, {8, Curve{{{1048576, 12.5}, {1073741824, 360.1}}}}};
  c.attn_fwd_eff = {{"flash_attention_2", Curve{{{32768, 338 / 989.4}, {131072, 327 / 989.4}}}}};
  c.cuda_context_bytes = 537919488;
  c.pack_GBps = 2950;
  return c;
}

// An uncalibrated profile (h200-sxm-141gb and h100-sxm-80gb carry measured sections), copied to dir.
std::string uncalibrated_copy(const TempDir& dir) {
  const std::string profile = dir / "a100.yaml";
  std::filesystem::copy_file(source_path("profiles/a100-sxm-80gb.yaml"), profile);
  REQUIRE_FALSE(load_profile(profile).has_calibration);
  return profile;
}

}  // namespace

TEST_CASE("write_calibration splices the section into a profile and it loads back", "[calib][profile_out]") {
  TempDir d;
  const std::string profile = uncalibrated_copy(d);
  const std::string before = slurp(profile);
  const Calibration c = sample();
  calib::write_calibration(profile, c);
  const HardwareProfile p = load_profile(profile);
  REQUIRE(p.has_calibration);
  CHECK(p.calibrated.a2a_busbw_GBps.size() == 2);
  CHECK(p.calibrated.a2a_busbw_GBps[1].first == 8);
  CHECK(p.calibrated.a2a_busbw_GBps[1].second.points[1].second == 360.1);
  CHECK(p.calibrated.attn_fwd_eff[0].second.points[1].second == 327 / 989.4);
  CHECK(p.calibrated.cuda_context_bytes == 537919488);
  CHECK(p.calibrated.provenance == c.provenance);
  // everything that was there stays, byte for byte, in front of the new section
  const std::string after = slurp(profile);
  CHECK(after.rfind(before, 0) == 0);

  // the PyTorch process's fixed costs (calibrate --backend deepspeed) round-trip too
  Calibration cp = c;
  cp.pytorch_context_bytes = 1385000000;
  cp.pytorch_nccl_buffer_bytes = 0;
  cp.ulysses_host_adam_s_per_param = 0.87e-9;  // our host optimizer's rate (calibrate --backend cuda)
  Curve gemm;
  gemm.points = {{2048, 0.61}, {131072, 0.83}};
  cp.ulysses_gemm_eff = {{"fwd.6144x4096", gemm}, {"wgrad.151936x4096", gemm}};  // and our GEMMs' curves
  calib::write_calibration(profile, cp);
  const HardwareProfile pp = load_profile(profile);
  REQUIRE(pp.calibrated.ulysses_gemm_eff.size() == 2);
  CHECK(pp.calibrated.ulysses_gemm_eff[1].first == "wgrad.151936x4096");
  CHECK(pp.calibrated.ulysses_gemm_eff[1].second.points[1].second == 0.83);
  CHECK(pp.calibrated.ulysses_host_adam_s_per_param == Approx(0.87e-9).epsilon(1e-15));  // written in ns
  CHECK(std::llabs(pp.calibrated.pytorch_context_bytes - 1385000000) < 1024);  // written in GiB
  CHECK(pp.calibrated.pytorch_nccl_buffer_bytes == 0);
  CHECK(pp.calibrated.cuda_context_bytes == 537919488);

  // writing again replaces the section instead of adding a second one
  Calibration c2;
  c2.provenance = "second run";
  c2.pack_GBps = 1000;
  calib::write_calibration(profile, c2);
  const std::string again = slurp(profile);
  CHECK(again.find("\ncalibrated:") == again.rfind("\ncalibrated:"));
  CHECK(again.find("second run") != std::string::npos);
  CHECK(again.find("a2a_busbw_GBps") == std::string::npos);
  CHECK(load_profile(profile).calibrated.pack_GBps == 1000);

  // a section in the middle of the file: the keys after it are kept
  const std::string mid = d / "mid.yaml";
  std::string text = before;
  const auto at = text.find("sources:");
  text.insert(at, "calibrated:\n  provenance: old\n  pack_GBps: 5\n# a comment that stays\n");
  std::ofstream(mid) << text;
  REQUIRE(load_profile(mid).calibrated.pack_GBps == 5);
  calib::write_calibration(mid, c2);
  const HardwareProfile m = load_profile(mid);
  CHECK(m.calibrated.provenance == "second run");
  CHECK(m.sources.size() == p.sources.size());
  CHECK(slurp(mid).find("# a comment that stays") != std::string::npos);

  // values the loader would reject are refused and the file is left alone
  Calibration bad;
  bad.gemm_eff = Curve{{{1e9, 0.5}, {1e8, 0.6}}};  // x not increasing
  CHECK_THROWS_WITH(calib::write_calibration(mid, bad), Catch::Contains("calibrated.gemm_eff[1]: x must increase strictly"));
  CHECK(load_profile(mid).calibrated.provenance == "second run");
  CHECK_THROWS_AS(calib::write_calibration(d / "none.yaml", c2), core::InputError);
}

TEST_CASE("calibration_to_yaml: an empty section is written as an empty map", "[calib][profile_out]") {
  CHECK(calibration_to_yaml(Calibration{}) == "calibrated: {}\n");
  const std::string text = calibration_to_yaml(sample());
  CHECK(text.rfind("calibrated:\n  provenance: ", 0) == 0);
  CHECK(text.find("cuda_context_GiB") != std::string::npos);
}

TEST_CASE("write_profile_out: the section printed, or the base profile written with it", "[calib][profile_out]") {
  TempDir d;
  const Calibration c = sample();
  // no --profile-out: the section's text, which a profile takes as it is
  const std::string text = calib::write_profile_out("a100-sxm-80gb", std::nullopt, "a100-sxm-80gb", c);
  CHECK(text == calibration_to_yaml(c));
  std::ofstream(d / "appended.yaml") << slurp(source_path("profiles/a100-sxm-80gb.yaml")) << "\n" << text;
  CHECK(load_profile(d / "appended.yaml").calibrated.pack_GBps == 2950);

  // --profile-out: a copy of the base (by preset name) with the section; the base is untouched
  const std::string base_text = slurp(source_path("profiles/a100-sxm-80gb.yaml"));
  const std::string said = calib::write_profile_out("a100-sxm-80gb", d / "out.yaml", "a100-sxm-80gb", c);
  CHECK(said == "wrote " + (d / "out.yaml") + " (profile a100-sxm-80gb with a calibrated: section)\n");
  const HardwareProfile out = load_profile(d / "out.yaml");
  CHECK(out.calibrated.a2a_busbw_GBps[1].second.points[1].second == 360.1);
  CHECK(out.hbm_bytes == load_profile("a100-sxm-80gb").hbm_bytes);
  CHECK(slurp(source_path("profiles/a100-sxm-80gb.yaml")) == base_text);

  // the base itself as the output: updated in place (no copy onto itself)
  const std::string own = uncalibrated_copy(d);
  Calibration again = c;
  again.pack_GBps = 1234;
  calib::write_profile_out(own, own, "h100", again);
  CHECK(load_profile(own).calibrated.pack_GBps == 1234);

  // one write: a section the loader refuses leaves an existing output as it was (no half-written copy of the base), no temporary
  const std::string kept = slurp(d / "out.yaml");
  Calibration bad = c;
  bad.gemm_eff = Curve{{{1e9, 0.5}, {1e8, 0.6}}};  // x not increasing
  CHECK_THROWS_WITH(calib::write_profile_out("a100-sxm-80gb", d / "out.yaml", "x", bad), Catch::Contains("x must increase strictly"));
  CHECK(slurp(d / "out.yaml") == kept);
  CHECK_FALSE(std::filesystem::exists(d / ".out.yaml.tmp.yaml"));

  // bad names: the flag that named them
  try {
    calib::write_profile_out("no-such-profile", d / "x.yaml", "x", c);
    FAIL("an unknown base profile must throw");
  } catch (const core::InputError& e) {
    CHECK(e.key() == "--profile");
  }
  try {
    calib::write_profile_out("a100-sxm-80gb", d / "missing-dir/x.yaml", "x", c);
    FAIL("an output in a missing folder must throw");
  } catch (const core::InputError& e) {
    CHECK(e.key() == "--profile-out");
  }
}
