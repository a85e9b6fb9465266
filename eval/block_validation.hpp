#pragma once
// `ulysses validate` (cli/cmd_validate.cpp): a validation set of block scenarios, each run on a
// backend next to its prediction; the stored record (JSON) that lets any machine re-predict
// against the measurements and check the model against its accuracy targets.
//
// Validation set (YAML, scenarios/validation/*.yaml):
//   name: h200
//   model: llama-3.1-8b          # base preset; the cases override the attention dims
//   profile: h200-sxm-141gb
//   defaults: {plan.attn_implementation: ulysses_flash, ...}   # set_key keys for every case
//   cases:
//     - {name: mha-s6k-sp2, plan.sp_size: 2, plan.seq_len: 6144, model.heads: 16, ...}
// Every case key is a dotted key of set_key (sim/config.hpp); `gpus` defaults to plan.sp_size.
//
// Error convention: (predicted - measured) / measured * 100, measured = median over timed
// iterations of the max over ranks (runtime/backend.hpp PhaseStats::median_s).
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reports/json_out.hpp"
#include "runtime/backend.hpp"
#include "sim/prediction.hpp"
#include "sim/scenario.hpp"

namespace ulysses::cli {

using Keys = std::vector<std::pair<std::string, std::string>>;

struct ValidationCase {
  std::string name;
  Keys keys;  // applied after the set's defaults
};

struct ValidationSet {
  std::string path, name, model, profile;
  Keys defaults;
  std::vector<ValidationCase> cases;
};

ValidationSet load_validation_set(const std::string& path);  // InputError naming file and key

// The case's scenario: model and profile presets, then defaults, then the case keys (set_key),
// gpus = sp_size unless given, then validate(). origin names the file in errors.
Scenario case_scenario(const std::string& model, const std::string& profile, const Keys& keys,
                       const std::string& origin, const std::string& name);

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

double error_pct(double predicted, double measured);

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

// Reads a stored record (`ulysses validate --out`, `ulysses capacity --out`): JSON with a non-empty
// `cases` array. InputError naming the file otherwise; `producer` names the command that writes it.
reports::Json load_record(const std::string& path, const std::string& producer);

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

}  // namespace ulysses::cli
