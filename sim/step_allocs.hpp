#pragma once
// The allocations of a training run on the PyTorch runtime (HF Transformers + Accelerate + DeepSpeed
// ZeRO-3), in the order the run makes them, emitted into the allocator simulation
// (sim/caching_allocator.hpp): what decides the reserved bytes of a run with room to spare
// (docs/MODEL.md "Reserved memory"). Every tensor of 16 MiB and more (smaller ones move the reserved
// peak by <= 0.04 %, tests/eval/test_alloc_replay.cpp). The order is the one the allocator recorded
// for this stack (records/validation/alloc-traces, with the frames each step below names); every size
// is the model's (sim/model.hpp).
//
// Built so far: DeepSpeed's engine construction, a step's forward through the decoder layers and the
// loss's forward. Not yet: the backward, the gradient path on the reduce stream, the optimizer step,
// TiledMLP, checkpoint and optimizer offload (docs/STATUS.md "Open work on issue 12").
#include <cstdint>
#include <vector>

#include "sim/caching_allocator.hpp"
#include "sim/memory.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// Allocations below this many bytes are left out (the small pool and the small large-pool blocks).
inline constexpr std::int64_t kStepAllocsMinBytes = std::int64_t{16} << 20;

// The run's allocations on the compute stream, part by part. `log`, when given, receives the requested
// bytes of every allocation emitted, in order (the check against a recording). A plan the generator
// does not cover yet (covered() false) emits nothing.
class TrainingAllocs {
 public:
  using Id = CachingAllocatorSim::Id;
  TrainingAllocs(const Scenario& sc, CachingAllocatorSim& a, std::vector<std::int64_t>* log = nullptr);
  // construction(): ZeRO-3 at one partition without parameter offload. forward(): also activation
  // checkpointing with the checkpoints on the GPU, no TiledMLP, eager RMSNorm, micro-batch 1 per rank.
  bool construction_covered() const;
  bool forward_covered() const;
  // The ZeRO-3 engine's construction (deepspeed.initialize under Accelerate, zero.Init).
  void construction();
  // One step's forward up to the final norm's output; the first step of the process also allocates
  // cuBLAS's workspace. What the backward needs stays allocated.
  void forward(bool first_step);
  // The loss after forward(): untiled, the logits' forward (the backward's part comes with backward());
  // tiled (TiledFusedLogitsLoss), every tile's forward and backward, which it runs inside its forward.
  void loss(bool first_step);

 private:
  Id alloc(std::int64_t bytes);
  void free(Id& id);
  Id rmsnorm(std::int64_t x_bytes);  // eager RMSNorm without autograd's saved tensors: its output
  Id rope(std::int64_t x_bytes);     // apply_rotary_pos_emb on one of q, k: its output
  Id attention(Id& normed);          // the attention module: the o_proj output (frees `normed`)
  Id layer();                        // one checkpointed decoder layer: its output

  const Scenario& sc_;
  const Dims d_;
  std::int64_t th_ = 0, q_ = 0, kv_ = 0, mlp_ = 0;  // [T, h], q, one of k / v, one MLP intermediate (bytes)
  CachingAllocatorSim& a_;
  std::vector<std::int64_t>* log_;
  std::vector<Id> keep_;  // what lives to the backward (checkpoints, cos/sin, the final norm's saved set)
  Id embed_out_ = -1;     // the embedding's output: layer 0's checkpoint
  Id final_hidden_ = -1;  // the final norm's output, the loss's input
  Id log_probs_ = -1;     // untiled: log_softmax's output, saved for the backward
  Id x_grad_ = -1;        // tiled: the gradient of the loss's input, filled tile by tile
  Id head_grad_ = -1;     // tiled: the lm_head's weight gradient (the first tile's, the others added to it)
};

}  // namespace ulysses
