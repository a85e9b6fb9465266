// Exchange curve fitting and raw calibration files, called directly (calib/a2a_fit.hpp,
// calib/raw_file.hpp): the curves derived from phase times give the times back through the model's
// formula, for both transports; the committed H200 profile is the derivation of the committed raw
// file; the idle-link penalty curve; what the fit and the reader refuse.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "calib/a2a_fit.hpp"
#include "calib/raw_file.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/timing.hpp"
#include "tests/cli/run_cli.hpp"

using namespace ulysses;
using namespace ulysses::test;
using json = nlohmann::json;

namespace {

const Curve* curve(const Calibration& c, const std::string& key) {
  for (const auto& [k, cv] : c.a2a_phase_GBps)
    if (k == key) return &cv;
  return nullptr;
}

// Synthetic samples: t = launches * alpha + bytes / bw, bw different per phase (GB/s 500, 600, 650, 550).
std::vector<calib::A2aSample> synthetic(const std::string& transport, double alpha_s) {
  const int launches_qkv = transport == "p2p" ? 1 : 3;
  std::vector<calib::A2aSample> out;
  for (double X : {1e7, 1e8, 1e9}) {  // large enough that bytes/bw > 10% of t (the derivation's floor)
    calib::A2aSample s;
    s.q_bytes = X, s.qkv_bytes = 1.5 * X;
    s.t_s = {launches_qkv * alpha_s + s.qkv_bytes / 500e9, 0, alpha_s + X / 600e9, alpha_s + X / 650e9, 0,
             launches_qkv * alpha_s + s.qkv_bytes / 550e9};
    out.push_back(s);
  }
  return out;
}

// The same samples as the raw JSON `calibrate --backend cuda --json` writes.
json synthetic_raw(const std::string& transport, double alpha_s) {
  json raw{{"measured_at", "synthetic"}, {"a2a_transport", transport}, {"a2a", json::array()}};
  for (const auto& s : synthetic(transport, alpha_s))
    raw["a2a"].push_back({{"P", 2}, {"q_bytes_per_rank", s.q_bytes}, {"qkv_bytes_per_rank", s.qkv_bytes},
                          {"a2a.qkv.fwd_s", s.t_s[0]}, {"a2a.out.fwd_s", s.t_s[2]}, {"a2a.out.bwd_s", s.t_s[3]},
                          {"a2a.qkv.bwd_s", s.t_s[5]}});
  return raw;
}

const Calibration& h200() {
  static const Calibration c = load_profile("h200-sxm-141gb").calibrated;
  return c;
}

}  // namespace

TEST_CASE("derive_a2a_curves inverts the phase times to the bandwidths that give them back", "[calib][a2a]") {
  const double alpha = h200().a2a_alpha_per_tensor_s;
  REQUIRE(alpha > 0);
  for (const std::string transport : {"p2p", "nccl"}) {
    INFO(transport);
    Calibration c = h200();
    const auto samples = synthetic(transport, alpha);
    const calib::A2aDerived got = calib::derive_a2a_curves(2, samples, transport, c);
    CHECK(c.a2a_transport == transport);
    for (auto [k, key, bw] : {std::tuple{0, "a2a.qkv.fwd@p2", 500.0}, {2, "a2a.out.fwd@p2", 600.0}, {3, "a2a.out.bwd@p2", 650.0},
                              {5, "a2a.qkv.bwd@p2", 550.0}}) {
      INFO(key);
      const Curve* cv = curve(c, key);
      REQUIRE(cv != nullptr);
      REQUIRE(cv->points.size() == 3);
      for (const auto& [x, y] : cv->points) CHECK(y == Approx(bw).epsilon(1e-6));
      REQUIRE(got.GBps[k].size() == 3);
      CHECK(got.GBps[k][1] == Approx(bw).epsilon(1e-6));
      // the model's charge: launches * alpha + bytes / bw gives the measured time back
      for (std::size_t i = 0; i < samples.size(); ++i) {
        const double bytes = cv->points[i].first;
        const int tensors = k == 0 || k == 5 ? 3 : 1;
        CHECK(exchange_launches(c, tensors) * alpha + bytes / (cv->points[i].second * 1e9) == Approx(samples[i].t_s[k]));
      }
    }
    // one curve per phase and sp size, replaced, not appended (the profile's P = 2 curves included)
    CHECK(c.a2a_phase_GBps.size() == 4);
    // busbw(X) = (P-1)/P * X / (t(a2a.out.bwd) - alpha - 2X/pack)
    REQUIRE(got.busbw_GBps.size() == 3);
    const double X = samples[2].q_bytes;
    CHECK(got.busbw_GBps[2] == Approx(0.5 * X / (samples[2].t_s[3] - alpha - 2 * X / (c.pack_GBps * 1e9)) / 1e9));
    int p2 = 0;
    for (const auto& [P, cv] : c.a2a_busbw_GBps) p2 += P == 2;
    CHECK(p2 == 1);
  }
}

