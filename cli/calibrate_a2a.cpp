#include "cli/calibrate_a2a.hpp"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "reports/format.hpp"
#include <nlohmann/json.hpp>

#include "cli/calibration_out.hpp"
#include "cli/commands.hpp"
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

// The "a2a_idle" samples of a raw file: [{idle_ms, a2a.out.bwd_s}, ...], T = 0 first, T increasing.
void idle_from_raw(const nlohmann::json& raw, const std::string& path, Calibration& c) {
  std::vector<double> T, t;
  for (std::size_t i = 0; i < raw["a2a_idle"].size(); ++i) {
    const auto& e = raw["a2a_idle"][i];
    const std::string where = fmt::format("a2a_idle[{}]", i);
    try {
      T.push_back(e.at("idle_ms").get<double>());
      t.push_back(e.at("a2a.out.bwd_s").get<double>());
    } catch (const nlohmann::json::exception&) {
      throw InputError(path, where, "needs numbers idle_ms and a2a.out.bwd_s");
    }
    if (!(t.back() > 0)) throw InputError(path, where, "a2a.out.bwd_s must be > 0 seconds");
    if (i == 0 && T[0] != 0) throw InputError(path, where, "the first sample must be idle_ms 0 (the baseline)");
    if (i > 0 && !(T[i] > T[i - 1])) throw InputError(path, where, "idle_ms must increase strictly");
  }
  if (T.size() < 2) throw InputError(path, "a2a_idle", "needs the idle_ms 0 baseline and at least one more sample");
  derive_a2a_idle_curve(T, t, c);
}

}  // namespace

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
  const std::string path = vm["from-raw"].as<std::string>();
  std::ifstream f(path);
  if (!f) throw InputError(path, "--from-raw", "cannot open the raw calibration JSON");
  std::stringstream ss;
  ss << f.rdbuf();
  const auto raw = nlohmann::json::parse(ss.str(), nullptr, false);
  if (raw.is_discarded() || !raw.is_object()) throw InputError(path, "--from-raw", "is not a JSON object");
  const bool has_a2a = raw.contains("a2a"), has_idle = raw.contains("a2a_idle");
  if (!has_a2a && !has_idle)
    throw InputError(path, "a2a", "the file holds neither exchange samples (a2a) nor idle-link samples (a2a_idle) "
                                  "(written by calibrate --backend cuda --json)");
  if (has_a2a && (!raw["a2a"].is_array() || raw["a2a"].empty()))
    throw InputError(path, "a2a", "must be a non-empty list of exchange samples (written by calibrate --backend cuda --json)");
  if (has_idle && (!raw["a2a_idle"].is_array() || raw["a2a_idle"].empty()))
    throw InputError(path, "a2a_idle", "must be a non-empty list of idle-link samples");
  const std::string transport = raw.value("a2a_transport", std::string("nccl"));
  if (transport != "nccl" && transport != "p2p") throw InputError(path, "a2a_transport", "must be nccl or p2p");
  HardwareProfile hw = load_profile(vm["profile"].as<std::string>());
  if (!hw.has_calibration) throw InputError(vm["profile"].as<std::string>(), "calibrated", "the profile has no calibrated section to update");
  Calibration c = hw.calibrated;
  std::string cmd = "ulysses calibrate";
  for (int i = 1; i < argc; ++i) cmd += std::string(" ") + argv[i];
  if (has_idle) {
    idle_from_raw(raw, path, c);
    c.provenance += fmt::format("; a2a_idle_penalty_us derived {} by `{}` from the raw measurements of {} ({} samples)", utc_now(),
                                cmd, raw.value("measured_at", std::string("?")), raw["a2a_idle"].size());
    std::cout << fmt::format("idle-link penalty curve re-derived from {}:", path);
    for (const auto& [x, y] : c.a2a_idle_penalty_us.points) std::cout << fmt::format(" {:g} ms: {:.1f} us;", x, y);
    std::cout << "\n";
  }
  if (!has_a2a) {
    write_calibration_output(vm, hw.name, c);
    return kExitOk;
  }
  std::vector<A2aSample> samples;
  int P = 0;
  for (std::size_t i = 0; i < raw["a2a"].size(); ++i) {
    const auto& e = raw["a2a"][i];
    const std::string where = fmt::format("a2a[{}]", i);
    A2aSample s;
    try {
      const int p = e.at("P").get<int>();
      if (P != 0 && p != P) throw InputError(path, where + ".P", "all samples must share one sp size");
      P = p;
      s.q_bytes = e.at("q_bytes_per_rank").get<double>(), s.qkv_bytes = e.at("qkv_bytes_per_rank").get<double>();
      for (int k : kExchangePhases) s.t_s[k] = e.at(std::string(kBlockPhaseNames[k]) + "_s").get<double>();
    } catch (const nlohmann::json::exception&) {
      throw InputError(path, where, "needs numbers P, q_bytes_per_rank, qkv_bytes_per_rank and <phase>_s for the four exchange phases");
    }
    for (int k : kExchangePhases)
      if (!(s.t_s[k] > 0)) throw InputError(path, where, "phase times must be > 0 seconds");
    if (P < 2 || !(s.q_bytes > 0) || !(s.qkv_bytes > 0)) throw InputError(path, where, "needs P >= 2 and positive byte counts");
    samples.push_back(s);
  }
  const auto got = derive_a2a_curves(P, samples, transport, c);
  c.provenance += fmt::format("; exchange curves re-derived {} by `{}` from the raw measurements of {} ({} samples, "
                              "transport {}: {} fixed cost(s) per q,k,v phase)",
                              utc_now(), cmd, raw.value("measured_at", std::string("?")), samples.size(), transport,
                              sim::exchange_launches(c, 3));
  std::cout << fmt::format("exchange curves of P={} re-derived from {} ({} samples, transport {}, alpha {:.1f} us):\n", P, path,
                           samples.size(), transport, c.a2a_alpha_per_tensor_s * 1e6);
  for (std::size_t i = 0; i < samples.size(); ++i)
    std::cout << fmt::format("  X={:>12.0f} B  qkv.fwd {:.1f}  out.fwd {:.1f}  out.bwd {:.1f}  qkv.bwd {:.1f} GB/s  busbw {:.1f} GB/s\n",
                             samples[i].q_bytes, got.GBps[0][i], got.GBps[2][i], got.GBps[3][i], got.GBps[5][i], got.busbw_GBps[i]);
  write_calibration_output(vm, hw.name, c);
  return kExitOk;
}

}  // namespace ulysses::cli
