#pragma once
// `ulysses calibrate --backend cuda`: microbenchmarks on the GPU host (calib/cuda/microbench.hpp)
// fitted to the `calibrated:` section of a hardware profile, with every raw measurement (the JSON
// that `calibrate --from-raw` re-derives from, calib/raw_file.hpp).
#include <string>

#include "reports/json_out.hpp"
#include "sim/scenario.hpp"

namespace ulysses::calib::cuda {

struct Result {
  Calibration c;       // the calibrated section
  reports::Json raw;   // every raw measurement (`--json`)
  std::string report;  // the tables of what was measured
};

// Everything, on the GPUs of this host; efficiencies against hw's peak. quick: two S points, h 4
// and 16, three exchange sizes (a smoke test). command: the command line, for the provenance.
Result calibrate(const HardwareProfile& hw, bool quick, const std::string& command);

// Only the exchange-after-idle-links curve, updated in hw's calibrated section (which it must
// have); needs 2 GPUs (InputError keyed --only).
Result calibrate_idle_only(const HardwareProfile& hw, const std::string& command);
// `--only ulysses-kernels`: our runtime's elementwise kernels, host optimizer and GEMMs alone
// (calib/cuda/kernel_rates.hpp, calib/host_adam_rate.hpp, calib/cuda/gemm_rates.hpp), into the profile's
// existing calibrated section (one GPU).
Result calibrate_kernels_only(const HardwareProfile& hw, const std::string& command);
// `--only attention`: our flash kernels' attention curves (keys ulysses_flash@..., and the bare key) measured
// again, into the profile's existing calibrated section; every other curve stays (one GPU).
Result calibrate_attention_only(const HardwareProfile& hw, const std::string& command);

}  // namespace ulysses::calib::cuda
