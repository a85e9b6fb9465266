#pragma once
// The allocations of a training run on the PyTorch runtime (HF Transformers + Accelerate + DeepSpeed
// ZeRO-3), in the order the run makes them, emitted into the allocator simulation
// (sim/caching_allocator.hpp): what decides the reserved bytes of a run with room to spare
// (docs/MODEL.md "Reserved memory"). Every tensor of 16 MiB and more (smaller ones move the reserved
// peak by <= 0.04 %, tests/eval/test_alloc_replay.cpp). The order is the one the allocator recorded
// for this stack (records/validation/alloc-traces, with the frames each step below names); every size
// is the model's (sim/model.hpp).
//
// Covered: ZeRO-3 at one partition without parameter offload, activation checkpointing (on the GPU, or
// offloaded with TiledMLP), untiled or tiled logits, TiledMLP, the optimizer on the GPU (torch AdamW)
// or offloaded; eager RMSNorm, micro-batch 1 (docs/MODEL.md "Reserved memory" has what is short).
#include <cstdint>
#include <utility>
#include <vector>

#include "core/bf16.hpp"
#include "sim/caching_allocator.hpp"
#include "sim/memory.hpp"
#include "sim/model.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// Allocations below this many bytes are left out (the small pool and the small large-pool blocks).
inline constexpr std::int64_t kStepAllocsMinBytes = std::int64_t{16} << 20;
// cuBLAS's workspace, allocated through the caching allocator by each thread's first matmul (the
// rotary embedding's, modeling_llama.py 122; autograd's thread at its first backward GEMM) and kept:
// 32 MiB in every recording (torch 2.11 on H200)
inline constexpr std::int64_t kCublasWorkspaceBytes = std::int64_t{32} << 20;

// The run's allocations, part by part: construction(), then per step forward(), loss(), backward() and
// optimizer_step(); run() does all of it for a run of `steps` steps. `log`, when given, receives the
// requested bytes of every allocation emitted, in order (the check against a recording). A plan the
// generator does not cover yet (covered() false) emits nothing.
class TrainingAllocs {
 public:
  using Id = CachingAllocatorSim::Id;
  // When a tensor freed while the reduce stream still uses it (record_stream) returns to its pool: the
  // allocator processes the stream's events at a later malloc, once the GPU has done that work.
  enum class DeferredFree {
    next_alloc,   // at the next allocation (the GPU keeps up with the host)
    end_of_backward,  // only when the backward ends (the host runs far ahead)
    given,            // before the allocation set_completions() names (diagnostics: a recording's)
  };
  // DeferredFree::given: per allocation index (the block's id), the index of the allocation before which its
  // deferred free completes.
  void set_completions(const std::vector<std::int64_t>* done) { completions_ = done; }
  TrainingAllocs(const Scenario& sc, CachingAllocatorSim& a, std::vector<std::int64_t>* log = nullptr,
                 DeferredFree deferred = DeferredFree::next_alloc);
  // construction(): ZeRO-3 at one partition without parameter offload. forward() and the rest of a
  // step: also activation checkpointing (its offload only with TiledMLP), eager RMSNorm, micro-batch 1.
  bool construction_covered() const;
  bool step_covered() const;
  // The ZeRO-3 engine's construction (deepspeed.initialize under Accelerate, zero.Init).
  void construction();
  // One step's forward up to the final norm's output; the first step of the process also allocates
  // cuBLAS's workspace. What the backward needs stays allocated.
  void forward(bool first_step);
  // The loss after forward(): untiled, the logits' forward (the backward's part comes with backward());
  // tiled (TiledFusedLogitsLoss), every tile's forward and backward, which it runs inside its forward.
  void loss(bool first_step);
  // The backward from the loss to the embedding, with DeepSpeed's gradient bucket (contiguous copies
  // and flushes on the reduce stream).
  void backward(bool first_step);
  // DeepSpeed ZeRO-3's step with torch's AdamW on the GPU (the first step creates its state).
  void optimizer_step(bool first_step);
  // construction() and `steps` whole steps; false when the plan is not covered (nothing emitted).
  bool run(int steps);
  // Diagnostics: every deferred free as (the block's id = its allocation's index, allocations emitted
  // before the free was requested), in request order.
  void log_deferred(std::vector<std::pair<Id, std::int64_t>>* out) { deferred_log_ = out; }
  // Diagnostics: every deferred free as (the block's id, the index of the allocation before which it completed), in
  // completion order.
  void log_completed(std::vector<std::pair<Id, std::int64_t>>* out) { completed_log_ = out; }

