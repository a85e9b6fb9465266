#pragma once
// `ulysses capacity` of the attention block (forward + backward): the longest S the model predicts
// (the largest multiple of the granularity whose predicted block_peak_bytes fits HBM minus the
// calibrated fixed costs: CUDA context, and NCCL buffers when P > 1) next to the one bisected on the
// GPUs (every block buffer allocated for real on every rank until an allocation fails,
// runtime/cuda/capacity_probe.hpp); the table, the missed target, the stored record re-predicted.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "eval/validation_set.hpp"
#include "reports/json_out.hpp"
#include "sim/scenario.hpp"

namespace ulysses::eval {

// The memory the block may use per rank: HBM minus the fixed costs (calibrated when present).
core::bytes_t usable_bytes(const Scenario& sc);
// Largest multiple of g whose predicted block peak fits usable_bytes (0 when even g does not).
std::int64_t predicted_max_S(const Scenario& sc, std::int64_t g);

struct BlockCapacityCase {
  std::string name;
  Keys keys;
  Scenario sc;
  std::int64_t predicted_S = 0, measured_S = 0;
  core::bytes_t predicted_usable = 0;
  reports::Json probes = reports::Json::array();  // every probe of the bisection, as stored
};
double capacity_error_pct(const BlockCapacityCase& c);  // of the longest S, block convention

// One row per case: P, H/H_kv/D, predicted S, measured S, error %.
std::string block_capacity_table(const std::vector<BlockCapacityCase>& cs);
// One line per case not measured or off by more than max_err_pct (< 0: the target is off).
std::vector<std::string> missed_block_capacity(const std::vector<BlockCapacityCase>& cs, double max_err_pct);

// The set's case with its predicted longest S and usable bytes.
BlockCapacityCase predicted_block_capacity_case(const ValidationSet& set, const SetCase& c, const std::string& profile,
                                                std::int64_t g);
// Every case of a stored block capacity record (load_record) rebuilt with `profile` and re-predicted
// at the record's granularity. InputError naming path and cases[i].
std::vector<BlockCapacityCase> repredict_block_capacity_record(const reports::Json& rec, const std::string& path,
                                                               const std::string& profile);

#ifdef ULYSSES_WITH_CUDA
// On the GPUs (CUDA builds only); progress lines go to `log`.
// Bisection between a size that fits and one that does not, to granularity g; the probes land in
// c.probes. Throws when no bracket is found.
std::int64_t measured_max_S(BlockCapacityCase& c, std::int64_t g, double timeout_s, std::ostream& log);
// NCCL connects lazily on first use: a small block (S = 8 g) run once at P so that its buffers exist
// before the bisection (they are part of the fixed costs, not of the block). Returns the free bytes
// after, per rank.
std::vector<std::int64_t> warm_up_exchanges(const Scenario& sc, std::int64_t g);
// At the measured longest S: the block's phases run once (all six when the model predicts the block
// under max_run_s, else the exchanges) and the stored case with that run.
reports::Json measured_case_json(const BlockCapacityCase& c, double max_run_s, std::ostream& log);
#endif

}  // namespace ulysses::eval
