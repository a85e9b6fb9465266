// eval/step_run.hpp: which runtime runs a whole step.
#include "eval/step_run.hpp"

#include "core/attn_impls.hpp"
#include "eval/block_run.hpp"
#include "runtime/cpu/cpu_step.hpp"
#include "runtime/step_plan.hpp"

namespace ulysses::eval {

runtime::StepMeasurement run_whole_step(const std::string& backend, const Scenario& sc,
                                        const runtime::deepspeed::StepOptions& opt, const std::string& origin,
                                        bool ranks_on_one_gpu) {
  if (backend == "deepspeed") return runtime::deepspeed::run_step(sc, opt, origin);
  runtime::StepRunOptions o;
  o.warmup = opt.warmup, o.iters = opt.iters, o.seed = opt.seed, o.ranks_on_one_gpu = ranks_on_one_gpu;
  return open_backend(backend)->run_step(sc, o, origin);
}

void check_whole_step(const std::string& backend, const Scenario& sc, const runtime::deepspeed::StepOptions& opt,
                      const std::string& origin) {
  if (backend == "deepspeed") (void)runtime::deepspeed::job_json(sc, opt, "", origin);
  else if (backend == "cpu") (void)runtime::cpu::cpu_step_shape(sc, 1 + opt.warmup + opt.iters, origin);
  else (void)runtime::step_shape_of(sc, origin);  // our CUDA step's plan
}

runtime::ProbeResult probe_whole_steps(const std::string& backend, const Scenario& sc, const std::vector<std::int64_t>& ladder,
                                       std::int64_t ballast_bytes, const std::string& origin) {
  if (backend == "deepspeed") {
    runtime::deepspeed::StepOptions o;
    o.warmup = 1;  // a probe: one warm-up step and one measured step per length
    o.iters = 1;
    o.ballast_bytes = ballast_bytes;
    o.probe_seq_lens = ladder;
    Scenario s = sc;
    s.plan.seq_len = ladder.back();
    return runtime::deepspeed::run_probes(s, o, origin);
  }
  return open_backend(backend)->probe_steps(sc, ladder, ballast_bytes, origin);
}

Scenario step_scenario_for(const std::string& backend, Scenario sc) {
  sc.plan.runtime = backend == "deepspeed" ? Runtime::pytorch : Runtime::ulysses;
  // our runtime runs its own kernel for every name (a PyTorch name is an alias of ulysses_flash): predict that
  // kernel's calibrated curves, not those PyTorch's kernel of the same name was calibrated under
  if (sc.plan.runtime == Runtime::ulysses)
    if (const core::AttnImpl* a = core::find_attn_impl(sc.plan.attn_implementation))
      sc.plan.attn_implementation = std::string(core::calibrated_key(a->kernel));
  return sc;
}

}  // namespace ulysses::eval
