#pragma once
// Whole-step validation records (`ulysses validate --backend deepspeed --set FILE --out FILE.json`, or
// `--backend cuda --scope step`: our runtime; the record's "backend" says which, and the re-prediction
// predicts that runtime), re-predicted on any machine by `validate --stored FILE.json`: every case's
// set_key keys, run options and the measurement; statistics and targets: deepspeed (issue 12): peak
// allocated and, under expandable segments, reserved memory median |error| <= 3 %, max <= 6 %; step time
// median |error| <= 10 %; cuda (issue 13): peak memory max |error| <= 3 %, step time median <= 5 %,
// max <= 15 %; phases reported against 5 % / 15 %.
#include <string>
#include <vector>

#include "eval/step_compare.hpp"
#include "eval/validation_set.hpp"
#include "runtime/deepspeed/step_run.hpp"
#include "sim/scenario.hpp"

namespace ulysses::eval {

struct StepCase {
  std::string name;
  Keys keys;                                   // set_key keys (defaults, then the case's)
  Scenario sc;
  runtime::StepMeasurement m;
  StepComparison c;                            // today's prediction next to the measurement
};

StepCase step_case_of(StepSetCase s);  // name, keys and scenario; nothing measured yet

// The case as stored: keys, run options, the measurement (step_json-like, with the raw phases).
runtime::deepspeed::Json step_case_json(const StepCase& c);
// The measurement back from a stored case (what measurement_of made of the worker's files).
// eval/record_in.cpp load_record checks every field it reads first (one line naming file and key).
runtime::StepMeasurement measurement_from_case(const runtime::deepspeed::Json& c);
// Every case of a stored step record (load_record) rebuilt with `profile` and re-predicted against its
// measurement. InputError naming path and cases[i] when a case is not a stored step case.
std::vector<StepCase> repredict_step_record(const runtime::deepspeed::Json& rec, const std::string& path,
                                            const std::string& profile);

struct Stat {
  std::string name;
  std::vector<double> errors;                  // signed %, one per scored case
  std::vector<std::string> cases;
  double median_abs() const;
  double max_abs() const;
  std::string worst() const;
};

struct StepSummary {
  std::string backend = "deepspeed";           // whose targets (missed_step_targets)
  Stat allocated, reserved, reserved_generated, step;  // reserved: cases run with expandable segments only; reserved_generated: of them, those the allocation sequence covers
  std::vector<Stat> phases;                    // per phase group (scored rows)
};
StepSummary summarize_steps(const std::vector<StepCase>& cases, const std::string& backend = "deepspeed");
std::vector<std::string> missed_step_targets(const StepSummary& s);  // one line per target missed
std::string step_cases_table(const std::vector<StepCase>& cases);
std::string step_summary_table(const StepSummary& s);
runtime::deepspeed::Json step_summary_json(const StepSummary& s);

}  // namespace ulysses::eval
