#pragma once
// Time of the HF decoder layer's eager elementwise passes (sim/eager.hpp) in one step: RMSNorms,
// rotary embedding and residual adds, the MLP's activation product, the token embedding. Counts per
// layer from the transformers source, rates from the profile (docs/MODEL.md "Eager elementwise passes").
#include "core/units.hpp"
#include "sim/memory.hpp"
#include "sim/scenario.hpp"
#include "sim/step_runtime_memory.hpp"

namespace ulysses {

// The rate the model uses: the profile's calibrated value, else the default (PyTorch: measured on one
// H200, docs/MODEL.md; our runtime: each kernel's own traffic), in bytes per element at hbm_GBps;
// plan.runtime picks the PyTorch passes or our runtime's kernels.
double eager_bytes_per_elem(const Scenario& sc, EagerRate r);

struct EagerTimes {  // seconds per step, all layers; 0 where the pass does not run
  core::seconds_t norm_fwd = 0, norm_recompute = 0, norm_bwd = 0;
  core::seconds_t embed_fwd = 0, embed_bwd = 0;
  core::seconds_t rope_add_fwd = 0, rope_add_recompute = 0, rope_add_bwd = 0;
  core::seconds_t swiglu_fwd = 0, swiglu_recompute = 0, swiglu_tiled_recompute = 0, swiglu_bwd = 0;
  core::seconds_t fork_adds_mlp_bwd = 0, fork_adds_qkv_bwd = 0;  // our runtime only (charged to mlp.bwd, gemm.qkv.bwd)
};

// One pass of the loss over the logits [B S_l, V] (forward or backward) at the runtime's rate.
core::seconds_t loss_pass_s(const Scenario& sc, const Dims& d, bool forward);

// Per step, for the scenario's runtime.
EagerTimes eager_times(const Scenario& sc, const Dims& d);

// Our runtime's optimizer step (runtime/cuda/optimizer.cpp) over every parameter: the adam.step rate per
// parameter with a bf16 gradient (calibrated, else its kernels' traffic: 30 bytes), an fp32 gradient (the
// embedding's, the norms' weights') scaled by its traffic (34 / 30).
core::seconds_t ulysses_optimizer_s(const Scenario& sc, const Dims& d);


}  // namespace ulysses
