// eval/step_run.hpp: which runtime runs a whole step.
#include "eval/step_run.hpp"

#include "eval/block_run.hpp"

namespace ulysses::eval {

runtime::StepMeasurement run_whole_step(const std::string& backend, const Scenario& sc,
                                        const runtime::deepspeed::StepOptions& opt, const std::string& origin) {
  if (backend == "deepspeed") return runtime::deepspeed::run_step(sc, opt, origin);
  runtime::StepRunOptions o;
  o.warmup = opt.warmup, o.iters = opt.iters, o.seed = opt.seed;
  return open_backend(backend)->run_step(sc, o, origin);
}

Scenario step_scenario_for(const std::string& backend, Scenario sc) {
  sc.plan.runtime = backend == "deepspeed" ? Runtime::pytorch : Runtime::ulysses;
  return sc;
}

}  // namespace ulysses::eval