TEST_CASE("derive_a2a_curves needs alpha per tensor and the pack bandwidth", "[calib][a2a]") {
  Calibration c;
  CHECK_THROWS_AS(calib::derive_a2a_curves(2, synthetic("p2p", 1e-5), "p2p", c), std::invalid_argument);
  c.a2a_alpha_per_tensor_s = 1e-5;
  CHECK_THROWS_AS(calib::derive_a2a_curves(2, synthetic("p2p", 1e-5), "p2p", c), std::invalid_argument);
  c.pack_GBps = 1000;
  CHECK_NOTHROW(calib::derive_a2a_curves(2, synthetic("p2p", 1e-5), "p2p", c));
}

TEST_CASE("derive_a2a_idle_curve: the penalty over the T = 0 baseline, never negative", "[calib][a2a]") {
  Calibration c;
  calib::derive_a2a_idle_curve({0, 10, 40, 60}, {100e-6, 100.5e-6, 99e-6, 195e-6}, c);
  REQUIRE(c.a2a_idle_penalty_us.points.size() == 3);  // T > 0 only
  CHECK(c.a2a_idle_penalty_us.points[0].first == 10);
  CHECK(c.a2a_idle_penalty_us.points[0].second == Approx(0.5));
  CHECK(c.a2a_idle_penalty_us.points[1].second == 0);  // faster than the baseline: no negative penalty
  CHECK(c.a2a_idle_penalty_us.points[2].second == Approx(95));
  CHECK_THROWS_AS(calib::derive_a2a_idle_curve({5, 10}, {1e-4, 2e-4}, c), std::invalid_argument);  // no baseline
  CHECK_THROWS_AS(calib::derive_a2a_idle_curve({0}, {1e-4}, c), std::invalid_argument);
  CHECK_THROWS_AS(calib::derive_a2a_idle_curve({0, 1}, {1e-4}, c), std::invalid_argument);
}

