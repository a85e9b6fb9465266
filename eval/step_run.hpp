#pragma once
// A whole training step run on a backend (`run`, `compare`): the deepspeed backend's Python worker, or
// our CUDA runtime (--backend cuda --scope step), both read back as one StepMeasurement; and the
// scenario the step model predicts for it (our runtime: plan.runtime = ulysses).
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/deepspeed/step_run.hpp"
#include "runtime/step_measurement.hpp"
#include "sim/scenario.hpp"

namespace ulysses::eval {

// "deepspeed" -> runtime::deepspeed::run_step; any other name -> that backend's run_step (one
// InputError line when it has none or is not built). ranks_on_one_gpu: runtime::StepRunOptions' (cuda, sp > 1).
runtime::StepMeasurement run_whole_step(const std::string& backend, const Scenario& sc,
                                        const runtime::deepspeed::StepOptions& opt, const std::string& origin,
                                        bool ranks_on_one_gpu = false);

// Throws what run_whole_step would throw for the scenario's plan (core::InputError: a key the backend's step
// does not run), without running anything: so that a call running two backends refuses before either runs.
void check_whole_step(const std::string& backend, const Scenario& sc, const runtime::deepspeed::StepOptions& opt,
                      const std::string& origin);

// Capacity probes of the whole step at each length of `ladder` (increasing) under a ballast: the deepspeed
// worker (one process, a warm-up and a measured step per length) or the backend's probe_steps.
runtime::ProbeResult probe_whole_steps(const std::string& backend, const Scenario& sc, const std::vector<std::int64_t>& ladder,
                                       std::int64_t ballast_bytes, const std::string& origin);

// The scenario as the backend runs it: plan.runtime pytorch on deepspeed; on our runtime plan.runtime ulysses
// and plan.attn_implementation the kernel it runs (core/attn_impls.hpp: flash_attention_2, sdpa, ... run as
// ulysses_flash and are predicted with its curves).
Scenario step_scenario_for(const std::string& backend, Scenario sc);

}  // namespace ulysses::eval
