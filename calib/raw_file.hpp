#pragma once
// Raw calibration files (`calibrate --backend cuda --json`): read and checked, and re-derived onto a
// profile's calibrated section with the fits of calib/a2a_fit.hpp (`calibrate --from-raw`, no GPU).
#include <ostream>
#include <string>
#include <vector>

#include "calib/a2a_fit.hpp"
#include "sim/scenario.hpp"

namespace ulysses::calib {

// A raw calibration file, read and checked: every key's type and range, one InputError naming the
// file and key (a2a[3].q_bytes_per_rank: ...).
struct CalibrationRaw {
  std::string path, transport = "nccl", measured_at = "?";
  std::vector<double> idle_ms, idle_t_s;  // "a2a_idle" samples (empty: none), T = 0 first
  int P = 0;
  std::vector<A2aSample> samples;         // "a2a" samples (empty: none), one P, sizes increasing
};
CalibrationRaw read_calibration_raw(const std::string& path);

// Re-derives c's idle-link and exchange curves from raw (c needs a2a_alpha_per_tensor_s >= 0 and
// pack_GBps > 0 when raw has exchange samples); appends to c.provenance naming cmd; says what it
// derived on out.
void apply_calibration_raw(const CalibrationRaw& raw, const std::string& cmd, Calibration& c, std::ostream& out);

// The calibrated section of profile hw (named `profile` on the command line) with the curves of raw
// re-derived (apply_calibration_raw); InputError keyed `calibrated` when hw has no section to update
// or lacks what the exchange fit needs.
Calibration rederive_from_raw(const CalibrationRaw& raw, const HardwareProfile& hw, const std::string& profile,
                              const std::string& cmd, std::ostream& out);

}  // namespace ulysses::calib