TEST_CASE("a raw file re-derived onto a profile: curves, provenance, idle samples only", "[calib][a2a][raw]") {
  TempDir dir;
  std::ofstream(dir / "raw.json") << synthetic_raw("nccl", h200().a2a_alpha_per_tensor_s).dump();
  const calib::CalibrationRaw raw = calib::read_calibration_raw(dir / "raw.json");
  CHECK(raw.P == 2);
  CHECK(raw.transport == "nccl");
  CHECK(raw.samples.size() == 3);
  CHECK(raw.idle_ms.empty());
  HardwareProfile hw = load_profile("h200-sxm-141gb");
  std::ostringstream out;
  const Calibration c = calib::rederive_from_raw(raw, hw, "h200-sxm-141gb", "test cmd", out);
  CHECK(c.a2a_transport == "nccl");
  CHECK(curve(c, "a2a.out.fwd@p2")->points[0].second == Approx(600).epsilon(1e-6));
  CHECK(c.provenance.find("re-derived") != std::string::npos);
  CHECK(c.provenance.find("`test cmd`") != std::string::npos);
  CHECK(out.str().find("exchange curves of P=2 re-derived from") != std::string::npos);

  // idle samples only: the exchange curves stay as they were
  json idle{{"measured_at", "synthetic"}, {"a2a_idle", json::array()}};
  for (auto [T, t] : {std::pair{0.0, 100e-6}, {10.0, 100.5e-6}, {60.0, 195e-6}})
    idle["a2a_idle"].push_back({{"P", 2}, {"idle_ms", T}, {"a2a.out.bwd_s", t}});
  std::ofstream(dir / "idle.json") << idle.dump();
  const Calibration ci = calib::rederive_from_raw(calib::read_calibration_raw(dir / "idle.json"), hw, "h200", "t", out);
  CHECK(ci.a2a_idle_penalty_us.points.size() == 2);
  CHECK(ci.a2a_idle_penalty_us.points[1].second == Approx(95));
  CHECK(ci.a2a_phase_GBps.size() == h200().a2a_phase_GBps.size());
  CHECK(ci.a2a_transport == h200().a2a_transport);

  // a profile without a calibrated section, or without what the exchange fit needs
  hw.has_calibration = false;
  CHECK_THROWS_WITH(calib::rederive_from_raw(raw, hw, "p", "t", out), Catch::Contains("no calibrated section"));
  hw.has_calibration = true;
  hw.calibrated.pack_GBps = 0;
  try {
    (void)calib::rederive_from_raw(raw, hw, "p", "t", out);
    FAIL("a profile without pack_GBps must be refused");
  } catch (const core::InputError& e) {
    CHECK(e.key() == "calibrated");
  }
}

TEST_CASE("the committed H200 profile is the derivation of the committed raw calibration", "[calib][a2a][raw]") {
  const calib::CalibrationRaw raw = calib::read_calibration_raw(record_path("validation/h200-calibration.json"));
  std::ostringstream out;
  const Calibration now = calib::rederive_from_raw(raw, load_profile("h200-sxm-141gb"), "h200-sxm-141gb", "test", out);
  const Calibration& committed = h200();
  CHECK(committed.a2a_transport == "p2p");
  REQUIRE(now.a2a_phase_GBps.size() == committed.a2a_phase_GBps.size());
  for (const auto& [key, cv] : committed.a2a_phase_GBps) {
    INFO(key);
    const Curve* got = curve(now, key);
    REQUIRE(got != nullptr);
    REQUIRE(got->points.size() == cv.points.size());
    for (std::size_t i = 0; i < cv.points.size(); ++i) CHECK(got->points[i].second == Approx(cv.points[i].second).epsilon(1e-9));
  }
}

TEST_CASE("read_calibration_raw names the file and key of what is wrong", "[calib][a2a][raw]") {
  TempDir dir;
  auto key_of = [&](const std::string& text) {
    std::ofstream(dir / "bad.json") << text;
    try {
      (void)calib::read_calibration_raw(dir / "bad.json");
    } catch (const core::InputError& e) {
      CHECK(e.file() == dir / "bad.json");
      return e.key();
    }
    return std::string("(no error)");
  };
  CHECK(key_of("not json") == "--from-raw");
  CHECK(key_of("{}") == "a2a");
  CHECK(key_of(R"({"a2a": []})") == "a2a");
  CHECK(key_of(R"({"a2a_transport": "tcp", "a2a": [{"P": 2}]})") == "a2a_transport");
  CHECK(key_of(R"({"a2a": [{"P": 2, "q_bytes_per_rank": 1e6}]})") == "a2a[0].qkv_bytes_per_rank");
  CHECK(key_of(R"({"a2a_idle": [{"idle_ms": 5, "a2a.out.bwd_s": 1e-4}, {"idle_ms": 10, "a2a.out.bwd_s": 1e-4}]})") == "a2a_idle[0]");
  CHECK(key_of(R"({"a2a_idle": [{"idle_ms": 0, "a2a.out.bwd_s": 1e-4}]})") == "a2a_idle");
}
