#pragma once
// `ulysses compare` of the attention block: the scenario predicted next to its run on a backend; per
// phase and for peak memory: predicted, measured and the signed error (predicted - measured) /
// measured in %; the Chrome/Perfetto trace with the predicted and the measured timeline.
#include <string>

#include "reports/json_out.hpp"
#include "runtime/backend.hpp"
#include "sim/prediction.hpp"
#include "sim/scenario.hpp"

namespace ulysses::eval {

// The prediction of the kernel that ran: the CUDA backend runs its own kernels for the PyTorch names
// (flash_attention_2, sdpa, ... -> ulysses_flash, docs/INPUTS.md), which the profile calibrates under
// their own keys; the PyTorch names' efficiencies describe PyTorch. `planned` (predict(sc), made before
// the run) is reused when the kernel that ran is the planned one: the scenario is predicted once.
struct AsRun {
  Scenario sc;       // sc with plan.attn_implementation = the kernel that ran
  Prediction p;      // its prediction
  std::string note;  // one line when the kernel differs from the plan's, else ""
};
AsRun prediction_as_run(const Scenario& sc, const Prediction& planned, const runtime::Measurement& m);

// phases [{name, predicted_s, measured_s, error_pct, measured_min_s, measured_max_s}], block_total,
// peak_memory (under the backend's allocation policy), exchange_bytes_per_rank, measurement, correct.
reports::Json block_comparison_json(const Scenario& sc, const Prediction& p, const runtime::Measurement& m);
std::string block_comparison_table(const Scenario& sc, const reports::Json& comparison);
// Two processes: the prediction (the block's phases back to back on one thread: every rank is
// predicted alike) and the measurement (one thread per rank: the phases of the last timed
// iteration with their segments nested inside).
reports::Json block_comparison_trace(const Prediction& p, const runtime::Measurement& m, const reports::Json& comparison);

}  // namespace ulysses::eval
