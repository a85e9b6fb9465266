#pragma once
// One training step's forward and backward on one GPU (issue 13, docs/STEP_RUNTIME.md): the token
// embedding, L decoder layers (runtime/cuda/decoder_layer.hpp), the final RMSNorm, the lm_head and the
// cross-entropy over shifted labels, untiled or over sequence chunks (tiled logits: the [T, V] logits
// never exist at once). runtime/reference_step.hpp is its fp64 oracle, with the same parameters
// (host_params draws them from the same seeded generator the device fills with).
//
// Activation checkpointing keeps each layer's input only; the backward recomputes the layer into one
// activation set shared by every layer. Without it every layer keeps its own activations.
// Checkpoint offload (ArcticTraining's): the kept inputs go to pinned host memory on a copy stream
// while the next layers compute, and come back one layer ahead of their backward; the device then
// holds two hidden states (a ring) instead of L + 1. The last layer's input never leaves the device.
// TiledMLP: StepDims.layer.mlp_shards (runtime/cuda/decoder_layer.hpp).
// The optimizer step (runtime/cuda/optimizer.hpp) follows the backward: ZeRO-3 on one rank, fp32 master
// weights and moments on the device, the bf16 parameters rewritten; or, offloaded, the same step on the
// host (runtime/host_adam.hpp) between the gradients' copy to pinned host memory and the parameters' copy
// back (phases offload.grads, optimizer.step, offload.optimizer; the stream waits for the host).
// Every device buffer is allocated once, up front, from the DeviceArena (the step's peak is the arena's).
// Sequence parallel (sp = P > 1, an exchange and ZeRO-3's collectives over the same P ranks given): this runner
// is one rank holding T = S / P tokens; its caller gives it (set_batch) its tokens, its part of the labels shifted
// over the whole sequence, its RoPE rows, and the valid tokens of every rank to divide the loss by. The layers'
// attention runs between Ulysses exchanges
// (decoder_layer.hpp). ZeRO-3 (runtime/cuda/zero3.hpp): the rank keeps 1 / P of every parameter, its gradient
// and its optimizer state; the embedding, final norm and lm_head are all-gathered into their full buffers for the
// step (the embedding at its start, the other two while layer 0 computes), each layer into one of two weight slots
// (layer l in slot l % 2) before its forward and, but for the last two layers (still in their slots after the
// forward), again before its recompute and backward, whose gradients (one full slot) are then reduce-scattered into
// the rank's parts, as the outer tensors' after the embedding's backward (phases zero.allgather,
// zero.reduce_scatter). The next layer is gathered into the other slot while a layer computes
// (StepCollectives::all_gather_ahead: over GPUs on the communication stream, joined before that layer; logical
// ranks of one GPU gather at once). The optimizer on
// the host at P > 1 updates the rank's parts (ZeRO-Offload over ZeRO-3's partitions) with the norm over every rank's:
// each rank's sum of squares all-gathered (its fp64 bits as two fp32 words, copied, not summed) and added in rank
// order. With offload_params (the optimizer on the host; at P = 1 over OneRank, whose parts are the whole tensors, its
// gathers in place and its gradients their own parts) the parameter parts live in that optimizer's pinned
// staging (Zero3Shards' params on the host): each gather first copies the rank's part into its slice of the full
// buffer and all-gathers in place; the updated parts are not copied back after the step. The gathers ahead copy on
// a fetch stream of their own, overlapping the layer that computes; what it does not hide shows in offload.params.
// At P = 1 the layers' and the outer tensors' full gradients are ZeRO-3's gradient parts (no slot, no copy).
// tests/gpu/test_step_sp.cpp checks P ranks against one.
//
// Tensors (T tokens, h hidden, V vocabulary, Tc = ceil(T / shards) tokens per logits chunk):
//   tokens, labels [T] int32        hidden[l] [T, h] bf16 (l = 0..L: the layers' inputs, then the last output;
//                                   offload: two device buffers, hidden[l] in ring[l % 2]; host [L - 1, T, h] pinned)
//   n_final, dn_final [T, h] bf16   rstd_final [T] fp32       logits [Tc, V] bf16 (dlogits in place)
//   loss_rows [T] fp32              d_embed [V, h] fp32       d_head [V, h] bf16      d_final [h] fp32
//   ZeRO-3 (sp > 1, or offload_params): the layers' weights in two slots and (sp > 1) their gradients in one (the rest of each tensor is ZeRO-3's part,
//   Zero3Shards), each layer's head-sharded tensors (decoder_layer.hpp)
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/cuda/cuda_events.hpp"
#include "runtime/cuda/decoder_layer.hpp"
#include "runtime/cuda/optimizer.hpp"
#include "runtime/cuda/zero3.hpp"
#include "runtime/host_adam.hpp"
#include "runtime/reference_step.hpp"

