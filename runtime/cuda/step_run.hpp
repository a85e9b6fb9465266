#pragma once
// `run|compare --backend cuda --scope step`: the scenario's whole training step on our runtime
// (runtime/cuda/step_runner.hpp) on one GPU (sp > 1: run_step_sp below), timed phase by phase, as a StepMeasurement
// (runtime/step_measurement.hpp) with the step model's phase names.
//
//   1. the scenario's shapes and plan (runtime/step_plan.hpp: one InputError line for what the step
//      does not run yet); parameters and tokens from the seed (labels shifted, RoPE tables for
//      positions 0..T-1);
//   2. one step whose loss must be finite, `warmup` untimed steps, then `iters` timed ones: a CUDA
//      event at every phase boundary on the one stream (so the phases add up to the step exactly) and
//      an NVTX range of the phase's name around its work; a phase's time per step is the sum of its
//      segments (a layer phase: over the layers);
//   3. memory: every buffer comes from the DeviceArena up front, plus cuBLASLt's workspace: the peak
//      allocated and "reserved" are that total (no caching allocator), device_used_bytes the driver's
//      view (context included);
//   4. where CUPTI is on, one more step traced: the host waits for the stream at every phase boundary, each
//      phase's GPU busy time is that of the CUPTI records (kernels, copies, memsets) starting in its windows
//      (StepPhase::kernel_s), and the records are kept as spans (StepMeasurement::traced: compare --trace).
#include <string>

#include "runtime/backend.hpp"
#include "runtime/step_plan.hpp"

namespace ulysses::runtime::cuda {

StepMeasurement run_step(const Scenario& sc, const StepRunOptions& opt, const std::string& origin);

// The step at sp = P > 1 (runtime/cuda/step_run_sp.cpp): P ranks of S / P tokens and ZeRO-3 parts, over P GPUs
// (runtime/cuda/nccl_ranks.hpp; single process or a launcher) or, with opt.ranks_on_one_gpu, as P logical ranks of
// one GPU (runtime/cuda/loopback_ranks.hpp: a check, its collectives device copies). Per timed step each phase is
// the max over ranks, the step the max of the ranks' totals; the loss every rank's token losses over the valid
// labels; memory the largest rank's arena, the transport's staging and cuBLASLt's workspace. Not traced by CUPTI
// yet (kernel_s -1).
StepMeasurement run_step_sp(const StepShape& shape, const StepRunOptions& opt, const std::string& origin);

// `capacity --backend cuda --scope step`: with ballast_bytes held on the device, each length in turn gets
// its own arena, its buffers and one step (whose loss must be finite), until an allocation fails
// (runtime/backend.hpp probe_steps). Every length's plan is checked first (InputError).
ProbeResult probe_steps(const Scenario& sc, const std::vector<std::int64_t>& seq_lens, std::int64_t ballast_bytes,
                        const std::string& origin);

}  // namespace ulysses::runtime::cuda
