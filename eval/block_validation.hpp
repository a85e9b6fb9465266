#pragma once
// `ulysses validate` of the attention block (cpu and cuda backends): each case of a validation set
// (eval/validation_set.hpp) run next to its prediction; error statistics, targets, the tables, and
// the stored record (JSON) that lets any machine re-predict against the measurements.
//
// Error convention: (predicted - measured) / measured * 100, measured = median over timed
// iterations of the max over ranks (runtime/backend.hpp PhaseStats::median_s).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "reports/json_out.hpp"
#include "runtime/backend.hpp"
#include "sim/prediction.hpp"
#include "eval/validation_set.hpp"
#include "sim/scenario.hpp"

namespace ulysses::eval {

// One case measured: the six block phases (median over iterations, max over ranks) and the
// per-rank peak of the block's device memory; from a run or from a stored record.
struct CaseMeasurement {
  std::array<double, 6> phase_s{};
  std::array<double, 6> phase_min_s{}, phase_max_s{};
  std::int64_t peak_bytes = 0;  // max over ranks
  bool correct = false;
  std::int64_t checks = 0, checks_failed = 0;
};
CaseMeasurement measurement_of(const runtime::Measurement& m);

// A phase is scored unless it is an exchange at P = 1 (no exchange happens: predicted 0).
bool phase_scored(int phase, std::int64_t P);

// The block's error in %: (predicted - measured) / measured * 100; nothing measured: 0 when nothing is
// predicted either, else 1e9 (whole steps: eval/step_compare.hpp error_pct).
double block_error_pct(double predicted, double measured);

// Error statistics over cases, per block phase, for the block total and for peak memory.
struct ErrorStats {
  std::string name;
  std::vector<double> errors_pct;  // signed, one per scored case
  std::vector<std::string> cases;
  double median_abs() const;
  double max_abs() const;
  double mean_signed() const;      // bias
  std::string worst_case() const;
};

struct CaseResult {
  std::string name;
  Keys keys;
  Scenario sc;
  Prediction p;
  std::int64_t predicted_peak_bytes = 0;  // predicted_block_peak(p, backend)
  CaseMeasurement m;
};

// The block peak predicted under a backend's allocation policy: the cpu backend frees each
// buffer after its last use (Prediction::block_peak_bytes_freeing), the cuda backend allocates
// every buffer up front (Prediction::block_peak_bytes). docs/MODEL.md "Block peak".
inline std::int64_t predicted_block_peak(const Prediction& p, const std::string& backend) {
  return backend == "cpu" ? p.block_peak_bytes_freeing : p.block_peak_bytes;
}

struct Summary {
  std::vector<ErrorStats> phases;  // the six block phases
  ErrorStats block_total, memory;
  std::int64_t incorrect = 0;
  // all scored phase errors together (the "per-phase time" targets apply to every phase)
  ErrorStats all_phases;
};
Summary summarize(const std::vector<CaseResult>& r);

// The case predicted: p and the block peak under `backend`'s allocation policy.
void predict_case(CaseResult& r, const std::string& backend);
double block_total_s(const CaseMeasurement& m);  // the six phases' measured times summed

// Every case of a stored block record (load_record) rebuilt with `profile`, re-predicted (the peak
// under the record's backend) next to its stored measurement. InputError naming path and cases[i].
std::vector<CaseResult> repredict_block_record(const reports::Json& rec, const std::string& path, const std::string& profile);

// Targets; a negative value disables that check.
struct Targets {
  double max_median_error_pct = 5, max_error_pct = 15, max_memory_error_pct = 3;
};
// One line per target missed (empty: all met). A case that failed a correctness check misses.
std::vector<std::string> missed_targets(const Summary& s, const Targets& t);

std::string summary_table(const Summary& s);
std::string cases_table(const std::vector<CaseResult>& r);

// The stored record: every case's keys, shape, measurement and (at measurement time) prediction.
reports::Json case_json(const CaseResult& r, const runtime::Measurement* raw);
reports::Json summary_json(const Summary& s);

}  // namespace ulysses::eval
