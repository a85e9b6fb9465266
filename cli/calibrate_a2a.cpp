#include "cli/calibrate_a2a.hpp"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "reports/format.hpp"
#include "reports/json_in.hpp"
#include <nlohmann/json.hpp>

#include "cli/calibration_out.hpp"
#include "cli/options.hpp"
#include "sim/config.hpp"
#include "sim/errors.hpp"
#include "sim/phases.hpp"
#include "sim/timing.hpp"

namespace ulysses::cli {
namespace {

constexpr std::array<int, 4> kExchangePhases = {0, 2, 3, 5};
constexpr std::array<int, 6> kTensors = {3, 0, 1, 1, 0, 3};  // the 32/8/128 shape: q,k,v or one tensor

template <class V>
void erase_P(V& v, const std::string& suffix) {
  v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& e) { return e.first.size() > suffix.size() &&
                                                                         e.first.compare(e.first.size() - suffix.size(), suffix.size(), suffix) == 0; }),
          v.end());
}

using reports::utc_now;

}  // namespace

A2aDerived derive_a2a_curves(int P, const std::vector<A2aSample>& samples, const std::string& transport, Calibration& c) {
  if (c.a2a_alpha_per_tensor_s < 0 || !(c.pack_GBps > 0))
    throw std::invalid_argument("derive_a2a_curves: alpha per tensor and pack bandwidth must be calibrated first");
  c.a2a_transport = transport;
  const double alpha = c.a2a_alpha_per_tensor_s, pack = c.pack_GBps * 1e9, frac = double(P - 1) / P;
  A2aDerived d;
  std::array<Curve, 6> per_phase;
  Curve busbw;
  for (const auto& s : samples) {
    for (int k : kExchangePhases) {
      const double b = kTensors[k] == 3 ? s.qkv_bytes : s.q_bytes;
      const double fixed = sim::exchange_launches(c, kTensors[k]) * alpha;
      const double gbps = b / std::max(s.t_s[k] - fixed, 0.1 * s.t_s[k]) / 1e9;
      per_phase[k].points.emplace_back(b, gbps);
      d.GBps[k].push_back(gbps);
    }
    const double wire = std::max(s.t_s[3] - alpha - 2 * s.q_bytes / pack, 0.1 * s.t_s[3]);
    busbw.points.emplace_back(s.q_bytes, frac * s.q_bytes / wire / 1e9);
    d.busbw_GBps.push_back(busbw.points.back().second);
  }
  c.a2a_busbw_GBps.erase(std::remove_if(c.a2a_busbw_GBps.begin(), c.a2a_busbw_GBps.end(), [&](const auto& e) { return e.first == P; }),
                         c.a2a_busbw_GBps.end());
  c.a2a_busbw_GBps.emplace_back(P, busbw);
  erase_P(c.a2a_phase_GBps, fmt::format("@p{}", P));
  for (int k : kExchangePhases) c.a2a_phase_GBps.emplace_back(fmt::format("{}@p{}", kBlockPhaseNames[k], P), per_phase[k]);
  return d;
}

void derive_a2a_idle_curve(const std::vector<double>& idle_ms, const std::vector<double>& t_s, Calibration& c) {
  if (idle_ms.size() != t_s.size() || idle_ms.size() < 2 || idle_ms[0] != 0)
    throw std::invalid_argument("derive_a2a_idle_curve: needs T = 0 first and at least one T > 0");
  Curve pen;
  for (std::size_t i = 1; i < idle_ms.size(); ++i) pen.points.emplace_back(idle_ms[i], std::max(0.0, t_s[i] - t_s[0]) * 1e6);
  c.a2a_idle_penalty_us = pen;
}

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
  } catch (const InputError& e) {
    if (e.key() != "file") throw;
    throw InputError(path, "--from-raw", "is not a JSON object: " + e.rule());
  }
  const reports::JsonIn raw(j, path);
  if (!j.is_object()) throw InputError(path, "--from-raw", "is not a JSON object");
  CalibrationRaw r;
  r.path = path;
  const bool has_a2a = raw.has("a2a"), has_idle = raw.has("a2a_idle");
  if (!has_a2a && !has_idle)
    throw InputError(path, "a2a", "the file holds neither exchange samples (a2a) nor idle-link samples (a2a_idle) "
                                  "(written by calibrate --backend cuda --json)");
  if (has_a2a && (!j["a2a"].is_array() || j["a2a"].empty()))
    throw InputError(path, "a2a", "must be a non-empty list of exchange samples (written by calibrate --backend cuda --json)");
  if (has_idle && (!j["a2a_idle"].is_array() || j["a2a_idle"].empty()))
    throw InputError(path, "a2a_idle", "must be a non-empty list of idle-link samples");
  r.transport = raw.str_or("a2a_transport", "nccl");
  if (r.transport != "nccl" && r.transport != "p2p") throw InputError(path, "a2a_transport", "must be nccl or p2p");
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
    throw InputError(path, "a2a_idle", "needs the idle_ms 0 baseline and at least one more sample");
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
    for (int k : kExchangePhases) s.t_s[k] = raw_time(e.at(std::string(kBlockPhaseNames[k]) + "_s"));
    if (!r.samples.empty() && !(s.q_bytes > r.samples.back().q_bytes && s.qkv_bytes > r.samples.back().qkv_bytes))
      e.fail("q_bytes_per_rank and qkv_bytes_per_rank must increase strictly from sample to sample (the curves' x)");
    r.samples.push_back(s);
  }
  return r;
}

