#pragma once
// Whole steps on the deepspeed backend (`run`, `compare`): the measurement and the comparison as
// tables, and the predicted and measured step as a Chrome/Perfetto trace.
#include <string>

#include "eval/step_compare.hpp"
#include "reports/json_out.hpp"
#include "runtime/deepspeed/step_run.hpp"
#include "sim/prediction.hpp"

namespace ulysses::eval {

std::string step_table(const runtime::StepMeasurement& m);
std::string step_compare_table(const StepComparison& c);
// Chrome/Perfetto trace: the predicted step (the step model's phases back to back) and the measured
// one (per rank, the last timed step's exclusive segments), as `compare --backend cuda` writes the block.
reports::Json step_trace(const Prediction& p, const runtime::StepMeasurement& m);

}  // namespace ulysses::eval