 private:
  // What eager RMSNorm saves for its backward (autograd on): the fp32 input, the normalized bf16 tensor;
  // and its output.
  struct Norm {
    Id f32 = -1, t = -1, out = -1, rs = -1;  // rs: rsqrt of the rows' mean square (fp32 per row)
  };
  // A checkpointed layer's tensors, recomputed for its backward.
  struct Recomputed {
    Norm n1, n2, qn, kn;  // qn, kn: Qwen3's head-dim norms
    Id v = -1, qe = -1, ke = -1, o = -1, lse = -1;
    Id gate = -1, act = -1, up = -1, prod = -1;  // without TiledMLP (which saves only its input)
    Id out = -1;  // an offloaded checkpoint's layer output
  };
  Id alloc(std::int64_t bytes, int stream = 0);
  void free(Id& id);
  void free_later(Id& id);  // freed while the reduce stream uses it (DeferredFree)
  // An offloaded checkpoint freed at the forward's end, completing inside the tiled loss (DeferredFree::next_alloc with
  // tiled logits; docs/MODEL.md "When such a free completes"): held until the tile ckpt_release_tile() names, else
  // free_later
  void free_after_copy(Id& id);
  bool ckpt_frees_timed() const;
  // the first tile whose allocations the host issues after the last checkpoint's copy has finished: the host
  // waits for the GPU's forward at the loss's start (ulysses_sp.py 1166), the copy of the last layer's input
  // (started when that layer's forward ended) takes checkpoint bytes / host_d2h_busy_GBps, the host issues a tile
  // in calibrated.pytorch_host_logits_tile_ms (not measured: tile 1)
  std::int64_t ckpt_release_tile() const;
  void release_deferred();
  // eager RMSNorm over [rows, cols]; saved: with autograd (what the backward reads stays), else only `out`
  Norm rmsnorm(std::int64_t rows, std::int64_t cols, bool saved);
  Id rope(std::int64_t x_bytes);     // apply_rotary_pos_emb on one of q, k: its output
  std::pair<Id, Id> loss_backward(std::int64_t n, Id& log_probs, bool first_gemm);  // (input, weight) grads
  Id attention(Id& normed);          // the attention module: the o_proj output (frees `normed`)
  Id mlp_forward();                  // the MLP (TiledMLP: per shard) without autograd: its output
  Id layer();                        // one checkpointed decoder layer: its output
  Recomputed recompute();            // the checkpoint's recompute, up to the last tensor it saves
  // Eager RMSNorm's backward over x (rows x cols elements): the input's gradient. Frees `g` and the saved
  // tensors (`t_late`: `t` after `g`); `input`, when given, is released before the last temporary (the
  // layer's checkpoint at its input norm).
  Id rmsnorm_backward(Id& g, Norm& n, std::int64_t rows, std::int64_t cols, bool t_late, Id* input = nullptr);
  Id rope_backward(Id& g, std::int64_t x_bytes);  // its input's gradient (frees `g`)
  void layer_backward(std::int64_t l);  // recompute and gradients of layer l (frees its checkpoint)
  Id mlp_backward(Recomputed& r);       // the MLP's gradients: its input's gradient
  Id tiled_mlp_backward(Recomputed& r);
  // A parameter's gradient reaches DeepSpeed's reduce hook (stage3.py 1569-1590, 1614-1638): `grad`
  // is its tensor when allocated here (-1: below the size generated).
  void arrive(std::int64_t id, double numel, Id& grad);  // id: the parameter's ds_id (-1: a norm weight)
  std::int64_t param_id(LayerParamRole role) const;       // layer_'s parameter
  std::int64_t head_id() const;
  void overflow_check(double numel);  // the hook's flush of a bucket the gradient would overflow
  void flush();  // __reduce_and_partition_ipg_grads

  const Scenario& sc_;
  const Dims d_;
  std::int64_t th_ = 0, q_ = 0, kv_ = 0, mlp_ = 0;  // [T, h], q, one of k / v, one MLP intermediate (bytes)
  CachingAllocatorSim& a_;
  std::vector<std::int64_t>* log_;
  DeferredFree policy_;
  std::vector<Id> deferred_;      // freed, waiting for the reduce stream
  std::vector<std::pair<Id, std::int64_t>>* deferred_log_ = nullptr;
  std::vector<std::pair<Id, std::int64_t>>* completed_log_ = nullptr;
  void complete(Id id);  // a deferred free completes (before the allocation emitted next)
  std::int64_t emitted_ = 0;      // allocations emitted so far
  const std::vector<std::int64_t>* completions_ = nullptr;
  std::vector<Id> ckpt_;          // per layer: its input, which the checkpoint keeps (layer 0: the embedding's output)
  std::vector<Id> ckpt_held_;     // offloaded checkpoints freed at the forward's end, waiting for their copy (timed)
  Id cos_ = -1, sin_ = -1;        // the rotary embedding's bf16 cos and sin (the recompute uses them)
  Norm final_norm_;               // the final norm's saved tensors (out: the loss's input)
  Id final_hidden_ = -1;          // the loss's input, referenced by the step until the next one
  Id log_probs_ = -1;             // untiled: log_softmax's output, saved for the backward
  Id x_grad_ = -1;                // tiled: the gradient of the loss's input, filled tile by tile
  Id head_grad_ = -1;             // the lm_head's weight gradient
  Id hidden_grad_ = -1;           // the residual stream's gradient, accumulated in place layer by layer
  // DeepSpeed's ipg bucket (reduce_bucket_size elements): its parameters (ds_id, elements), and the
  // gradients it holds that were too large for its contiguous buffer
  std::vector<std::pair<std::int64_t, double>> bucket_;
  std::vector<Id> bucket_held_;
  double bucket_elems() const;
  std::int64_t layer_ = 0;        // the layer whose backward runs
  static constexpr std::int64_t kBf16 = core::kBf16Bytes, kFp32 = 4, kFp64 = 8;  // bytes per element
};

// The reserved peak (every stream and pool) of DeepSpeed's construction and `steps` steps of the plan,
// as the allocation sequence above drives the allocator simulation: what max_memory_reserved reads in
// a run with room to spare under expandable_segments. -1 when the generator does not cover the plan.
std::int64_t generated_reserved_peak(const Scenario& sc, int steps);
// The steps the deepspeed backend's validate runs (one warm-up, the memory step, the timed steps) reach
// their reserved peak by the third: construction's layout, the first step's optimizer state, and one
// step over the holes they leave.
inline constexpr int kGeneratedReservedSteps = 3;

}  // namespace ulysses
