// The eager elementwise passes of one step: per-layer counts (transformers 5.17, modeling_llama.py
// LlamaDecoderLayer.forward lines 305-323, LlamaMLP.forward 175; modeling_qwen3.py 252-257), times
// = elements * bytes per element / HBM bandwidth. docs/MODEL.md "Eager elementwise passes". The same
// passes on our runtime (plan.runtime ulysses) with its kernels' rates and its three extra fork adds
// (docs/STEP_RUNTIME.md "Model").
#include "sim/eager_time.hpp"

#include "sim/step_runtime_memory.hpp"
#include "sim/timing.hpp"

namespace ulysses {
namespace {

// Defaults: the op bench on one H200 on 2026-12-02 (records/validation/h200-op-bench-3.txt; the same
// figures as profiles/h200-sxm-141gb.yaml), as bytes per element at its datasheet HBM bandwidth
// (4800 GB/s); a profile without calibrated rates scales them by its own hbm_GBps.
constexpr std::array<double, kEagerRates> kDefaultBytes = {
    /*rmsnorm.fwd*/ 59.0, /*rmsnorm.bwd*/ 127.5, /*headnorm.fwd*/ 63.6, /*headnorm.bwd*/ 134.3,
    /*rope.fwd*/ 63.9, /*rope.bwd*/ 71.0, /*add.fwd*/ 6.6, /*swiglu.fwd*/ 11.4,
    /*swiglu.bwd*/ 19.9, /*embed.fwd*/ 5.3, /*embed.bwd*/ 58.5, /*embed.grad*/ 5.4,
    /*loss.fwd*/ 31.3, /*loss.bwd*/ 29.7, /*adam.step*/ kAdamBytesPerParam /*not read: sim/timing.cpp*/};

// Our runtime's kernels (plan.runtime ulysses) without a calibration: each kernel's own traffic per
// element at the HBM rate (a lower bound on its time), bf16 = 2 bytes (docs/STEP_RUNTIME.md "Model"):
//   rmsnorm fwd: read x, write out (4); bwd: read dout, x, write dx (6) (rstd and dw are [T] and [h])
//   rope (in place): read + write (4) each way; add: read a, b, write out (6)
//   swiglu fwd: read gate, up, write act (6); bwd: read dact, gate, up, write dgate, dup (10)
//   embedding fwd: read a row, write it (4); bwd per token element: read dx, fp32 atomic add (2 + 8);
//   per [V, h] element: the fp32 gradient's memset (4) (tied: + the lm_head's gradient added, 2 + 8)
//   loss: the cross-entropy kernel reads each logit twice and writes its gradient over it (6); the
//   lm_head's backward GEMMs read that gradient, nothing elementwise (0)
//   adam.step: the norm pass reads the bf16 gradient (2); AdamW reads it again (2), reads and writes the
//   fp32 master, m and v (24) and writes the bf16 parameter (2): 30
constexpr std::array<double, kEagerRates> kUlyssesKernelBytes = {
    /*rmsnorm.fwd*/ 4, /*rmsnorm.bwd*/ 6, /*headnorm.fwd*/ 4, /*headnorm.bwd*/ 6,
    /*rope.fwd*/ 4, /*rope.bwd*/ 4, /*add.fwd*/ 6, /*swiglu.fwd*/ 6,
    /*swiglu.bwd*/ 10, /*embed.fwd*/ 4, /*embed.bwd*/ 10, /*embed.grad*/ 4,
    /*loss.fwd*/ 6, /*loss.bwd*/ 0, /*adam.step*/ 30};
// An fp32 gradient (the embedding's, the norms' weights') is read twice at 2 more bytes each.
constexpr double kAdamFp32GradBytes = kUlyssesKernelBytes[static_cast<std::size_t>(EagerRate::adam_step)] + 2 * 2;
constexpr double kTiedGradAddBytes = 10;  // kernels/loss_ops.cu add_bf16_to_fp32, per [V, h] element

}  // namespace

double eager_bytes_per_elem(const Scenario& sc, EagerRate r) {
  const auto i = static_cast<std::size_t>(r);
  const bool ours = sc.plan.runtime == Runtime::ulysses;
  const auto& rates = ours ? sc.hw.calibrated.ulysses_bytes_per_elem : sc.hw.calibrated.eager_bytes_per_elem;
  const double cal = sc.hw.has_calibration ? rates[i] : -1;
  return cal > 0 ? cal : (ours ? kUlyssesKernelBytes[i] : kDefaultBytes[i]);
}

core::seconds_t loss_pass_s(const Scenario& sc, const Dims& d, bool forward) {
  const double logits = static_cast<double>(d.B) * static_cast<double>(d.S_l) * static_cast<double>(d.V);
  return logits * eager_bytes_per_elem(sc, forward ? EagerRate::loss_fwd : EagerRate::loss_bwd) / (sc.hw.hbm_GBps * 1e9);
}

EagerTimes eager_times(const Scenario& sc, const Dims& d) {
  EagerTimes e;
  const bool ours = sc.plan.runtime == Runtime::ulysses;
  const double per_byte = 1 / (sc.hw.hbm_GBps * 1e9);
  const auto t = [&](double elems, EagerRate r) { return elems * eager_bytes_per_elem(sc, r) * per_byte; };
  const double T = static_cast<double>(d.B) * static_cast<double>(d.S_l), L = static_cast<double>(d.L);
  const double Th = T * static_cast<double>(d.h), TF = T * static_cast<double>(d.F);
  // q and k on this rank's tokens with every head (RoPE and the q/k norm run before the exchange)
  const double Tqk = T * static_cast<double>(d.H + d.H_kv) * static_cast<double>(d.D);
  // TiledMLP: on our runtime only with more than one shard; its checkpoint recompute stops before the MLP
  const bool qk = sc.model.qk_norm, ck = d.ckpt, tm = ours ? ulysses_tiled_mlp(d) : sc.plan.tiled_mlp;

  // one pass of each op over one layer's tensors
  const double rms_f = t(Th, EagerRate::rmsnorm_fwd), rms_b = t(Th, EagerRate::rmsnorm_bwd);
  const double rope_f = t(Tqk, EagerRate::rope_fwd), rope_b = t(Tqk, EagerRate::rope_bwd);
  const double add = t(Th, EagerRate::add_fwd);
  // per layer: input and post-attention norms (+ Qwen3's q/k norms); the final norm once
  const double norm_f = 2 * rms_f + (qk ? t(Tqk, EagerRate::headnorm_fwd) : 0);
  const double norm_b = 2 * rms_b + (qk ? t(Tqk, EagerRate::headnorm_bwd) : 0);
  e.norm_fwd = L * norm_f + rms_f;
  e.norm_bwd = L * norm_b + rms_b;
  // torch's non-reentrant checkpoint stops the recompute at the layer's last saved tensor (the
  // down projection's input): both norms, RoPE, the first residual add and the activation product
  e.norm_recompute = ck ? L * norm_f : 0;
  // two residual adds forward; backward: RoPE's and one gradient sum at each of the two forks
  e.rope_add_fwd = L * (rope_f + 2 * add);
  e.rope_add_recompute = ck ? L * (rope_f + add) : 0;
  e.rope_add_bwd = L * (rope_b + 2 * add);
  e.swiglu_fwd = L * t(TF, EagerRate::swiglu_fwd);
  e.swiglu_recompute = ck && !(ours && tm) ? e.swiglu_fwd : 0;
  e.swiglu_tiled_recompute = tm ? e.swiglu_fwd : 0;  // TiledMLP reruns each shard's forward
  e.swiglu_bwd = L * t(TF, EagerRate::swiglu_bwd);
  e.embed_fwd = t(Th, EagerRate::embed_fwd);
  const double Vh = static_cast<double>(d.V) * static_cast<double>(d.h);
  e.embed_bwd = t(Th, EagerRate::embed_bwd) + t(Vh, EagerRate::embed_grad);
  if (ours) {
    // our runtime sums the gradient at three more forks with an add kernel each, inside the phase of
    // the GEMMs that produce it: the MLP input (gate and up paths: mlp.bwd) and the attention input
    // (q, k, v paths: gemm.qkv.bwd) (runtime/cuda/decoder_layer.cpp layer_backward)
    e.fork_adds_mlp_bwd = L * add;
    e.fork_adds_qkv_bwd = L * 2 * add;
    // tied: the lm_head's bf16 gradient added into the embedding's fp32 one, at the [V, h] rate's efficiency
    if (sc.model.tied_embeddings) e.embed_bwd += t(Vh, EagerRate::embed_grad) * kTiedGradAddBytes / kUlyssesKernelBytes[static_cast<std::size_t>(EagerRate::embed_grad)];
  }
  return e;
}

core::seconds_t ulysses_optimizer_s(const Scenario& sc, const Dims& d) {
  const StepParamCounts pc = ulysses_param_counts(d, sc.model.tied_embeddings, sc.model.qk_norm);
  const double matrices = static_cast<double>(pc.bf16_grads), fp32_grads = static_cast<double>(pc.fp32_grads);
  // the rate of a bf16 gradient (calibrated, or the kernels' 30 bytes); an fp32 one in proportion to its traffic
  const double bf16_rate = eager_bytes_per_elem(sc, EagerRate::adam_step);
  const double fp32_rate = bf16_rate * kAdamFp32GradBytes / kUlyssesKernelBytes[static_cast<std::size_t>(EagerRate::adam_step)];
  return (matrices * bf16_rate + fp32_grads * fp32_rate) / (sc.hw.hbm_GBps * 1e9);
}

}  // namespace ulysses