namespace ulysses::runtime::cuda {

struct StepPlan {
  bool checkpoint = true;           // activation checkpointing (keep each layer's input, recompute)
  std::int64_t logits_shards = 1;   // > 1: tiled logits over torch.chunk shards of the tokens
  bool offload_checkpoints = false; // the kept inputs in pinned host memory (needs checkpoint)
  bool optimizer = true;            // AdamW after the backward (false: forward and backward only)
  bool offload_optimizer = false;   // AdamW on the host (runtime/host_adam.hpp): gradients to pinned host
                                    // memory, the step there, the bf16 parameters back (offload_params: none)
  int host_threads = 0;             // the host optimizer's threads (0: every core)
  bool offload_params = false;      // with offload_optimizer: ZeRO-3's parameter parts in the host optimizer's
                                    // pinned staging, fetched before each gather (sp 1: the runner needs OneRank)
  AdamConfig adam;
};

class StepRunner {
 public:
  // Allocates every buffer and fills the parameters from `seed` (host_params(d, seed) are the same).
  // sp, zero: the exchange and the collectives among the sequence's ranks, both or neither (one rank), or zero
  // alone of one rank (OneRank: offload_params at sp 1, ZeRO-3's parts and slots over that rank); they must
  // outlive the runner.
  StepRunner(const StepDims& d, const StepPlan& plan, DeviceArena& arena, Gemm& gemm, std::uint64_t seed,
             kernels::AttnKernel attn = kernels::AttnKernel::flash, LayerExchange* sp = nullptr, StepCollectives* zero = nullptr);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // The batch: tokens and their (shifted) labels (T each), the RoPE tables [T, D/2], and the number
  // of valid tokens the loss is divided by (over every SP rank; 0: this batch's own).
  void set_batch(const std::vector<std::int64_t>& tokens, const std::vector<std::int64_t>& labels,
                 const std::vector<core::bf16>& cos, const std::vector<core::bf16>& sin, std::int64_t loss_divisor = 0);

  // Forward, backward (the gradients overwrite the previous step's), then the optimizer (plan.optimizer).
  // marks may be null.
  void step(cudaStream_t stream, PhaseMarks* marks);
  const AdamW* optimizer() const { return adam_.get(); }
  const HostAdamW* host_optimizer() const { return host_adam_.get(); }
  std::vector<double> param(std::size_t i) const;  // the optimizer's tensor i as the device holds it (synchronous)
  std::int64_t host_pinned_bytes() const { return host_bytes_; }

  double loss_sum() const;                  // the last step's summed token losses (downloads, synchronous)
  std::int64_t valid_tokens() const { return valid_; }
  StepResult grads() const;                 // loss and gradients, as step_reference returns them (without ZeRO-3)
  const Zero3Shards* zero3() const { return zero_.get(); }  // ZeRO-3: the rank's parts (null: without it)
  static StepParams host_params(const StepDims& d, std::uint64_t seed);

 private:
  StepDims d_;
  StepPlan plan_;
  BufferSet bufs_;
  LayerCtx ctx_;
  std::vector<LayerWeights> w_;  // one per layer, or ZeRO-3's two slots
  std::vector<LayerGrads> g_;    // one per layer (at sp 1 with ZeRO-3: its parts), or at sp > 1 ZeRO-3's one slot
  std::unique_ptr<Zero3Shards> zero_;
  const LayerWeights& weights(std::int64_t l) const { return w_[static_cast<std::size_t>(zero_ ? l % 2 : l)]; }
  const LayerGrads& layer_grads(std::int64_t l) const { return g_[static_cast<std::size_t>(g_.size() > 1 ? l : 0)]; }
  std::size_t tensor_index(std::int64_t l, int j) const;  // optimizer order
  using Gathered = std::vector<std::pair<std::size_t, bf16_t*>>;  // ZeRO-3 tensors (index) and their full buffers
  Gathered layer_tensors(std::int64_t l) const;
  static constexpr int kOuterAhead = 2;  // gather()'s ahead: 0, 1 a layer slot, kOuterAhead the final norm and lm_head
  void gather(const Gathered& g, cudaStream_t s, PhaseMarks* marks, int ahead = -1);
  void join(int ahead, cudaStream_t s, PhaseMarks* marks);
  void reduce_layer(std::int64_t l, cudaStream_t s);
  std::optional<Stream> fetch_;     // offload_params: the stream that fetches parts ahead, the event it waits on
  std::optional<Events> slot_free_;  // (the compute stream's work so far), and one per ahead (fetched)
  std::optional<Events> fetched_;
  std::vector<LayerActs> acts_;  // one per layer, or one (checkpointing)
  LayerScratch scratch_;
  std::vector<bf16_t*> hidden_;  // L + 1 (offload: the two ring buffers)
  std::unique_ptr<AdamW> adam_;
  std::unique_ptr<HostAdamW> host_adam_;
  std::vector<ParamRef> opt_params_;    // the optimizer's tensors (device), in its order
  std::vector<HostTensor> host_opt_;    // offloaded optimizer: each tensor's pinned gradient and parameters
  std::vector<PinnedPtr> pinned_;  // every pinned allocation (freed with the runner, or when the constructor throws)
  double* norm_dev_ = nullptr;        // P > 1 with the host optimizer: [1 + P] fp64, this rank's sum of squares,
  double* norm_host_ = nullptr;       // then every rank's (device, for the all-gather); pinned [P], their copy
  double global_sum_squares(double mine, cudaStream_t s);
  bf16_t* host_ = nullptr;       // pinned (in pinned_): the offloaded checkpoints [L - 1, T, h]
  std::int64_t host_bytes_ = 0;  // every pinned byte (checkpoints, the optimizer's staging)
  void host_optimizer_step(cudaStream_t s, PhaseMarks* marks);
  std::optional<Stream> copy_;  // offload: the copy stream, and an event per copy (d2h, h2d) per layer
  std::optional<Events> d2h_, h2d_, ready_;
  bf16_t* hidden(std::int64_t l) const { return hidden_[static_cast<std::size_t>(plan_.offload_checkpoints ? l % 2 : l)]; }
  std::vector<ParamRef> optimizer_params() const;
  void copy_checkpoint(std::int64_t l, bool to_host, cudaStream_t s);
  bf16_t *embed_, *w_final_, *head_, *cos_, *sin_, *n_final_, *dn_final_, *logits_, *d_head_, *dy_, *dx_;
  float *rstd_final_, *loss_rows_, *d_embed_, *d_final_;
  std::int32_t *tokens_, *labels_;
  std::int64_t valid_ = 0, divisor_ = 0;
};

}  // namespace ulysses::runtime::cuda
