#pragma once
// What the time model's two files share (sim/timing.cpp: the step; sim/block_timing.cpp: the block): units, the
// tokens of a rank, and the rule that a calibrated figure (> 0, in a profile with a calibrated section) overrides the
// datasheet's.
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/timing.hpp"

namespace ulysses::timing_detail {

inline constexpr double kGBps = 1e9;  // GB/s -> bytes/s

inline double tokens(const Dims& d) { return static_cast<double>(d.B) * static_cast<double>(d.S_l); }

// a calibrated rate when the profile has it (> 0), else the fallback
inline double measured_or(const Scenario& sc, double calibrated, double fallback) {
  return sc.hw.has_calibration && calibrated > 0 ? calibrated : fallback;
}
inline double copy_GBps(const Scenario& sc) { return measured_or(sc, sc.hw.calibrated.pack_GBps, sc.hw.hbm_GBps); }

// A curve from a list keyed by sp size; nullptr when absent or empty.
inline const Curve* find_curve(const std::vector<std::pair<std::int64_t, Curve>>& v, std::int64_t key) {
  for (const auto& [k, c] : v)
    if (k == key && !c.empty()) return &c;
  return nullptr;
}

}  // namespace ulysses::timing_detail
