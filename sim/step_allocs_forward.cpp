// The PyTorch runtime's allocations in order (sim/step_allocs.hpp): a step's forward and the loss. Each
// block names the source lines (transformers 5.17, DeepSpeed 0.19.8) of the allocations it emits, as the
// recorded frames show them.
#include <algorithm>

#include "core/bf16.hpp"
#include "sim/step_allocs.hpp"

namespace ulysses {

// Eager RMSNorm (transformers 5.17 modeling_llama.py 62-67; Qwen3RMSNorm is the same code). Without
// autograd (a checkpointed layer's first pass) every temporary goes as its name is rebound; with it
// (the recompute, the final norm) the fp32 input, the rsqrt and the normalized bf16 tensor stay.
TrainingAllocs::Norm TrainingAllocs::rmsnorm(std::int64_t rows, std::int64_t cols, bool saved) {
  const std::int64_t x = rows * cols * kBf16, r = rows * kFp32;  // r: one fp32 per normalized row
  Norm n;
  n.f32 = alloc(2 * x);  // 64 .to(float32)
  Id sq = alloc(2 * x);  // 65 pow(2)
  Id var = alloc(r);     // 65 .mean(-1, keepdim=True)
  free(sq);
  Id ve = alloc(r);      // 66 variance + eps
  n.rs = alloc(r);       // 66 rsqrt
  free(ve);
  Id xr = alloc(2 * x);  // 66 x * rsqrt(...)
  if (!saved) free(n.rs), free(n.f32);
  n.t = alloc(x);        // 67 .to(input_dtype)
  n.out = alloc(x);      // 67 weight * ...
  if (!saved) free(n.t);
  free(xr);
  free(var);
  return n;
}

// apply_rotary_pos_emb on q or k (modeling_llama.py 158 / 159, rotate_half 131-134): x * cos, -x2, the
// cat, its * sin, the sum.
TrainingAllocs::Id TrainingAllocs::rope(std::int64_t x) {
  Id xc = alloc(x);
  Id neg = alloc(x / 2);
  Id cat = alloc(x);
  free(neg);
  Id xs = alloc(x);
  free(cat);
  const Id out = alloc(x);
  free(xc);
  free(xs);
  return out;
}

// The attention module (LlamaAttention / Qwen3Attention forward): q, k, v projections (Qwen3: each of q
// and k through its head-dim RMSNorm, the projection released after it), RoPE on q and k, sdpa's
// output, o_proj; then the module's tensors and the normed input are released.
TrainingAllocs::Id TrainingAllocs::attention(Id& normed) {
  const auto project = [&](std::int64_t bytes) {
    Id p = alloc(bytes);  // deepspeed/runtime/zero/linear.py 92
    if (!sc_.model.qk_norm) return p;
    const Id n = rmsnorm(bytes / (d_.D * kBf16), d_.D, false).out;
    free(p);
    return n;
  };
  Id q = project(q_);
  Id k = project(kv_);
  Id v = alloc(kv_);
  Id qe = rope(q_);
  Id ke = rope(kv_);
  free(q);
  free(k);
  Id o = alloc(q_);               // integrations/sdpa_attention.py 158
  const Id out = alloc(th_);      // o_proj
  free(o);
  free(qe);
  free(ke);
  free(v);
  free(normed);
  return out;
}

// The MLP without autograd (modeling_llama.py 175: down(act(gate(x)) * up(x))): its output. TiledMLP
// (ulysses_sp.py TiledMLP.forward) runs it per torch.chunk shard of the tokens and concatenates the
// shards' outputs (1019).
TrainingAllocs::Id TrainingAllocs::mlp_forward() {
  std::vector<Id> downs;
  for (const std::int64_t n : torch_chunk_sizes(d_.B * d_.S_l, d_.mlp_shards)) {
    Id gate = alloc(n * d_.F * kBf16);
    Id act = alloc(n * d_.F * kBf16);
    free(gate);
    Id up = alloc(n * d_.F * kBf16);
    Id prod = alloc(n * d_.F * kBf16);
    free(act);
    free(up);
    downs.push_back(alloc(n * d_.h * kBf16));
    free(prod);
  }
  if (!sc_.plan.tiled_mlp) return downs.front();
  const Id out = alloc(th_);
  for (Id& id : downs) free(id);
  return out;
}

// One decoder layer in the checkpointed first pass (modeling_llama.py 300-324): nothing is saved, every
// tensor is released when nothing refers to it (the layer's input stays: the checkpoint keeps it).
TrainingAllocs::Id TrainingAllocs::layer() {
  const std::int64_t th = th_;
  Id n1 = rmsnorm(d_.B * d_.S_l, d_.h, false).out;
  Id att = attention(n1);
  Id h1 = alloc(th);  // 317 residual + hidden_states
  free(att);
  Id n2 = rmsnorm(d_.B * d_.S_l, d_.h, false).out;
  Id down = mlp_forward();
  free(n2);
  const Id out = alloc(th);  // 323 residual + hidden_states
  free(down);
  free(h1);
  return out;
}

void TrainingAllocs::forward(bool first_step) {
  if (!step_covered()) return;
  const Dims& d = d_;
  const std::int64_t T = d.B * d.S_l, th = th_;
  // the previous step's loss input and rotary tables, released when the step's names are rebound
  free(final_hidden_);
  free(cos_);
  free(sin_);
  ckpt_.assign(static_cast<std::size_t>(d.L), -1);
  ckpt_[0] = alloc(th);  // the embedding's output (torch/nn/functional.py 2567): layer 0's checkpoint
  // the rotary embedding (modeling_llama.py 122-125): freqs [B, D/2, T] fp32, the first matmul's cuBLAS
  // workspace, emb = cat(freqs, freqs) fp32, cos and sin and their * attention_scaling, the bf16 copies
  // the layers use (kept: the checkpoints recompute with them)
  Id freqs = alloc(T * (d.D / 2) * kFp32);
  if (first_step) alloc(kCublasWorkspaceBytes);
  Id emb = alloc(T * d.D * kFp32);
  Id c0 = alloc(T * d.D * kFp32);
  Id c1 = alloc(T * d.D * kFp32);
  free(c0);
  Id s0 = alloc(T * d.D * kFp32);
  Id s1 = alloc(T * d.D * kFp32);
  free(s0);
  cos_ = alloc(T * d.D * kBf16);
  sin_ = alloc(T * d.D * kBf16);
  free(freqs);
  free(emb);
  free(c1);
  free(s1);
  // An offloaded checkpoint (runtime/deepspeed/ulysses_worker/offload.py) keeps only its host copy: a
  // layer's input goes once the layer has run, after the copy stream's copy (record_stream); the
  // embedding's output once the model's forward returns (its inputs_embeds name holds it).
  const bool off = sc_.plan.offload_checkpoints;
  Id x = ckpt_[0];
  for (std::int64_t l = 0; l < d.L; ++l) {
    Id in = x;
    x = layer();
    if (off && l > 0) {
      if (l + 1 == d.L) free_after_copy(in);  // freed as the forward ends, behind the last copy
      else free_later(in);
    }
    if (!off && l + 1 < d.L) ckpt_[static_cast<std::size_t>(l + 1)] = x;  // the next layer's checkpoint
  }
  // the final norm, with autograd (outside the checkpoints): the fp32 input and the bf16 normalized
  // tensor are saved; the last layer's output is released once the norm has returned
  final_norm_ = rmsnorm(T, d.h, true);
  final_hidden_ = final_norm_.out;
  final_norm_.out = -1;
  free(x);
  if (off) free_after_copy(ckpt_[0]);
}

// cross_entropy's backward over n tokens: nll's and log_softmax's fp32 gradients (log_softmax's saved
// output released), the bf16 one, then the lm_head's input and weight gradients; the process's first
// backward GEMM allocates autograd's thread's cuBLAS workspace. Returns (input grad, weight grad).
std::pair<TrainingAllocs::Id, TrainingAllocs::Id> TrainingAllocs::loss_backward(std::int64_t n, Id& log_probs,
                                                                                bool first_gemm) {
  Id g_nll = alloc(n * d_.V * kFp32);
  Id g_logp = alloc(n * d_.V * kFp32);
  free(g_nll);
  free(log_probs);
  Id g_bf16 = alloc(n * d_.V * kBf16);
  free(g_logp);
  const Id g_in = alloc(n * d_.h * kBf16);
  if (first_gemm) alloc(kCublasWorkspaceBytes);
  const Id g_w = alloc(d_.V * d_.h * kBf16);
  free(g_bf16);
  return {g_in, g_w};
}

void TrainingAllocs::loss(bool first_step) {
  if (!step_covered()) return;
  const Dims& d = d_;
  const std::int64_t T = d.B * d.S_l;
  if (!sc_.plan.tiled_logits) {
    // runtime/deepspeed/ulysses_worker/features.py 57-58: lm_head(hidden) bf16, .float(), log_softmax
    // (saved); the fp32 copy and the bf16 logits released once cross_entropy has them
    Id logits = alloc(T * d.V * kBf16);
    Id f32 = alloc(T * d.V * kFp32);
    log_probs_ = alloc(T * d.V * kFp32);
    free(f32);
    free(logits);
    return;
  }
  // TiledFusedLogitsLoss.forward (deepspeed/runtime/sequence_parallel/ulysses_sp.py 1173-1210): x_grad =
  // zeros_like(x), then torch.chunk of the tokens into d.logits_shards shards (the chunk size rounded up,
  // so possibly fewer), each shard's forward (features.py 51-52: lm_head, .float(), cross_entropy) and
  // its backward at once: nll's and log_softmax's fp32 gradients, the bf16 one, the lm_head's input
  // gradient (added into x_grad) and weight gradient (the first shard's becomes the parameter's .grad,
  // the others are added to it). The first backward GEMM of the process allocates the autograd
  // thread's own cuBLAS workspace.
  x_grad_ = alloc(th_);
  const std::vector<std::int64_t> shards = torch_chunk_sizes(T, d.logits_shards);
  // offloaded checkpoints freed at the forward's end complete once their copy has (free_after_copy)
  const std::int64_t release_at = ckpt_held_.empty() ? -1 : ckpt_release_tile();
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const std::int64_t n = shards[k];
    const bool first = k == 0, last = k + 1 == shards.size();
    if (static_cast<std::int64_t>(k) == release_at) {
      for (Id id : ckpt_held_) complete(id);
      ckpt_held_.clear();
    }
    Id logits = alloc(n * d.V * kBf16);
    Id f32 = alloc(n * d.V * kFp32);
    free(logits);
    Id logp = alloc(n * d.V * kFp32);
    free(f32);
    auto [g_in, g_w] = loss_backward(n, logp, first_step && first);
    if (first) {
      head_grad_ = g_w;
    } else {
      free(g_w);
    }
    if (!last) overflow_check(double(d.V) * double(d.h));  // DeepSpeed's hook, not ready yet
    free(g_in);
  }
  // a copy longer than the tiles: complete at the next allocation, as the other deferred frees
  for (Id& id : ckpt_held_) deferred_.push_back(id);
  ckpt_held_.clear();
  // DeepSpeed's hook takes the lm_head's gradient once, at the last tile (ds_grad_is_ready)
  arrive(head_id(), double(d.V) * double(d.h), head_grad_);
}

}  // namespace ulysses
