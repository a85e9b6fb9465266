// Memory model (docs/MODEL.md "GPU memory" and "Host memory"). Sizes are computed in double
// (exact for integers below 2^53) and saturated per term at kMaxTermBytes so that the search
// up to 2^40 tokens cannot overflow int64.
#include "sim/memory.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/attn_impls.hpp"
#include "sim/model_terms.hpp"

namespace ulysses {
namespace {

core::bytes_t sat(double x) {
  if (!(x > 0)) return 0;
  if (x >= static_cast<double>(kMaxTermBytes)) return kMaxTermBytes;
  // std::llround(x) (half away from zero) without the libm call: 0 < x < 2^57, so the truncation is
  // exact as a double and x - it is exact (x < 1: it = 0; else it >= x / 2)
  const auto it = static_cast<core::bytes_t>(x);
  return it + (x - static_cast<double>(it) >= 0.5 ? 1 : 0);
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
double ceil_div_d(double a, double b) { return std::ceil(a / b); }

// Activation sizes of one layer on one rank, in bytes (doubles; see docs/MODEL.md).
struct Act {
  double th;      // one hidden-size activation [B, S_l, h] bf16
  double q;       // q (or o, or their grads) in either layout: B*S_l*H*D*2
  double kvs;     // k or v as projected, seq layout: B*S_l*H_kv*D*2
  double kvr;     // the kv replica [B, S_l, P, D] bf16 when replicated, else 0
  double kvh;     // k or v in head layout (= exchanged): B*S_l*max(H_kv,P)*D*2
  double lse;     // attention log-sum-exp fp32 [B, H_l, S] = B*S_l*H*4
  double fa_ws;   // FA2 backward workspace: dq_accum fp32 + dsoftmax_sum fp32 + GQA-expanded dk, dv
  double rstd;    // two RMSNorm rstd fp32 [B, S_l]
  double mlp_t;   // one [B, S_l/n, F] bf16 MLP intermediate (n = TiledMLP shards)
  double x_in;    // the layer input when it is not already a live GPU checkpoint
  double out_held;  // checkpoint offload: the recomputed layer output, held through the layer's backward
                    // (runtime/deepspeed/ulysses_worker/offload.py backward: `out = ctx.run(x)` then
                    // `torch.autograd.backward(out, grad)`); 0 otherwise
  double x_keep;  // the layer input once the layer's backward is pending: x_in, except that
                  // without checkpointing eager RMSNorm keeps no bf16 copy of it (only fp32)
  double norm_eager;  // eager RMSNorm, per norm: fp32 input copy (2 th) + bf16 normalized (th); 0 fused
  double qk_eager;    // Qwen3 q_norm + k_norm (eager, per head over D): the same saved set on q and k,
                      // 3 q + 3 kvs + their rstd; 0 without qk_norm or fused
  bool eager;     // plan.rmsnorm_implementation == eager
  bool ckpt;      // activation checkpointing (the first forward pass saves nothing)
};

Act activations(const Scenario& sc, const Dims& d) {
  const double tok = static_cast<double>(d.B) * static_cast<double>(d.S_l);
  Act a{};
  a.th = tok * d.h * 2;
  a.q = tok * d.H * d.D * 2;
  a.kvs = tok * d.H_kv * d.D * 2;
  a.kvr = d.kv_replica ? tok * d.P * d.D * 2 : 0;
  a.kvh = tok * d.kv_wire * d.D * 2;
  a.lse = tok * d.H * 4;
  a.fa_ws = tok * d.H * d.D * 4 + tok * d.H * 4 + (d.H_l != d.kv_local ? 2 * a.q : 0);
  a.rstd = 2 * tok * 4;
  a.mlp_t = static_cast<double>(d.B) * ceil_div_d(static_cast<double>(d.S_l), static_cast<double>(d.mlp_shards)) * d.F * 2;
  const bool ckpt_on_gpu = sc.plan.activation_checkpointing && !sc.plan.offload_checkpoints;
  a.x_in = ckpt_on_gpu ? 0 : a.th;
  a.eager = sc.plan.rmsnorm_implementation == RmsNormImpl::eager;
  a.ckpt = sc.plan.activation_checkpointing;
  a.x_keep = a.eager && !a.ckpt ? 0 : a.x_in;
  a.out_held = sc.plan.activation_checkpointing && sc.plan.offload_checkpoints ? a.th : 0;
  // HF LlamaRMSNorm.forward: x.to(float32) -> pow(2) saves the fp32 x (4 B/elem); x * rsqrt(..)
  // saves the same fp32 x and rstd; weight * x_normed.to(bf16) saves the bf16 x_normed.
  a.norm_eager = a.eager ? 3 * a.th : 0;
  // Qwen3RMSNorm is LlamaRMSNorm's code, applied per head to q_proj(x) [B, S, H, D] and k_proj(x):
  // fp32 input copy (2 q), bf16 normalized (q), rstd [B, S, H] fp32; likewise for k (kvs)
  a.qk_eager = a.eager && sc.model.qk_norm ? 3 * a.q + 3 * a.kvs + tok * (d.H + d.H_kv) * 4 : 0;
  return a;
}

// Activations one layer keeps for its backward (autograd's saved tensors): what the
// recompute rebuilds under checkpointing, and what every layer holds without it.
double saved_per_layer(const Act& a, bool tiled_mlp) {
  // fused: the kernel saves its bf16 input (x, h1) and rstd; eager saves fp32 copies instead
  // (norm_eager) and nothing holds the bf16 x, h1 once the layer's forward has returned.
  const double inputs = a.eager ? 2 * a.norm_eager : a.th /*x*/ + a.th /*h1*/;
  const double norms = inputs + a.th /*norm1 out*/ + a.th /*norm2 out*/ + a.rstd;
  const double attn = a.q + 2 * a.kvh + a.q /*q,k,v,out head layout*/ + a.lse + a.q /*o_proj input, seq*/;
  const double mlp = tiled_mlp ? 0 : 4 * a.mlp_t;  // gate, up, act, product; TiledMLP saves only its input
  return norms + a.qk_eager + attn + mlp;
}

// The layer working set at one moment, term by term (docs/MODEL.md "Peak of one layer").
struct Moment {
  const char* name;
  double qkvo_seq, qkvo_head, a2a, stats, ws, mlp, norms, norm_eager, grads;
  double reduce = 0;  // a ZeRO-3 bucket flush's epilogue on the reduce stream (sim/reduce_flush.hpp)
  double total() const { return qkvo_seq + qkvo_head + a2a + stats + ws + mlp + norms + norm_eager + grads + reduce; }
};

constexpr int kMoments = 9;
void layer_moments(const Act& a, Moment* m) {
  // forward: x, norm1 out (+ h1, norm2 out); the first pass under checkpointing saves nothing,
  // without checkpointing eager norms save their fp32 copies (norm_eager) already here
  const double norms_attn_f = a.x_in + a.th + a.rstd / 2;
  const double norms_full_f = a.x_in + 3 * a.th + a.rstd;
  const double eager_f = a.ckpt ? 0 : a.norm_eager;
  const double qk_f = a.ckpt ? 0 : a.qk_eager;  // q/k norms run before the exchange
  // recompute / backward: eager keeps no bf16 h1 (and, without checkpointing, no bf16 x)
  const double norms_attn = a.x_keep + a.th + a.rstd / 2;
  const double norms_full = a.x_keep + (a.eager ? 2 : 3) * a.th + a.rstd;
  // once the recompute has produced the layer output (recompute.saved on), plus what holds it
  const double norms_attn_b = norms_attn + a.out_held, norms_full_b = norms_full + a.out_held;
  const double head4 = a.q + 2 * a.kvh + a.q;                // q, k, v, out in head layout
  const double dy = a.th;                                     // grad of the residual stream
  // RoPE (HF apply_rotary_pos_emb: q*cos + rotate_half(q)*sin): q, q*cos, rotate_half(q) and
  // rotate_half(q)*sin live together, next to k and v (seq layout)
  const double rope_q = 4 * a.q + 2 * a.kvs;
  m[0] = {"forward.a2a_qkv", a.q + 2 * a.kvs + 2 * a.kvr, 0, 2 * a.q, 0, 0, 0, norms_attn_f, eager_f + qk_f, 0};
  m[1] = {"forward.attn", 0, head4, 0, a.lse, 0, 0, norms_attn_f, eager_f + qk_f, 0};
  m[2] = {"forward.mlp", 0, 0, 0, 0, 0, 3 * a.mlp_t, norms_full_f, 2 * eager_f + qk_f, 0};
  // recompute: the layer's saved set rebuilt while the incoming gradient waits
  // (the q/k norms' saved sets live from the recompute until their backward, after the exchange's)
  m[3] = {"recompute.rope", rope_q, 0, 0, 0, 0, 0, norms_attn, a.norm_eager + a.qk_eager, a.ckpt ? dy : 0};
  m[4] = {"recompute.saved", a.q, head4, 0, a.lse, 0, 4 * a.mlp_t, norms_full_b, 2 * a.norm_eager + a.qk_eager, dy};
  // backward
  m[5] = {"backward.mlp", a.q, head4, 0, a.lse, 0, 6 * a.mlp_t, norms_full_b, 2 * a.norm_eager + a.qk_eager,
          2 * dy /*dy, d(norm2 out)*/};
  m[6] = {"backward.attn", 0, head4, 0, a.lse, a.fa_ws, 0, norms_attn_b, a.norm_eager + a.qk_eager,
          a.q /*d_out head*/ + a.q + 2 * a.kvh /*dq, dk, dv head*/ + dy};
  m[7] = {"backward.a2a_qkv", 0, 0, 2 * a.q, 0, 0, 0, norms_attn_b, a.norm_eager + a.qk_eager,
          (a.q + 2 * a.kvh) /*head grads*/ + (a.q + 2 * a.kvs + 2 * a.kvr) /*seq grads*/ + dy};
  // eager RMSNorm backward of norm2 (after the MLP backward; docs/MODEL.md "RMSNorm backward"):
  // the attention's saved set, norm1's output and both norms' saved sets, the residual gradient and
  // the norm's incoming gradient; inside PowBackward0 five fp32 [T, h] tensors (2 th each) are live
  // at once while the norm's bf16 x_normed and its incoming gradient are already freed: + 8 th.
  m[8] = a.eager ? Moment{"backward.norm", a.q, head4, 0, a.lse, 0, 0, a.x_keep + a.out_held + a.th /*norm1 out*/ + a.rstd,
                          2 * a.norm_eager + a.qk_eager + 8 * a.th, 2 * dy}
                 : Moment{"backward.norm", 0, 0, 0, 0, 0, 0, 0, 0, 0};
}

// The live set when a bucket flush starts, by where its gradient arrives (sim/reduce_flush.hpp):
// in the MLP backward the down projection's weight gradient arrives with gate, up and act saved
// and d(product) live (4 intermediates; TiledMLP: its backward as it is); before the attention
// backward (o_proj, post-attention norm) the attention's saved set, the gradient of the o_proj
// input and the residual gradient; after it (q/k norms, q, k, v) the seq-layout gradients of q, k
// and v that the projections' backward consumes, the exchange's buffers and head-layout gradients
// released; between layers only the residual gradient (and the layer input when kept on the GPU).
Moment flush_moment(const Act& a, const Moment* m, FlushAt at, bool tiled_mlp) {
  const double head4 = a.q + 2 * a.kvh + a.q;
  const double norms_attn = a.x_keep + a.out_held + a.th + a.rstd / 2;
  const double dy = a.th;
  switch (at) {
    case FlushAt::mlp: {
      Moment x = m[5];
      if (!tiled_mlp) x.mlp = 4 * a.mlp_t;
      x.name = "backward.mlp+reduce";
      return x;
    }
    case FlushAt::attn:
      return {"backward.attn+reduce", a.q, head4, 0, a.lse, 0, 0, norms_attn, a.norm_eager + a.qk_eager, dy};
    case FlushAt::qkv:
      return {"backward.qkv+reduce", 0, 0, 0, 0, 0, 0, norms_attn, a.norm_eager + a.qk_eager,
              a.q + 2 * a.kvs + 2 * a.kvr + dy};
    case FlushAt::between:
      break;
  }
  return {"backward.reduce", 0, 0, 0, 0, 0, 0, a.x_keep, 0, dy};
}

}  // namespace

std::int64_t lcm64(std::int64_t a, std::int64_t b) { return a / std::gcd(a, b) * b; }

std::int64_t padded_seq_len(std::int64_t S, std::int64_t pad_to_multiple_of, std::int64_t P) {
  if (pad_to_multiple_of <= 0) return S;
  const std::int64_t m = lcm64(pad_to_multiple_of, P);
  return ceil_div(S, m) * m;
}

std::vector<std::int64_t> torch_chunk_sizes(std::int64_t n, std::int64_t chunks) {
  const std::int64_t size = (n + chunks - 1) / chunks;
  std::vector<std::int64_t> v;
  for (std::int64_t at = 0; at < n; at += size) v.push_back(std::min(size, n - at));
  return v;
}

// The process's own: PyTorch (calibrated.pytorch_*) or our runtime (calibrated.cuda_context/nccl_buffer);
// the profile's assumption when that runtime is not calibrated.
core::bytes_t process_context_bytes(const Scenario& sc) {
  const Calibration& cal = sc.hw.calibrated;
  const core::bytes_t c = sc.plan.runtime == Runtime::pytorch ? cal.pytorch_context_bytes : cal.cuda_context_bytes;
  return sc.hw.has_calibration && c > 0 ? c : sc.hw.cuda_context_bytes;
}
core::bytes_t process_nccl_bytes(const Scenario& sc, const Dims& d) {
  const Calibration& cal = sc.hw.calibrated;
  const core::bytes_t n = sc.plan.runtime == Runtime::pytorch ? cal.pytorch_nccl_buffer_bytes : cal.nccl_buffer_bytes;
  return d.gpus <= 1 ? 0 : sc.hw.has_calibration && n > 0 ? n : sc.hw.nccl_buffer_bytes;
}

Dims derive_dims(const Scenario& sc) {
  const ModelSpec& mo = sc.model;
  const Plan& pl = sc.plan;
  Dims d;
  d.B = pl.micro_batch_size;
  d.P = pl.sp_size;
  d.S_req = pl.seq_len;
  d.S = padded_seq_len(pl.seq_len, pl.pad_to_multiple_of, d.P);
  d.S_l = d.S / d.P;
  d.H = mo.heads;
  d.H_kv = mo.kv_heads;
  d.D = mo.head_dim;
  d.h = mo.hidden;
  d.F = mo.ffn_hidden;
  d.V = mo.vocab;
  d.L = mo.layers;
  d.H_l = d.H / d.P;
  d.kv_wire = std::max(d.H_kv, d.P);
  d.kv_local = d.kv_wire / d.P;
  d.kv_replica = d.P > d.H_kv && pl.kv_strategy == KvStrategy::replicate;
  d.zero_group = pl.dp_shard_size * pl.sp_size;
  d.dp_replicate = pl.dp_replicate_size;
  d.gpus = sc.gpus;
  d.gpus_per_node = resolved_gpus_per_node(sc);
  if (d.gpus_per_node < 1) d.gpus_per_node = 1;
  d.gpus_on_node = std::min(d.gpus, d.gpus_per_node);
  d.ckpt = pl.activation_checkpointing;
  d.rmsnorm_eager = pl.rmsnorm_implementation == RmsNormImpl::eager;
  d.causal = sc.workload.causal;
  d.mlp_shards = pl.tiled_mlp ? std::max<std::int64_t>(1, ceil_div(d.S_l, d.h)) : 1;
  const double logits_fp32 = static_cast<double>(d.B) * static_cast<double>(d.S_l) * d.V * 4;
  d.logits_shards = pl.tiled_logits ? std::max<std::int64_t>(1, static_cast<std::int64_t>(ceil_div_d(logits_fp32, kLogitsTileBytes))) : 1;
  d.params = count_params(mo);
  d.total_params = d.params.total(d.L);
  return d;
}

core::bytes_t q_bytes_per_rank(const Dims& d) { return sat(static_cast<double>(d.B) * d.S_l * d.H * d.D * 2); }
core::bytes_t kv_bytes_per_rank(const Dims& d) { return sat(static_cast<double>(d.B) * d.S_l * d.kv_wire * d.D * 2); }

constexpr double kLossBytesPerLogit = 12;

core::bytes_t logits_loss_bytes(const Dims& d) {
  const double tok = static_cast<double>(d.B) * static_cast<double>(d.S_l);
  const double th = tok * d.h * 2;
  // torch.chunk over the B*S_l tokens: the largest shard has ceil(tokens / shards) tokens
  const double logits_elems = std::ceil(tok / static_cast<double>(d.logits_shards)) * d.V;
  // final norm in, out, grad of hidden; eager: fp32 in (2 th) + bf16 normalized (th), no bf16 in
  const double final_norm = d.rmsnorm_eager ? 5 * th : 3 * th;
  // cross_entropy(logits.float()) per logit: forward bf16 2 + fp32 copy 4 + log_softmax out 4 = 10;
  // backward (the peak): saved log_softmax out 4 + nll_loss grad 4 + log_softmax grad 4 = 12
  // (docs/MODEL.md "logits_loss"; measured 10.0 and 12.0 B/logit, docs/VALIDATION.md "Whole steps")
  return sat(kLossBytesPerLogit * logits_elems + final_norm);
}

core::bytes_t gpu_capacity_bytes(const Scenario& sc) { return sc.hw.hbm_bytes; }
core::bytes_t host_capacity_bytes(const Scenario& sc) { return resolved_host_ram_bytes(sc); }

const char* gpu_memory(const Scenario& sc, const Dims& d, const ModelTerms& mt, MemoryBreakdown& gpu) {
  const Plan& pl = sc.plan;
  const double Pn = static_cast<double>(d.total_params);
  const double N = static_cast<double>(d.zero_group);
  const int stage = pl.zero_stage;
  // --- model states: 2 (bf16 weights) + grads + 12 (fp32 master + Adam m, v) B/param; ZeRO-3 keeps
  // its gradient partitions in the model dtype (bf16, 2 B; docs/MODEL.md "Model states"), stages 0-2
  // are counted at 4 B (fp32; not measured)
  const double shard = std::ceil(Pn / N);  // DeepSpeed pads the flat partition to equal sizes
  double weights = stage >= 3 ? 2 * shard : 2 * Pn;
  double grads = stage >= 3 ? 2 * shard : stage >= 2 ? 4 * shard : 4 * Pn;
  double optim = stage >= 1 ? 12 * shard : 12 * Pn;
  if (pl.offload_optimizer) grads = optim = 0;  // fp32 grads, master and moments live on host
  if (pl.offload_params && stage >= 3) weights = 0;
  // --- DeepSpeed's gradient bucket (stage3.py 782: one buffer of reduce_bucket_size elements in the
  // communication dtype: fp32 at sp > 1, constants.py 236; else bf16); what a flush adds: sim/reduce_flush
  const double grad_reduce = d.P > 1 ? pl.reduce_bucket_size * 4 : pl.reduce_bucket_size * 2;
  // --- checkpoints / saved activations
  const Act a = activations(sc, d);
  const double checkpoints = d.ckpt && !pl.offload_checkpoints ? static_cast<double>(d.L) * a.th : 0;
  const double saved = d.ckpt ? 0 : saved_per_layer(a, pl.tiled_mlp);
  // --- ZeRO-3 gathered parameters (bf16) + the bf16 gradients not yet in the reduce bucket. With one
  // partition (N = 1) and the parameters on the GPU a gather allocates nothing: the parameter's data
  // becomes its partition (docs/MODEL.md "ZeRO-3 gathers"); offloaded parameters are copied in.
  // A gradient that fits the bucket is moved into it as its hook runs (contiguous_gradients): only one
  // larger than reduce_bucket_size keeps its own tensor until the next arrival flushes it; the tiled
  // loss accumulates the lm_head's over its tiles; the untiled loss computes it only after the
  // cross-entropy's backward, when 2 of the 12 B/logit are left (docs/MODEL.md "zero3_gathered_params").
  const double layer_p = static_cast<double>(d.params.per_layer());
  const double head_p = static_cast<double>(d.params.lm_head > 0 ? d.params.lm_head : d.params.embedding);
  const double gather = d.zero_group > 1 || pl.offload_params ? 1 : 0;
  const double layer_grad = mt.layer_grad;  // the largest layer gradient held outside the bucket
  const double head_grad = pl.tiled_logits || head_p > pl.reduce_bucket_size ? head_p : 0;
  const double logits_elems = static_cast<double>(d.B) * static_cast<double>(d.S_l) * static_cast<double>(d.V);
  const double head_grad_live = pl.tiled_logits ? 2 * head_grad : std::max(0.0, 2 * head_grad - (kLossBytesPerLogit - 2) * logits_elems);
  const double gathered_layer = stage >= 3 ? gather * kZero3LiveLayers * layer_p * 2 + 2 * layer_grad : 0;
  const double gathered_logits = stage >= 3 ? gather * (head_p + layer_p) * 2 + head_grad_live : 0;

  // --- the peak of one layer: max over moments, and over the moments at which a ZeRO-3 gradient
  // bucket flush holds its epilogue (docs/MODEL.md "Reduce epilogue")
  Moment m[kMoments + kFlushPlaces];
  layer_moments(a, m);
  int n_moments = kMoments;
  if (stage >= 3) {
    const ReduceFlushes& f = mt.flushes;
    for (int at = 0; at < kFlushPlaces; ++at) {
      if (f.epilogue_bytes[at] <= 0) continue;
      Moment x = flush_moment(a, m, static_cast<FlushAt>(at), pl.tiled_mlp);
      x.reduce = f.epilogue_bytes[at];
      m[n_moments++] = x;
    }
  }
  double totals[kMoments + kFlushPlaces];
  for (int i = 0; i < n_moments; ++i) totals[i] = m[i].total();
  int best = 0;
  for (int i = 1; i < n_moments; ++i)
    if (totals[i] > totals[best]) best = i;
  const double layer_total = totals[best] + gathered_layer + (d.ckpt ? 0 : (d.L - 1) * saved);

  // --- logits + loss moment (end of forward / start of backward)
  const double logits = static_cast<double>(logits_loss_bytes(d));
  const double logits_total = logits + gathered_logits + (d.ckpt ? 0 : d.L * saved);

  // --- the optimizer step on the GPU (ZeRO-3): DeepSpeed builds the fp32 gradient of one sub-group
  // (4 B/param; largest_sub_group), torch's foreach AdamW adds one fp32 temporary of the same size
  // (sqrt of exp_avg_sq); FusedAdam none. Activations are freed by then.
  const double optimizer_step =
      stage >= 3 && !pl.offload_optimizer ? (pl.torch_adam ? 8 : 4) * mt.largest_sub_group : 0;

  const bool at_optimizer = optimizer_step > std::max(layer_total, logits_total);
  const bool at_logits = !at_optimizer && logits_total > layer_total;
  const Moment zero{"", 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const Moment& lm = at_logits || at_optimizer ? zero : m[best];

  // --- fixed costs
  const core::bytes_t ctx = process_context_bytes(sc), nccl = process_nccl_bytes(sc, d);

  const double gathered = at_optimizer ? 0 : at_logits ? gathered_logits : gathered_layer;
  const double ckpt_live = at_optimizer ? 0 : checkpoints;
  const double saved_all = d.ckpt || at_optimizer ? 0 : (at_logits ? d.L : d.L - 1) * saved;
  const double logits_term = at_logits ? logits : 0;
  const double optimizer_term = at_optimizer ? optimizer_step : 0;
  // fragmentation: where PyTorch maps expandable segments, free granules are unmapped before an
  // allocation fails, and what binds is what is allocated plus the granules live blocks only partly
  // cover; else a stated fraction of everything allocated and freed during the step (docs/MODEL.md
  // "Fixed costs and fragmentation")
  const bool expandable = pl.runtime == Runtime::pytorch && pl.expandable_segments;
  const double transient = gathered + ckpt_live + saved_all + lm.total() + logits_term + optimizer_term;

  gpu.n = 0;
  gpu.add("weights", sat(weights));
  gpu.add("grads", sat(grads));
  gpu.add("optimizer_states", sat(optim));
  gpu.add("zero3_gathered_params", sat(gathered));
  gpu.add("grad_reduce_buffers", sat(grad_reduce + lm.reduce));
  gpu.add("checkpoints", sat(ckpt_live));
  gpu.add("saved_activations", sat(saved_all));
  gpu.add("layer.qkvo_seq", sat(lm.qkvo_seq));
  gpu.add("layer.qkvo_head", sat(lm.qkvo_head));
  gpu.add("layer.a2a_buffers", sat(lm.a2a));
  gpu.add("layer.attn_stats", sat(lm.stats));
  gpu.add("layer.attn_workspace", sat(lm.ws));
  gpu.add("layer.mlp", sat(lm.mlp));
  gpu.add("layer.norms_residuals", sat(lm.norms));
  gpu.add("layer.rmsnorm_eager", sat(lm.norm_eager));
  gpu.add("layer.grads_in_flight", sat(lm.grads));
  gpu.add("logits_loss", sat(logits_term));
  gpu.add("optimizer_step", sat(optimizer_term));
  gpu.add("cuda_context", ctx);
  gpu.add("nccl_buffers", nccl);
  gpu.add("fragmentation", expandable ? kExpandableGranuleSlackBytes : sat(kFragmentationFraction * transient));
  return at_optimizer ? "optimizer_step" : at_logits ? "logits_loss" : m[best].name;
}

void host_memory(const Scenario& sc, const Dims& d, MemoryBreakdown& host) {
  const Plan& pl = sc.plan;
  const double g = static_cast<double>(d.gpus_on_node);
  const double shard = std::ceil(static_cast<double>(d.total_params) / static_cast<double>(d.zero_group));
  const double per_gpu_shard = pl.zero_stage >= 1 ? shard : static_cast<double>(d.total_params);
  const double th = static_cast<double>(d.B) * static_cast<double>(d.S_l) * d.h * 2;
  host.n = 0;
  host.add("optimizer_states", sat(pl.offload_optimizer ? 12 * per_gpu_shard * g : 0));
  host.add("grads", sat(pl.offload_optimizer ? 4 * per_gpu_shard * g : 0));
  host.add("params", sat(pl.offload_params && pl.zero_stage >= 3 ? 2 * shard * g : 0));
  host.add("checkpoints", sat(d.ckpt && pl.offload_checkpoints ? static_cast<double>(d.L) * th * g : 0));
  // pinned staging for the gradient copies to host: one fp32 reduce bucket per GPU process
  host.add("pinned_staging", sat(pl.offload_optimizer ? pl.reduce_bucket_size * 4 * g : 0));
  host.add("process_overhead", sat(static_cast<double>(kHostProcessOverheadBytes) * g));
}

core::bytes_t block_peak_bytes(const Scenario& sc, const Dims& d) {
  // The CUDA backend's BlockRunner (runtime/cuda/block_runner.cpp) allocates every buffer of
  // the block once, up front; its arena peak is their sum (docs/MODEL.md "Block peak").
  const double tok = static_cast<double>(d.B) * static_cast<double>(d.S_l);
  const double q = tok * d.H * d.D * 2, kvs = tok * d.H_kv * d.D * 2;
  const double kvr = d.kv_replica ? tok * d.P * d.D * 2 : 0, kvh = tok * d.kv_wire * d.D * 2;
  const double seq = 4 * q /*q, o, dout, dq*/ + 4 * kvs /*k, v, dk, dv*/ + 4 * kvr /*k, v replicas and grads*/;
  const double head = 4 * q /*q, o, dout, dq*/ + 4 * kvh /*k, v, dk, dv*/;
  const double lse = static_cast<double>(d.B) * d.H_l * static_cast<double>(d.S) * 4;
  // attention backward workspace: the reference kernel keeps delta [B, H_l, S] fp32; the flash
  // kernel fp32 dq_accum [B, S, H_l, D] plus lse2 and delta [B, H_l, S padded to 128], each
  // allocation rounded up to 256 bytes. The runner sizes it for the larger unless the reference
  // kernel is chosen (core/attn_impls.hpp: ulysses_reference, reference, eager).
  auto r256 = [](double b) { return std::ceil(b / 256) * 256; };
  const double S_pad = std::ceil(static_cast<double>(d.S) / 128) * 128;
  const double ws_ref = lse;
  const double ws_flash = r256(tok * d.H * d.D * 4) + 2 * r256(static_cast<double>(d.B) * d.H_l * S_pad * 4);
  const std::string& impl = sc.plan.attn_implementation;
  const core::AttnImpl* kernel = core::find_attn_impl(impl);
  const bool reference = kernel && kernel->kernel == core::AttnKernel::reference;
  const double ws = reference ? ws_ref : std::max(ws_ref, ws_flash);
  // exchanger: one send and one receive buffer for the largest group (q, k, v together)
  const double exchange = d.P > 1 ? 2 * (q + 2 * kvh) : 0;
  const double scalars = 4 /*barrier fp32*/ + 8 /*counter u64*/;
  return sat(seq + head + lse + ws + exchange + scalars);
}

}  // namespace ulysses
