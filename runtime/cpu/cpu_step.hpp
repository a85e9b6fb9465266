#pragma once
// `run --backend cpu --scope step`: the sequence-parallel ZeRO-3 step (runtime/cpu/sp_step.hpp) of a
// scenario at tiny shapes on P thread-ranks, checked against the one-rank step and optimizer in fp64.
// What it is for: the whole step's logic (the exchange inside every layer, the shifted labels, the
// token-weighted loss over ranks, ZeRO-3's partitions, the global clipping) testable without a GPU.
// Its times are fp64 loops on the host: a check, not a performance figure; it has no device memory.
//
// The first step validates (checks below); then `warmup` untimed and `iters` timed steps, each from the
// same seeded parameters and tokens. Checks (each tensor relative to the largest magnitude of its one-rank value):
//   loss          the P-rank loss against the one-rank loss                       tolerance 1e-10
//   gradients     every parameter's reduce-scattered gradient, assembled          1e-9
//   clip norm     the global gradient norm from the partitions                    1e-10
//   masters       the updated fp64 master weights                                 1e-10
//   parameters    the all-gathered bf16 parameters, bit for bit                   0 (#wrong: bits that differ)
#include <cstdint>
#include <string>

#include "runtime/backend.hpp"
#include "runtime/cpu/sp_step.hpp"
#include "sim/scenario.hpp"

namespace ulysses::runtime::cpu {

// The step's shapes of a scenario (L from the scenario, --layers applied) and the plan's tiled logits.
// Throws core::InputError(origin, key, rule) for what the cpu step does not run:
// gpus != sp_size, dp > 1, micro_batch_size > 1, zero_stage != 3 (it partitions as ZeRO-3), offloads,
// q/k/v biases, the head rules, a seq_len the plan pads, more than kCpuStepMaxFlops of fp64 work for
// `steps` P-rank steps and the oracle (tiny shapes only).
struct CpuStepShape {
  StepDims dims;
  std::int64_t logits_shards = 1;
};
CpuStepShape cpu_step_shape(const Scenario& sc, int steps, const std::string& origin);
// The step input at that shape: parameters N(0, 1) * 0.3 (norm weights N(0, 1)) and tokens from the seed,
// RoPE tables of the model's base.
SpStepInput cpu_step_input(const Scenario& sc, std::uint64_t seed, int steps, const std::string& origin);
inline constexpr double kCpuStepMaxFlops = 1e11;  // every step of a run and its oracle: about a minute on the host

// The fp64 work of one step (forward, checkpoint recompute, backward; logits) on T tokens: the size guard.
double cpu_step_flops(const StepDims& d);

StepMeasurement run_cpu_step(const Scenario& sc, const StepRunOptions& opt, const std::string& origin);

}  // namespace ulysses::runtime::cpu
