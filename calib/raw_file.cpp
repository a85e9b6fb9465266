// Raw calibration files (calib/raw_file.hpp): reading with one InputError per bad key, and the
// re-derivation of a profile's curves from them.
#include "calib/raw_file.hpp"

#include <fmt/format.h>

#include "reports/format.hpp"
#include "reports/json_in.hpp"
#include "core/errors.hpp"
#include "core/phases.hpp"
#include "sim/timing.hpp"
#include "sim/provenance.hpp"

namespace ulysses::calib {

namespace {

constexpr double kMinRawS = 1e-9, kMaxRawS = 1e6, kMaxRawBytes = 1e15;

double raw_time(const reports::JsonIn& v) {
  if (!v.json().is_number() || !(v.json().get<double>() >= kMinRawS && v.json().get<double>() <= kMaxRawS))
    v.fail(fmt::format("phase times must be > 0 seconds (a number in [{:g}, {:g}]; got {})", kMinRawS, kMaxRawS, v.json().dump()));
  return v.json().get<double>();
}

}  // namespace

CalibrationRaw read_calibration_raw(const std::string& path) {
  reports::Json j;
  try {
    j = reports::read_json_file(path, "--from-raw");
  } catch (const core::InputError& e) {
    if (e.key() != "file") throw;
    throw core::InputError(path, "--from-raw", "is not a JSON object: " + e.rule());
  }
  const reports::JsonIn raw(j, path);
  if (!j.is_object()) throw core::InputError(path, "--from-raw", "is not a JSON object");
  CalibrationRaw r;
  r.path = path;
  const bool has_a2a = raw.has("a2a"), has_idle = raw.has("a2a_idle");
  if (!has_a2a && !has_idle)
    throw core::InputError(path, "a2a", "the file holds neither exchange samples (a2a) nor idle-link samples (a2a_idle) "
                                  "(written by calibrate --backend cuda --json)");
  if (has_a2a && (!j["a2a"].is_array() || j["a2a"].empty()))
    throw core::InputError(path, "a2a", "must be a non-empty list of exchange samples (written by calibrate --backend cuda --json)");
  if (has_idle && (!j["a2a_idle"].is_array() || j["a2a_idle"].empty()))
    throw core::InputError(path, "a2a_idle", "must be a non-empty list of idle-link samples");
  r.transport = raw.str_or("a2a_transport", "nccl");
  if (r.transport != "nccl" && r.transport != "p2p") throw core::InputError(path, "a2a_transport", "must be nccl or p2p");
  r.measured_at = raw.str_or("measured_at", "?");
  // "a2a_idle": [{idle_ms, a2a.out.bwd_s}, ...], T = 0 first, T increasing
  for (std::size_t i = 0; has_idle && i < j["a2a_idle"].size(); ++i) {
    const reports::JsonIn e = raw.at("a2a_idle").at(i);
    const double T = e.at("idle_ms").number_in(0, false, 1e9, false, "a number of milliseconds in [0, 1e9]");
    const double t = raw_time(e.at("a2a.out.bwd_s"));
    if (i == 0 && T != 0) e.fail("the first sample must be idle_ms 0 (the baseline)");
    if (i > 0 && !(T > r.idle_ms.back())) e.fail("idle_ms must increase strictly");
    r.idle_ms.push_back(T), r.idle_t_s.push_back(t);
  }
  if (has_idle && r.idle_ms.size() < 2)
    throw core::InputError(path, "a2a_idle", "needs the idle_ms 0 baseline and at least one more sample");
  // "a2a": [{P, q_bytes_per_rank, qkv_bytes_per_rank, <phase>_s...}], one P, sizes increasing (the curves' x)
  for (std::size_t i = 0; has_a2a && i < j["a2a"].size(); ++i) {
    const reports::JsonIn e = raw.at("a2a").at(i);
    const int p = static_cast<int>(e.at("P").integer(2, 1 << 20));
    if (r.P != 0 && p != r.P) e.at("P").fail("all samples must share one sp size");
    r.P = p;
    A2aSample s;
    const std::string bytes_rule = fmt::format("a number of bytes in (0, {:g}]", kMaxRawBytes);
    s.q_bytes = e.at("q_bytes_per_rank").number_in(0, true, kMaxRawBytes, false, bytes_rule);
    s.qkv_bytes = e.at("qkv_bytes_per_rank").number_in(0, true, kMaxRawBytes, false, bytes_rule);
    for (int k : kExchangePhases) s.t_s[k] = raw_time(e.at(std::string(core::kBlockPhaseNames[k]) + "_s"));
    if (!r.samples.empty() && !(s.q_bytes > r.samples.back().q_bytes && s.qkv_bytes > r.samples.back().qkv_bytes))
      e.fail("q_bytes_per_rank and qkv_bytes_per_rank must increase strictly from sample to sample (the curves' x)");
    r.samples.push_back(s);
  }
  return r;
}

void apply_calibration_raw(const CalibrationRaw& raw, const std::string& cmd, Calibration& c, std::ostream& out) {
  if (!raw.idle_ms.empty()) {
    derive_a2a_idle_curve(raw.idle_ms, raw.idle_t_s, c);
    set_provenance(c.provenance, "a2a_idle",
                   fmt::format("a2a_idle_penalty_us derived {} by `{}` from the raw measurements of {} ({} samples)",
                               reports::utc_now(), cmd, raw.measured_at, raw.idle_ms.size()));
    out << fmt::format("idle-link penalty curve re-derived from {}:", raw.path);
    for (const auto& [x, y] : c.a2a_idle_penalty_us.points) out << fmt::format(" {:g} ms: {:.1f} us;", x, y);
    out << "\n";
  }
  if (raw.samples.empty()) return;
  const auto got = derive_a2a_curves(raw.P, raw.samples, raw.transport, c);
  set_provenance(c.provenance, "exchange",
                 fmt::format("exchange curves re-derived {} by `{}` from the raw measurements of {} ({} samples, "
                             "transport {}: {} fixed cost(s) per q,k,v phase)",
                             reports::utc_now(), cmd, raw.measured_at, raw.samples.size(), raw.transport,
                             exchange_launches(c, 3)));
  out << fmt::format("exchange curves of P={} re-derived from {} ({} samples, transport {}, alpha {:.1f} us):\n", raw.P, raw.path,
                     raw.samples.size(), raw.transport, c.a2a_alpha_per_tensor_s * 1e6);
  for (std::size_t i = 0; i < raw.samples.size(); ++i)
    out << fmt::format("  X={:>12.0f} B  qkv.fwd {:.1f}  out.fwd {:.1f}  out.bwd {:.1f}  qkv.bwd {:.1f} GB/s  busbw {:.1f} GB/s\n",
                       raw.samples[i].q_bytes, got.GBps[0][i], got.GBps[2][i], got.GBps[3][i], got.GBps[5][i], got.busbw_GBps[i]);
}

Calibration rederive_from_raw(const CalibrationRaw& raw, const HardwareProfile& hw, const std::string& profile,
                              const std::string& cmd, std::ostream& out) {
  if (!hw.has_calibration) throw core::InputError(profile, "calibrated", "the profile has no calibrated section to update");
  if (!raw.samples.empty() && (hw.calibrated.a2a_alpha_per_tensor_s < 0 || !(hw.calibrated.pack_GBps > 0)))
    throw core::InputError(profile, "calibrated",
                     "needs a2a_alpha_per_tensor_us and pack_GBps to derive exchange curves (calibrate --backend cuda)");
  Calibration c = hw.calibrated;
  apply_calibration_raw(raw, cmd, c, out);
  return c;
}

}  // namespace ulysses::calib
