#pragma once
// The optimizer step of our runtime on one GPU (issue 13): ZeRO-3 on one rank holds every parameter's
// fp32 master weights and Adam moments on the device, as DeepSpeed's bf16 ZeRO step does; the step
// is the global gradient norm, clipping, AdamW and the bf16 parameters written back
// (runtime/reference_adam.hpp is its oracle and states the rule; kernels/optim_ops.hpp the kernels).
//
// Buffers, per parameter tensor of n elements (all from the arena, allocated at construction):
//   master, m, v [n] fp32 each; then, once, partials [tensors * kNormBlocks] fp32 and norm_coef [2] fp32;
//   over P > 1 ranks (ZeRO-3's parts, runtime/cuda/zero3.hpp) also every rank's partials [P * tensors * kNormBlocks]
//   fp32, all-gathered, so that each rank's norm and coefficient are the whole step's (the same sums in the same
//   order on every rank).
// The gradients are the step's own (bf16, or fp32 for the norms' weights and the embedding), read in place.
#include <cstdint>
#include <vector>

#include "runtime/cuda/decoder_layer.hpp"
#include "runtime/cuda/step_collectives.hpp"
#include "runtime/reference_adam.hpp"

namespace ulysses::runtime::cuda {

struct ParamRef {
  bf16_t* param;
  const void* grad;
  bool grad_fp32;
  std::int64_t n;
};

class AdamW {
 public:
  // Takes the state's buffers from b (in the order above) and fills the master weights from the
  // parameters (m = v = 0), on the default stream, synchronously.
  // ranks: the step's other parts (null: this rank holds every parameter).
  AdamW(BufferSet& b, std::vector<ParamRef> params, const AdamConfig& c, StepCollectives* ranks = nullptr);

  // One step (t counts from 1): norm, clipping coefficient, AdamW over every tensor, on `stream`.
  void step(cudaStream_t stream);
  std::int64_t steps() const { return t_; }

  // Downloads (synchronous): tensor i's master weights, moments; the last step's norm and coefficient.
  AdamState state(std::size_t i) const;
  ClipResult last_clip() const;
  std::size_t tensors() const { return p_.size(); }

 private:
  struct Slot {
    ParamRef ref;
    float *master, *m, *v;
  };
  AdamConfig c_;
  std::vector<Slot> p_;
  float *partials_, *norm_coef_, *all_partials_ = nullptr;
  StepCollectives* ranks_ = nullptr;
  std::int64_t t_ = 0;
};

}  // namespace ulysses::runtime::cuda
