// sim/step_runtime_memory.hpp: our runtime's step buffers, in the order the runner allocates them.
#include "sim/step_runtime_memory.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/attn_impls.hpp"

namespace ulysses {

StepRuntimeFlags step_runtime_flags(const Scenario& sc) {
  const core::AttnImpl* impl = core::find_attn_impl(sc.plan.attn_implementation);
  StepRuntimeFlags f;
  f.tied = sc.model.tied_embeddings;
  f.flash = !impl || impl->kernel != core::AttnKernel::reference;
  f.qk_norm = sc.model.qk_norm;
  f.offload_checkpoints = sc.plan.offload_checkpoints && sc.plan.activation_checkpointing;
  f.offload_optimizer = sc.plan.offload_optimizer;
  f.offload_params = sc.plan.offload_params && sc.plan.offload_optimizer;  // the plan's rule
  f.transport_staging = sc.plan.sp_size > 1;
  return f;
}

StepParamCounts ulysses_layer_param_counts(const Dims& d, bool qk_norm) {
  const std::int64_t h = d.h, HD = d.H * d.D, KD = d.H_kv * d.D;
  StepParamCounts c;
  c.bf16_grads = 2 * HD * h + 2 * KD * h + 3 * d.F * h;
  c.fp32_grads = 2 * h + (qk_norm ? 2 * d.D : 0);
  return c;
}

StepParamCounts ulysses_param_counts(const Dims& d, bool tied, bool qk_norm) {
  const std::int64_t h = d.h, V = d.V, L = d.L;
  const StepParamCounts layer = ulysses_layer_param_counts(d, qk_norm);
  StepParamCounts c;
  c.bf16_grads = L * layer.bf16_grads + (tied ? 0 : V * h);
  c.fp32_grads = V * h + h + L * layer.fp32_grads;
  return c;
}

StepRuntimeBytes ulysses_step_bytes(const Dims& d, const StepRuntimeFlags& f) {
  const std::int64_t T = d.B * d.S_l, h = d.h, F = d.F, V = d.V, L = d.L, H = d.H;
  const std::int64_t HD = d.H * d.D, KD = d.H_kv * d.D;
  const std::int64_t bf = 2, f32 = 4;
  const bool tiled = ulysses_tiled_mlp(d);
  const std::int64_t Tm = tiled ? torch_chunk_sizes(T, d.mlp_shards).front() : T;  // the MLP's rows at once
  StepRuntimeBytes b;
  const StepParamCounts pc = ulysses_param_counts(d, f.tied, f.qk_norm);
  const std::int64_t n_params = pc.total(), P = d.P;
  const bool sharded = P > 1 || f.offload_params;  // ZeRO-3's parts and slots (sp 1: over one rank, OneRank)
  const StepParamCounts layer = ulysses_layer_param_counts(d, f.qk_norm);
  if (sharded) {
    // ZeRO-3 over the sp ranks (runtime/cuda/zero3.hpp): 1 / P of every parameter and gradient (every tensor a
    // multiple of 8 P, no padding); the embedding, final norm and lm_head whole (their gradients as on one rank);
    // two gathered layers' weights; with offload_params the parts live in the host optimizer's pinned staging
    const std::int64_t outer = V * h + h + (f.tied ? 0 : V * h);
    b.params = ((f.offload_params ? 0 : n_params / P) + outer + std::min<std::int64_t>(2, L) * layer.total()) * bf;
  } else {
    b.params = n_params * bf;
  }
  if (P > 1) {  // the gradient parts, the outer tensors' full gradients, one layer's
    b.grads = pc.grad_bytes() / P + V * h * f32 + h * f32 + V * h * bf + layer.grad_bytes();
  } else {  // the gradients in their types, and the lm_head's bf16 one even when tied (added into the embedding's);
            // with offload_params they are ZeRO-3's gradient parts of one rank (runtime/cuda/step_runner.cpp)
    b.grads = pc.grad_bytes() + (f.tied ? V * h * bf : 0);
  }
  if (f.optimizer && !f.offload_optimizer) {  // master, m, v per parameter (part); partial sums per tensor; norm and
                                              // coefficient; at P > 1 every rank's partial sums too
    const std::int64_t tensors = 2 + (f.tied ? 0 : 1) + L * (f.qk_norm ? 11 : 9);
    b.optimizer = 3 * (n_params / P) * f32 + tensors * kOptimNormBlocks * f32 + 2 * f32 +
                  (P > 1 ? P * tensors * kOptimNormBlocks * f32 : 0);
  }
  if (f.optimizer && f.offload_optimizer) {  // per parameter (part): its gradient as the step holds it, its bf16 copy;
                                             // at P > 1 the norm's exchange: [1 + P] fp64 on the device, [P] pinned
    b.host_pinned += pc.grad_bytes() / P + n_params / P * bf + (P > 1 ? P * 8 : 0);
    b.host_state = 3 * (n_params / P) * f32;
    b.optimizer = P > 1 ? (1 + P) * 8 : 0;
  }
  // sp > 1 (runtime/cuda/decoder_layer.cpp): q, k, v, o also head-sharded over all S = T * P positions; the same
  // bytes again in the backward's scratch (their gradients); lse [H_l, S] is H * T values either way
  const std::int64_t S = T * P, H_l = P > 1 ? d.H_l : H, K_l = P > 1 ? d.kv_local : d.H_kv;
  const std::int64_t heads = P > 1 ? (2 * S * H_l + 2 * S * K_l) * d.D * bf : 0;
  const std::int64_t acts = (T * h + T * HD + 2 * T * KD + T * HD + 2 * T * h + (tiled ? 0 : 3 * T * F)) * bf +
                            (2 * T + H * T) * f32 +
                            (f.qk_norm ? (T * HD + T * KD) * bf + (T * H + T * d.H_kv) * f32 : 0) + heads;
  const std::int64_t hidden = f.offload_checkpoints ? 2 : L + 1;
  b.kept = 2 * T * 4 /*tokens, labels int32*/ + 2 * (T * d.D / 2) * bf /*cos, sin*/ + hidden * T * h * bf +
           (d.ckpt ? 1 : L) * acts;
  b.host_pinned += f.offload_checkpoints ? (L - 1) * T * h * bf : 0;
  // attention backward workspace (kernels/attention_flash_bwd.cuh bwd_workspace_bytes) over its S positions and
  // H_l heads (one rank: T and H): fp32 dq_accum [S, H_l, D] and two [H_l, S padded to 128] fp32 rows, each
  // rounded up to 256 bytes; the reference kernel: delta [H_l, S] fp32
  auto r256 = [](std::int64_t x) { return (x + 255) / 256 * 256; };
  const std::int64_t S_pad = (S + 127) / 128 * 128;
  const std::int64_t attn_ws = f.flash ? r256(S * H_l * d.D * f32) + 2 * r256(H_l * S_pad * f32) : H_l * S * f32;
  b.scratch = (3 * Tm * F + (tiled ? 3 * Tm * F : 0) + 3 * T * h + 2 * T * HD + 2 * T * KD) * bf +
              std::min(T, kRmsNormBwdBlocks) * h * f32 + attn_ws +
              (f.qk_norm ? (T * HD + T * KD) * bf + std::min(T * H, kRmsNormBwdBlocks) * d.D * f32 : 0) + heads;
  const std::int64_t Tc = torch_chunk_sizes(T, d.logits_shards).front();
  b.loss_head = 2 * T * h * bf + T * f32 + Tc * V * bf + T * f32 + 2 * T * h * bf;
  b.gemm_workspace = kCublasLtWorkspaceBytes;
  // the Exchanger's send and receive buffers (runtime/cuda/exchange.cpp constructor, the capacity of
  // runtime/cuda/nccl_ranks.cpp exchange_capacity): P chunks of q, k and v (kv heads: max(H_kv, P)), T rows each, bf16
  if (P > 1 && f.transport_staging) b.staging = 2 * T * d.D * (H + 2 * std::max(d.H_kv, P)) * bf;
  return b;
}

StepRuntimeCapacity ulysses_step_capacity(const Scenario& sc, std::int64_t g, core::bytes_t ballast) {
  if (g < 1) throw std::invalid_argument("ulysses_step_capacity: granularity must be positive");
  const core::bytes_t device = sc.hw.hbm_bytes - ballast - process_context_bytes(sc);
  const std::int64_t procs = derive_dims(sc).gpus_on_node;  // our runtime's processes sharing the node's RAM
  const core::bytes_t host = host_capacity_bytes(sc) - kHostProcessOverheadBytes * procs;
  const StepRuntimeFlags f = step_runtime_flags(sc);
  const bool uses_host = f.offload_checkpoints || f.offload_optimizer;
  auto at = [&](std::int64_t S) {
    Scenario x = sc;
    x.plan.seq_len = S;
    return ulysses_step_bytes(derive_dims(x), f);
  };
  auto fails = [&](std::int64_t S) {  // what does not fit at S (none: it fits)
    const StepRuntimeBytes b = at(S);
    return b.total() > device                                                  ? Binding::gpu_hbm
           : uses_host && (b.host_pinned + b.host_state) * procs > host ? Binding::host_ram
                                                                          : Binding::none;
  };
  constexpr std::int64_t kBound = std::int64_t{1} << 26;
  StepRuntimeCapacity r;
  if (fails(g) != Binding::none) {
    r.binding = fails(g);
    return r;
  }
  std::int64_t lo = 1, hi = 2;  // in multiples of g: lo fits, hi does not (or the bound)
  while (hi * g <= kBound && fails(hi * g) == Binding::none) lo = hi, hi *= 2;
  if (hi * g > kBound) hi = kBound / g + 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fails(mid * g) == Binding::none ? lo : hi) = mid;
  }
  r.max_seq_len = lo * g;
  r.device_bytes = at(r.max_seq_len).total();
  r.binding = hi * g <= kBound ? fails(hi * g) : Binding::none;
  return r;
}

}  // namespace ulysses
