// ulysses run: execute one layer's Ulysses attention block (forward + backward) of a scenario on
// a backend; print per-phase times, exchanged bytes, peak memory and the correctness checks.
#include <iostream>

#include "cli/options.hpp"
#include "eval/block_run.hpp"
#include "eval/step_run.hpp"
#include "eval/step_out.hpp"
#include "reports/version.hpp"
#include "core/errors.hpp"

namespace ulysses::cli {
namespace {

int run_run(int argc, char** argv) {
  po::options_description d("run options");
  d.add_options()("help,h", "this help");
  add_runtime_options(d);
  add_step_options(d);
  d.add_options()("ranks-on-one-gpu", "--backend cuda --scope step at sp > 1: the sp ranks as threads of one GPU, their "
                                      "collectives device copies (a check of the step; its times are not the GPUs')");
  add_format_option(d);
  po::options_description s("scenario options (flags override the --scenario file)");
  add_scenario_options(s);
  d.add(s);
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--backend cpu|cuda|deepspeed --scenario FILE [--scope block|step] [--layers N] [--ranks-on-one-gpu] [--warmup N --iters N --seed N --format table|json]",
               "Runs the Ulysses attention block of one layer (a2a.qkv.fwd, attn.fwd, a2a.out.fwd, a2a.out.bwd,\n"
               "attn.bwd, a2a.qkv.bwd) on the backend: one validating iteration (exchange bit-exact, Ulysses ==\n"
               "single-rank attention), warm-up, then timed iterations. Exit 1 when any check fails.\n"
               "--backend deepspeed runs whole training steps of the scenario on HF Transformers + Accelerate +\n"
               "DeepSpeed (docs/DEEPSPEED_BACKEND.md): time and memory per phase, step time, peak allocated/reserved.\n"
               "--backend cuda --scope step runs whole training steps on our runtime (docs/STEP_RUNTIME.md), same output;\n"
               "at sp > 1 on sp_size GPUs (NCCL), or with --ranks-on-one-gpu as threads of one GPU (a check).\n"
               "--backend cpu --scope step runs the sequence-parallel ZeRO-3 step on sp_size thread-ranks in fp64 at tiny\n"
               "shapes and checks it against the one-rank step and optimizer (loss, gradients, clipping, parameters).",
               d);
    return core::kExitOk;
  }
  const Format format = format_of(vm);
  if (format == Format::csv) throw core::InputError("", "--format", "run writes table or json");
  const std::string backend = backend_of(vm);
  refuse_step_options(vm, true);
  const bool one_gpu = vm.count("ranks-on-one-gpu") > 0;
  if (one_gpu && !(backend == "cuda" && is_step_run(vm, true)))
    throw core::InputError("", "--ranks-on-one-gpu", "only --backend cuda --scope step takes it");
  if (is_step_run(vm, true)) {  // a whole training step: HF + Accelerate + DeepSpeed, or our runtime
    const Scenario sc = eval::step_scenario_for(backend, with_layers(scenario_from_options(vm, true), vm));
    const auto m = eval::run_whole_step(backend, sc, step_options_of(vm), origin_of(vm), one_gpu);
    if (format == Format::json) {
      reports::Json j = runtime::measurement_json(m);
      j["version"] = reports::version_json();
      j["scenario"] = sc.name;
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << "scenario " << sc.name << "\n" << eval::step_table(m);
    }
    return m.correct() ? core::kExitOk : core::kExitFailure;
  }
  auto be = eval::open_backend(backend);
  const Scenario sc = scenario_from_options(vm, true);
  const runtime::BlockShape shape = block_shape_checked(sc, vm, backend);
  const runtime::Measurement m = be->run_block(shape, run_options_of(vm));
  if (format == Format::json) {
    reports::Json j = eval::measurement_json(m);
    j["version"] = reports::version_json();
    j["scenario"] = sc.name;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "scenario " << sc.name << "\n" << eval::measurement_table(m);
  }
  return m.correct ? core::kExitOk : core::kExitFailure;
}

const RegisterCommand reg{"run", "run one layer's Ulysses attention block on a backend, checked", &run_run};

}  // namespace
}  // namespace ulysses::cli
