// Exchange curve fitting (calib/a2a_fit.hpp): per-phase bandwidths and the busbw curve inverted
// from measured phase times, the idle-link penalty curve.
#include "calib/a2a_fit.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/phases.hpp"
#include "sim/timing.hpp"

namespace ulysses::calib {
namespace {

constexpr std::array<int, 6> kTensors = {3, 0, 1, 1, 0, 3};  // the 32/8/128 shape: q,k,v or one tensor

template <class V>
void erase_P(V& v, const std::string& suffix) {
  v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& e) { return e.first.size() > suffix.size() &&
                                                                         e.first.compare(e.first.size() - suffix.size(), suffix.size(), suffix) == 0; }),
          v.end());
}

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
      const double fixed = exchange_launches(c, kTensors[k]) * alpha;
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
  for (int k : kExchangePhases) c.a2a_phase_GBps.emplace_back(fmt::format("{}@p{}", core::kBlockPhaseNames[k], P), per_phase[k]);
  return d;
}

void derive_a2a_idle_curve(const std::vector<double>& idle_ms, const std::vector<double>& t_s, Calibration& c) {
  if (idle_ms.size() != t_s.size() || idle_ms.size() < 2 || idle_ms[0] != 0)
    throw std::invalid_argument("derive_a2a_idle_curve: needs T = 0 first and at least one T > 0");
  Curve pen;
  for (std::size_t i = 1; i < idle_ms.size(); ++i) pen.points.emplace_back(idle_ms[i], std::max(0.0, t_s[i] - t_s[0]) * 1e6);
  c.a2a_idle_penalty_us = pen;
}

}  // namespace ulysses::calib