void apply_calibration_raw(const CalibrationRaw& raw, const std::string& cmd, Calibration& c, std::ostream& out) {
  if (!raw.idle_ms.empty()) {
    derive_a2a_idle_curve(raw.idle_ms, raw.idle_t_s, c);
    c.provenance += fmt::format("; a2a_idle_penalty_us derived {} by `{}` from the raw measurements of {} ({} samples)", utc_now(),
                                cmd, raw.measured_at, raw.idle_ms.size());
    out << fmt::format("idle-link penalty curve re-derived from {}:", raw.path);
    for (const auto& [x, y] : c.a2a_idle_penalty_us.points) out << fmt::format(" {:g} ms: {:.1f} us;", x, y);
    out << "\n";
  }
  if (raw.samples.empty()) return;
  const auto got = derive_a2a_curves(raw.P, raw.samples, raw.transport, c);
  c.provenance += fmt::format("; exchange curves re-derived {} by `{}` from the raw measurements of {} ({} samples, "
                              "transport {}: {} fixed cost(s) per q,k,v phase)",
                              utc_now(), cmd, raw.measured_at, raw.samples.size(), raw.transport,
                              sim::exchange_launches(c, 3));
  out << fmt::format("exchange curves of P={} re-derived from {} ({} samples, transport {}, alpha {:.1f} us):\n", raw.P, raw.path,
                     raw.samples.size(), raw.transport, c.a2a_alpha_per_tensor_s * 1e6);
  for (std::size_t i = 0; i < raw.samples.size(); ++i)
    out << fmt::format("  X={:>12.0f} B  qkv.fwd {:.1f}  out.fwd {:.1f}  out.bwd {:.1f}  qkv.bwd {:.1f} GB/s  busbw {:.1f} GB/s\n",
                       raw.samples[i].q_bytes, got.GBps[0][i], got.GBps[2][i], got.GBps[3][i], got.GBps[5][i], got.busbw_GBps[i]);
}

int run_calibrate_from_raw(int argc, char** argv) {
  po::options_description d("calibrate --from-raw options");
  d.add_options()("help,h", "this help")("from-raw", po::value<std::string>(), "raw JSON written by `calibrate --backend cuda --json`")
      ("backend", po::value<std::string>()->default_value("cuda"), "cuda (the backend the raw file came from)")
      ("profile", po::value<std::string>()->default_value("h200-sxm-141gb"), "profile (name or path) whose calibrated section is updated")
      ("profile-out", po::value<std::string>(), "write the profile with the updated section here (else print the section)");
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help") || !vm.count("from-raw")) {
    print_help(argv[0], "--from-raw FILE [--profile h200-sxm-141gb] [--profile-out FILE]",
               "Re-derives a profile's exchange curves from stored raw calibration measurements (no GPU needed):\n"
               "after a change of how curves are derived, the same measurements give the new curves.",
               d);
    return vm.count("help") ? kExitOk : kExitInput;
  }
  const CalibrationRaw raw = read_calibration_raw(vm["from-raw"].as<std::string>());
  HardwareProfile hw = load_profile(vm["profile"].as<std::string>());
  if (!hw.has_calibration) throw InputError(vm["profile"].as<std::string>(), "calibrated", "the profile has no calibrated section to update");
  if (!raw.samples.empty() && (hw.calibrated.a2a_alpha_per_tensor_s < 0 || !(hw.calibrated.pack_GBps > 0)))
    throw InputError(vm["profile"].as<std::string>(), "calibrated",
                     "needs a2a_alpha_per_tensor_us and pack_GBps to derive exchange curves (calibrate --backend cuda)");
  Calibration c = hw.calibrated;
  std::string cmd = "ulysses calibrate";
  for (int i = 1; i < argc; ++i) cmd += std::string(" ") + argv[i];
  apply_calibration_raw(raw, cmd, c, std::cout);
  write_calibration_output(vm, hw.name, c);
  return kExitOk;
}

}  // namespace ulysses::cli
