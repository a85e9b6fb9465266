#pragma once
// Device bytes of our CUDA runtime's whole step on one rank (runtime/cuda/step_runner.cpp, issue 13):
// the runner allocates every buffer once, up front, from its arena, so the step's peak is their sum,
// plus cuBLASLt's workspace (runtime/cuda/gemm.hpp). This mirrors the runner buffer by buffer (at sp > 1 one rank's:
// ZeRO-3's parts summed into params and grads, the head-sharded tensors into kept and scratch); the GPU tests
// (tests/gpu/test_step_runner.cpp, test_step_sp.cpp) check the arena's peak against it byte for byte, and
// tests/sim/test_step_runtime_memory.cpp the sums for small shapes by hand. docs/STEP_RUNTIME.md "Memory".
#include "sim/memory.hpp"

namespace ulysses {

struct StepRuntimeBytes {
  core::bytes_t params = 0;     // embedding, lm_head (untied), final norm, the layers' weights
  core::bytes_t grads = 0;      // d_embed fp32, d_head bf16, d_final fp32, the layers' gradients
  core::bytes_t optimizer = 0;  // AdamW: fp32 master weights, m, v per parameter; the norm's partial sums (on the
                                // host at sp > 1: the norm's exchange)
  core::bytes_t kept = 0;       // tokens, labels, RoPE tables, the hidden states, activation sets
  core::bytes_t scratch = 0;    // the backward's temporaries and workspaces (norm, attention, TiledMLP's shard)
  core::bytes_t loss_head = 0;  // final norm out and its gradient, rstd, one logits chunk, loss rows, dy/dx
  core::bytes_t gemm_workspace = 0;
  core::bytes_t staging = 0;    // sp > 1 over GPUs: the exchange's NCCL send and receive buffers (nccl_ranks.hpp)
  core::bytes_t host_pinned = 0;  // pinned host memory: checkpoint offload's kept inputs; the host optimizer's
                                  // staging (each tensor's gradient and bf16 parameters, at sp > 1 its part)
  core::bytes_t host_state = 0;   // the host optimizer's master weights and moments (pageable)
  core::bytes_t total() const { return params + grads + optimizer + kept + scratch + loss_head + gemm_workspace + staging; }
};

// What of the runner's plan changes its buffers besides the dimension letters (d: T = B * S_l tokens,
// ckpt: one activation set, else L; logits_shards; mlp_shards > 1: TiledMLP).
struct StepRuntimeFlags {
  bool tied = false;                 // the lm_head is the embedding
  bool flash = true;                 // the attention backward's workspace of the flash kernel (else the reference's)
  bool qk_norm = false;              // Qwen3's head norms (weights and gradients [D], the projections before them
                                     // and their rstd kept, their gradients and dw partials in the scratch)
  bool offload_checkpoints = false;  // two hidden states on the device, the inputs of layers 0..L-2 on the host
  bool optimizer = true;             // AdamW's state
  bool offload_optimizer = false;    // ... in host memory instead (runtime/host_adam.hpp), with pinned staging
  bool offload_params = false;       // ZeRO-3's parameter parts in that pinned staging, not on the device (at sp 1
                                     // the runner's ZeRO-3 machinery over one rank: two layer slots, the full
                                     // gradients as its parts)
  bool transport_staging = false;    // sp > 1 over GPUs (not logical ranks of one GPU): the exchange's staging
};
StepRuntimeBytes ulysses_step_bytes(const Dims& d, const StepRuntimeFlags& f);

// The step's parameters by the type of their gradient: bf16 (every matrix: the layers', an untied lm_head)
// or fp32 (the embedding, whose gradient is summed by atomics, and the norms' weights).
struct StepParamCounts {
  std::int64_t bf16_grads = 0, fp32_grads = 0;
  std::int64_t total() const { return bf16_grads + fp32_grads; }
  std::int64_t grad_bytes() const { return 2 * bf16_grads + 4 * fp32_grads; }  // every gradient once, in its type
};
// Our runtime's TiledMLP (runtime/cuda/decoder_layer.cpp tiled_mlp): on when the shard rule gives more than one.
inline bool ulysses_tiled_mlp(const Dims& d) { return d.mlp_shards > 1; }
StepParamCounts ulysses_param_counts(const Dims& d, bool tied, bool qk_norm);
// One decoder layer's: its seven matrices (bf16 gradients), its two norms and Qwen3's two head norms (fp32).
StepParamCounts ulysses_layer_param_counts(const Dims& d, bool qk_norm);
// The flags from a scenario (plan.runtime ulysses; its attention implementation picks the kernel).
StepRuntimeFlags step_runtime_flags(const Scenario& sc);

// The longest S of our runtime's step (multiples of g; at sp > 1 one rank's buffers, the exchange's staging
// included: the step over GPUs): the largest whose buffers fit the HBM less
// `ballast` and the process's context (process_context_bytes), and, with an offload, whose host memory
// (pinned and the host optimizer's state, per process on the node) fits the host (host_capacity_bytes less
// kHostProcessOverheadBytes per process). Every buffer is allocated up front, so
// the sum decides; binding: what fails at the next multiple (gpu_hbm or host_ram; none when nothing fits
// or the search bound 2^26 tokens is reached). Ignores sc.plan.seq_len.
struct StepRuntimeCapacity {
  std::int64_t max_seq_len = 0;
  core::bytes_t device_bytes = 0;  // ulysses_step_bytes(...).total() at max_seq_len
  Binding binding = Binding::none;
};
StepRuntimeCapacity ulysses_step_capacity(const Scenario& sc, std::int64_t g, core::bytes_t ballast = 0);

inline constexpr core::bytes_t kCublasLtWorkspaceBytes = core::bytes_t{32} << 20;  // runtime/cuda/gemm.hpp
// kernels/layer_ops.cu rmsnorm_bwd keeps one fp32 row of dw partial sums per resident block (the device's
// occupancy at h); the model takes two per SM of an H100/H200 (132 SMs): the GPU test prints both. At
// h = 4096 one row is 16 KiB, so the estimate is off by kilobytes to a few MiB, not more.
inline constexpr std::int64_t kRmsNormBwdBlocks = 264;
// kernels/optim_ops.hpp kNormBlocks: fp32 partial sums of squared gradients per parameter tensor.
inline constexpr std::int64_t kOptimNormBlocks = 128;

}  // namespace ulysses
