#pragma once
// Step capacity records (`ulysses capacity --backend deepspeed|cuda --scope step --set FILE --out FILE.json`, format
// ulysses-step-capacity/1): each case's predicted longest S (eval/step_capacity.hpp, under the case's
// ballast) next to the one bisected on the GPU; the table, the missed targets, the stored case, and
// the stored record re-predicted on any machine.
#include <cstdint>
#include <string>
#include <vector>

#include "eval/step_capacity.hpp"
#include "eval/validation_set.hpp"
#include "reports/json_out.hpp"

namespace ulysses::eval {

inline constexpr const char* kStepCapacityFormat = "ulysses-step-capacity/1";
bool is_step_capacity_record(const reports::Json& j);

struct StepCapacityCase {
  StepSetCase set;
  std::int64_t predicted_S = 0, measured_S = 0, failed_S = 0;  // failed_S: the shortest length that ran out
  std::string binding;                                         // what binds the predicted S
  reports::Json probes = reports::Json::array();              // every probe, as stored
};

// The case with its predicted longest S (multiples of g) under its ballast.
StepCapacityCase predicted_step_capacity_case(StepSetCase set, std::int64_t g);
// The bisection's outcome stored in the case: every probe, measured_S (the longest that ran) and
// failed_S (the first out of memory). False when it did not bracket the limit (nothing changed).
bool record_bisection(StepCapacityCase& c, const Bisection& b);

// One row per case: ballast, predicted, measured, first OOM, error %, what binds.
std::string step_capacity_table(const std::vector<StepCapacityCase>& cases);
// One line per case whose |error| exceeds max_err_pct (< 0: the target is off).
std::vector<std::string> missed_step_capacity(const std::vector<StepCapacityCase>& cases, double max_err_pct);

reports::Json step_capacity_case_json(const StepCapacityCase& c);
// Every case of a stored step capacity record (load_record) rebuilt with `profile` and re-predicted at
// the record's granularity, for the record's backend (absent: deepspeed). InputError naming path and cases[i] when a case is not a stored one.
std::vector<StepCapacityCase> repredict_step_capacity_record(const reports::Json& rec, const std::string& path,
                                                             const std::string& profile);

}  // namespace ulysses::eval
