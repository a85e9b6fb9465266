#pragma once
// Our runtime's parameter fetch from the host under offload_params (runtime/cuda/step_runner.cpp `gather`, `step`):
// the part of the copies that the compute does not hide, which the step shows as phase offload.params.
#include <cstdint>

#include "core/units.hpp"

namespace ulysses {

struct ParamFetch {
  std::int64_t L = 1;          // layers
  double embed_bytes = 0;      // the rank's bf16 parts: the embedding (fetched before anything computes),
  double rest_bytes = 0;       // the final norm and the lm_head (fetched ahead during layer 0),
  double layer_bytes = 0;      // one layer's (layer 0 before anything computes, the others ahead)
  double idle_Bps = 0;         // the host link to the GPU alone, and while the GPU computes
  double busy_Bps = 0;
  core::seconds_t layer_fwd = 0;  // a layer's forward, and its backward (with its recompute)
  core::seconds_t layer_bwd = 0;
  double ckpt_bwd_bytes = 0;   // checkpoint bytes on the same link during each backward window (checkpoint offload)
};

// The embedding and layer 0 at the step's start, whole; each fetch ahead only by what exceeds the layer it overlaps:
// in the forward layer k + 1's during layer k (and the final norm's and lm_head's during layer 0); in the backward,
// whose last two layers are still in their slots, layer l - 1's during layer l for 1 <= l <= L - 2, sharing the link
// with the checkpoint that comes back then.
core::seconds_t ulysses_param_fetch_s(const ParamFetch& f);

}  // namespace ulysses
