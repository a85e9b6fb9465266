#pragma once
// The elementwise passes of the HF decoder layer (PyTorch eager) that the step model times by
// bytes: the names of their calibrated rates and where each is charged. Rates and counts: docs/MODEL.md
// "Eager elementwise passes"; the times: sim/eager_time.cpp.
#include <array>
#include <string_view>

namespace ulysses {

// One rate each: effective bytes per element at the profile's hbm_GBps (time = elements * bytes / hbm).
enum class EagerRate {
  rmsnorm_fwd, rmsnorm_bwd,    // RMSNorm over [T, h] (input, post-attention and final norm)
  headnorm_fwd, headnorm_bwd,  // RMSNorm over the head dim of [T, H, D] / [T, H_kv, D] (Qwen3's q/k norm)
  rope_fwd, rope_bwd,          // apply_rotary_pos_emb; elements of q and k together
  add_fwd,                     // a bf16 add over [T, h] (residual adds, gradient accumulation at a fork)
  swiglu_fwd, swiglu_bwd,      // act_fn(gate) * up over [T, F]
  embed_fwd, embed_bwd,        // token embedding over [T, h] (gather; its backward's per-token part)
  embed_grad,                  // the embedding backward's part per element of the dense gradient [V, h]
  loss_fwd, loss_bwd,          // the loss on the logits: cross_entropy(logits.float()) over [T, V]
  adam_step,                   // our runtime's optimizer per parameter with a bf16 gradient: its norm pass
                               // and AdamW (kernels/optim_ops.cu; PyTorch's optimizer: sim/timing.cpp)
  count
};
inline constexpr int kEagerRates = static_cast<int>(EagerRate::count);

// The profile keys under calibrated.eager_bytes_per_elem, in EagerRate order.
inline constexpr std::array<std::string_view, kEagerRates> kEagerRateKeys = {
    "rmsnorm.fwd", "rmsnorm.bwd", "headnorm.fwd", "headnorm.bwd", "rope.fwd", "rope.bwd",
    "add.fwd",     "swiglu.fwd",  "swiglu.bwd",   "embed.fwd",    "embed.bwd", "embed.grad",
    "loss.fwd",    "loss.bwd",    "adam.step"};

// Every rate "not measured" (< 0).
constexpr std::array<double, kEagerRates> eager_unmeasured() {
  std::array<double, kEagerRates> a{};
  for (auto& x : a) x = -1;
  return a;
}

// The index of a key, or -1.
constexpr int eager_rate_index(std::string_view key) {
  for (int i = 0; i < kEagerRates; ++i)
    if (kEagerRateKeys[static_cast<std::size_t>(i)] == key) return i;
  return -1;
}

}  // namespace ulysses
