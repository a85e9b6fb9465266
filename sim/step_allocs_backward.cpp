// The PyTorch runtime's allocations in order (sim/step_allocs.hpp): the backward (the loss's, the final
// norm's, per checkpointed layer the recompute and the gradients, the embedding's), DeepSpeed's gradient
// bucket on the reduce stream, and the optimizer step. Autograd's C++ temporaries carry no Python
// frames: their order is the recorded one (records/validation/alloc-traces), their sizes the ops' own
// (docs/MODEL.md "Reserved memory").
#include <algorithm>

#include "core/bf16.hpp"
#include "sim/model.hpp"
#include "sim/model_terms.hpp"
#include "sim/reduce_flush.hpp"
#include "sim/step_allocs.hpp"
#include "sim/torch_scratch.hpp"

namespace ulysses {
namespace {
constexpr int kReduceStream = 1;  // DeepSpeed's reduce_and_partition_stream
}  // namespace

// The non-reentrant checkpoint's recompute of one decoder layer (torch/utils/checkpoint.py): the
// forward again with autograd saving, stopped once the last saved tensor exists (the down projection
// runs, its output and the residual are dropped). An offloaded checkpoint runs the whole layer.
TrainingAllocs::Recomputed TrainingAllocs::recompute() {
  Recomputed r;
  const std::int64_t T = d_.B * d_.S_l;
  r.n1 = rmsnorm(T, d_.h, true);
  const auto project = [&](std::int64_t heads, Norm& hn) {
    Id p = alloc(T * heads * d_.D * kBf16);  // zero/linear.py 92
    if (!sc_.model.qk_norm) return p;
    hn = rmsnorm(T * heads, d_.D, true);
    free(p);
    return hn.out;
  };
  Id q = project(d_.H, r.qn);
  Id k = project(d_.H_kv, r.kn);
  r.v = alloc(kv_);
  r.qe = rope(q_);
  r.ke = rope(kv_);
  free(q);  // RoPE saves nothing of its input (cos and sin need no gradient)
  free(k);
  r.o = alloc(q_);            // sdpa's output (cuDNN: empty_like(q))
  r.lse = alloc(d_.B * d_.S_l * d_.H * kFp32);  // its logsumexp [B, H, T] fp32, saved
  Id op = alloc(th_);         // o_proj
  Id h1 = alloc(th_);         // 317 residual
  free(op);
  r.n2 = rmsnorm(T, d_.h, true);
  if (sc_.plan.tiled_mlp) {  // TiledMLP runs whole (without autograd inside) and saves its input
    Id out = mlp_forward();
    // the offloaded checkpoint's recompute runs the whole layer (runtime/deepspeed/ulysses_worker/
    // offload.py: ctx.run(x), then autograd.backward(out, grad)): the residual too, its output kept
    if (sc_.plan.offload_checkpoints) r.out = alloc(th_);
    free(out);
    free(h1);
    return r;
  }
  r.gate = alloc(mlp_);
  r.act = alloc(mlp_);
  r.up = alloc(mlp_);
  r.prod = alloc(mlp_);
  Id down = alloc(th_);
  free(down);
  free(h1);
  return r;
}

// Autograd through eager RMSNorm (weight * t, t = (x * rsqrt(mean(x^2) + eps)).to(bf16), x = input.to(fp32)),
// as the recordings order it: the weight's gradient reduced over the rows (torch's reduction scratch,
// sim/torch_scratch.hpp), then the fp32 chain back to the input's gradient. The non-reentrant
// checkpoint releases a saved tensor when the backward unpacks it (`t` before the reduction); a plain
// graph after the node has run (`t_late`: the final norm, an offloaded checkpoint's layer).
TrainingAllocs::Id TrainingAllocs::rmsnorm_backward(Id& g, Norm& n, std::int64_t rows, std::int64_t cols,
                                                    bool t_late, Id* input) {
  const std::int64_t x = rows * cols * kBf16;
  Id p = alloc(x);
  Id q = alloc(x);
  if (!t_late) free(n.t);
  Id red = alloc(reduction_scratch_bytes(rows, cols, kFp32));
  free(red);
  Id none = -1;
  // the weight's gradient reaches DeepSpeed's hook (its place in a flush's order does not matter: a norm's
  // epilogue is below the generated size)
  arrive(-1, double(cols), none);
  free(q);
  free(g);
  if (t_late) free(n.t);
  Id s = alloc(2 * x);
  free(p);
  Id u = alloc(2 * x);
  Id w = alloc(2 * x);
  // the rows' fp32 temporaries (rsqrt's and the mean's gradients; >= 16 MiB only for per-head norms
  // at long sequences), released with the saved rsqrt
  const std::int64_t rb = rows * kFp32;
  Id r1 = alloc(rb);
  free(u);
  free(s);
  Id r2 = alloc(rb), r3 = alloc(rb), r4 = alloc(rb);
  free(r3);
  free(r2);
  free(r1);
  free(n.rs);
  Id x1 = alloc(2 * x);
  free(r4);
  Id x2 = alloc(2 * x), x3 = alloc(2 * x), x4 = alloc(2 * x);
  free(x3);
  free(x2);
  free(n.f32);
  free(x1);
  if (input) free(*input);
  free(x4);
  const Id out = alloc(x);
  free(w);
  return out;
}

// Autograd through apply_rotary_pos_emb (x * cos + rotate_half(x) * sin) for one of q, k: the input's
// gradient.
TrainingAllocs::Id TrainingAllocs::rope_backward(Id& g, std::int64_t x) {
  Id a = alloc(x);
  Id half = alloc(x / 2);
  const Id out = alloc(x);
  free(half);
  Id b = alloc(x);
  free(a);
  free(b);
  Id c = alloc(x);
  free(g);
  free(c);
  return out;
}

void TrainingAllocs::layer_backward(std::int64_t l) {
  const Dims& d = d_;
  const std::int64_t T = d.B * d.S_l;
  const double h = double(d.h), hd = double(d.H) * double(d.D), kvd = double(d.H_kv) * double(d.D);
  const bool off = sc_.plan.offload_checkpoints;
  Id& input = ckpt_[static_cast<std::size_t>(l)];
  if (off) input = alloc(th_);  // offload.py: the pinned host copy back to the GPU
  layer_ = l;
  Recomputed r = recompute();
  const auto weight_grad = [&](double numel, LayerParamRole role) {
    Id w = alloc(static_cast<std::int64_t>(numel) * kBf16);  // zero/linear.py 129
    arrive(param_id(role), numel, w);
  };
  Id g_n2 = sc_.plan.tiled_mlp ? tiled_mlp_backward(r) : mlp_backward(r);
  // the post-attention norm: its input's gradient is added to the residual stream's
  Id y = rmsnorm_backward(g_n2, r.n2, T, d.h, off);
  // an offloaded layer's own graph: the residual's gradient is a new tensor (the incoming one belongs
  // to the outer graph), the norm's added into it
  Id h_grad = off ? alloc(th_) : -1;
  free(y);
  // o_proj (its output's gradient is the residual stream's), sdpa, RoPE on k and q
  Id g_o = alloc(q_);
  weight_grad(hd * h, LayerParamRole::o);
  Id dq = alloc(q_), dk = alloc(kv_), dv = alloc(kv_);
  Id ws = alloc(sdpa_backward_scratch_bytes(T, d.H, d.H_kv, d.D));
  free(ws);
  free(r.lse);
  free(r.o);
  free(r.v);
  free(r.qe);
  free(r.ke);
  free(g_o);
  Id gk = rope_backward(dk, kv_);
  Id gq = rope_backward(dq, q_);
  // v, k, q projections; with Qwen3's head norms k and q go through their norm's backward first; k's
  // and q's gradients are copied contiguous ([B, H, T, D] -> [B, T, H*D]) for the projection
  Id g_n1 = alloc(th_);
  weight_grad(kvd * h, LayerParamRole::v);
  free(dv);
  const auto qk = [&](Id& g, Norm& hn, std::int64_t heads, std::int64_t bytes, double w_numel, LayerParamRole role,
                      bool last) {
    if (sc_.model.qk_norm) {
      Id yh = rmsnorm_backward(g, hn, T * heads, d.D, off);
      g = yh;
    }
    Id c = alloc(bytes);
    free(g);
    Id gi = alloc(th_);
    weight_grad(w_numel, role);
    if (last) free(r.n1.out);
    free(c);
    free(gi);  // added into g_n1
  };
  qk(gk, r.kn, d.H_kv, kv_, kvd * h, LayerParamRole::k, false);
  qk(gq, r.qn, d.H, q_, hd * h, LayerParamRole::q, true);
  // the input norm; the layer's checkpoint goes with its last use
  y = rmsnorm_backward(g_n1, r.n1, T, d.h, off, off ? nullptr : &input);
  free(y);
  if (off) {  // the layer's input, its output and the outer graph's gradient go with the layer's backward
    free(input);
    free(r.out);
    free(hidden_grad_);
    hidden_grad_ = h_grad;
  }
}

// The MLP's backward (zero/linear.py 126 input, 129 weight): down, the SwiGLU product, up, SiLU, gate.
TrainingAllocs::Id TrainingAllocs::mlp_backward(Recomputed& r) {
  const double mlp_w = double(d_.F) * double(d_.h);
  const auto weight_grad = [&](LayerParamRole role) {
    Id w = alloc(static_cast<std::int64_t>(mlp_w) * kBf16);
    arrive(param_id(role), mlp_w, w);
  };
  Id g_prod = alloc(mlp_);
  weight_grad(LayerParamRole::down);
  free(r.prod);
  Id g_a = alloc(mlp_), g_b = alloc(mlp_);
  free(r.act);
  free(r.up);
  free(g_prod);
  Id g_n2 = alloc(th_);
  weight_grad(LayerParamRole::up);
  free(g_a);
  Id g_silu = alloc(mlp_);
  free(r.gate);
  free(g_b);
  Id g_gate_in = alloc(th_);
  weight_grad(LayerParamRole::gate);
  free(r.n2.out);
  free(g_silu);
  free(g_gate_in);  // added into g_n2
  return g_n2;
}

// TiledMLP.backward (ulysses_sp.py 1045-): the input's gradient buffer, then per shard the MLP again with
// autograd and its backward (the engine's temporaries: graph.py 869; the weights' gradients from
// zero/linear.py 134). The first shard's weight gradients become the parameters'; later shards' are
// added to them and released; DeepSpeed's hook takes each at the last shard (ds_grad_is_ready).
TrainingAllocs::Id TrainingAllocs::tiled_mlp_backward(Recomputed& r) {
  const double mlp_w = double(d_.F) * double(d_.h);
  const std::int64_t w_bytes = static_cast<std::int64_t>(mlp_w) * kBf16;
  Id x_grad = alloc(th_);
  Id w_down = -1, w_up = -1, w_gate = -1, prev_down = -1;
  const std::vector<std::int64_t> shards = torch_chunk_sizes(d_.B * d_.S_l, d_.mlp_shards);
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const std::int64_t m = shards[k] * d_.F * kBf16, x = shards[k] * d_.h * kBf16;
    const bool first = k == 0, last = k + 1 == shards.size();
    const auto weight_grad = [&](Id& kept, LayerParamRole role) {
      Id w = alloc(w_bytes);
      if (first) kept = w;
      else free(w);
      if (last) arrive(param_id(role), mlp_w, kept);
      else overflow_check(mlp_w);
    };
    Id gate = alloc(m), act = alloc(m), up = alloc(m), prod = alloc(m);
    Id down = alloc(x);
    free(prev_down);
    prev_down = down;
    Id g_prod = alloc(m);
    weight_grad(w_down, LayerParamRole::down);
    free(prod);
    Id g_a = alloc(m), g_b = alloc(m);
    free(g_prod);
    free(up);
    free(act);
    Id g_up_in = alloc(x);
    weight_grad(w_up, LayerParamRole::up);
    free(g_a);
    Id g_silu = alloc(m);
    free(g_b);
    free(gate);
    Id g_gate_in = alloc(x);
    weight_grad(w_gate, LayerParamRole::gate);
    free(g_silu);
    free(g_gate_in);
    free(g_up_in);  // both copied into x_grad's shard
  }
  free(r.n2.out);
  free(prev_down);
  return x_grad;
}

void TrainingAllocs::backward(bool first_step) {
  if (!step_covered()) return;
  const Dims& d = d_;
  const std::int64_t T = d.B * d.S_l;
  const double head = double(d.V) * double(d.h);
  const bool tied = sc_.model.tied_embeddings;
  Id g_final = x_grad_;
  x_grad_ = -1;
  Id tied_head_grad = -1;  // untiled with tied embeddings: autograd sums both uses before the hook
  if (!sc_.plan.tiled_logits) {
    auto [g_in, g_w] = loss_backward(T, log_probs_, first_step);
    g_final = g_in;
    if (tied) tied_head_grad = g_w;
    else arrive(head_id(), head, g_w);
  }
  // the final norm: its input's gradient starts the residual stream's
  hidden_grad_ = rmsnorm_backward(g_final, final_norm_, T, d.h, true);
  for (std::int64_t l = d.L - 1; l >= 0; --l) layer_backward(l);
  // the embedding (embedding_dense_backward): the weight's gradient, the partial-segment sums
  Id g_emb = alloc(static_cast<std::int64_t>(head) * kBf16);
  Id partials = alloc(embedding_backward_partials_bytes(T, d.h, d.V));
  free(partials);
  free(hidden_grad_);
  if (tied_head_grad >= 0) {
    free(g_emb);  // added into the lm_head's
    g_emb = tied_head_grad;
  }
  arrive(0, head, g_emb);  // the embedding is parameter 0; tied and tiled: the head's second arrival
  // the backward's epilogue flushes what the bucket holds
  flush();
  if (policy_ == DeferredFree::end_of_backward) release_deferred();
}

// stage3.py reduce_independent_p_g_buckets_and_remove_grads (1569-1590) and __add_grad_to_ipg_bucket
// (1614-1638): a gradient that would overflow a non-empty bucket flushes it first (also on the calls of
// a tiled computation's shards before the last, which do not add it: ds_grad_is_ready); one that fits is
// copied into the contiguous buffer on the reduce stream and its own tensor released (record_stream);
// one that does not fit stays the parameter's .grad until its flush.
void TrainingAllocs::overflow_check(double numel) {
  if (!bucket_.empty() && bucket_elems() + numel > sc_.plan.reduce_bucket_size) flush();
}

double TrainingAllocs::bucket_elems() const {
  double e = 0;
  for (const auto& p : bucket_) e += p.second;
  return e;
}

// The parameter's ds_id: its place in model.parameters() (sim/model.hpp parameter_numels): the embedding,
// per layer layer_params(), the final norm, an untied lm_head.
std::int64_t TrainingAllocs::param_id(LayerParamRole role) const {
  const LayerParams lp = layer_params(sc_.model);
  int i = 0;
  while (i < lp.n && lp.p[i].role != role) ++i;
  return 1 + layer_ * lp.n + i;
}

std::int64_t TrainingAllocs::head_id() const {
  return sc_.model.tied_embeddings ? 0 : 2 + d_.L * layer_params(sc_.model).n;
}

void TrainingAllocs::arrive(std::int64_t id, double numel, Id& grad) {
  const double limit = sc_.plan.reduce_bucket_size;
  overflow_check(numel);
  if (bucket_elems() + numel <= limit) {
    free_later(grad);
  } else if (grad >= 0) {
    bucket_held_.push_back(grad);
    grad = -1;
  }
  bucket_.push_back({id, numel});
}

// __reduce_and_partition_ipg_grads at one partition: reduce_scatter_coalesced flattens two or more
// gradients into one bf16 buffer on the reduce stream (torch/_utils.py _flatten_dense_tensors; one
// tensor is viewed, not copied); then the parameters' gradients are released.
void TrainingAllocs::flush() {
  Id flat = bucket_.size() >= 2 ? alloc(static_cast<std::int64_t>(bucket_elems()) * kBf16, kReduceStream) : -1;
  // with offload_optimizer, per parameter (partition_grads): the partition's GPU copy (2028), its fp64
  // norm in chunks (_constant_buffered_norm2, 1960-1966) and the fp32 copy for the host
  // (_offload_grad_partition_at_boundary, 1451), each released before the next
  // (stage3.py 1677: the bucket's parameters sorted by ds_id for the reduce-scatter and partition_grads)
  std::sort(bucket_.begin(), bucket_.end());
  if (sc_.plan.offload_optimizer)
    for (const auto& [id, n] : bucket_) {
      Id copy = alloc(static_cast<std::int64_t>(n) * kBf16, kReduceStream);
      for (double done = 0; done < n; done += kNormChunkElems) {
        Id chunk = alloc(static_cast<std::int64_t>(std::min(kNormChunkElems, n - done)) * kFp64, kReduceStream);
        free(chunk);
      }
      Id f32 = alloc(static_cast<std::int64_t>(n) * kFp32, kReduceStream);
      free(f32);
      free(copy);
    }
  free(flat);
  for (Id& id : bucket_held_) free_later(id);
  bucket_held_.clear();
  bucket_.clear();
}

// DeepSpeed ZeRO-3's step (stage3.py step) with torch.optim.AdamW (foreach) on the GPU:
// get_grad_norm_direct's fp64 copy of each gradient (2457), then per sub-group the bf16 gradients
// flattened and made fp32 (_prepare_fp32_grad_for_sub_group, 2686), AdamW's state created at the first
// step (adam.py 178, 182: exp_avg, exp_avg_sq) and the foreach sqrt's temporary (adam.py 791), the fp32
// gradient released.
void TrainingAllocs::optimizer_step(bool first_step) {
  if (!step_covered()) return;
  release_deferred();  // the step synchronizes with the reduce stream first
  if (sc_.plan.offload_optimizer) return;  // the norm came with the flushes; the step runs on the host
  for (std::int64_t n : parameter_numels(sc_.model)) {
    Id t = alloc(n * kFp64);
    free(t);
  }
  for (double gd : zero3_sub_groups(sc_.model, 1)) {
    const auto g = static_cast<std::int64_t>(gd);
    Id flat = alloc(g * kBf16);
    Id f32 = alloc(g * kFp32);
    free(flat);
    if (first_step) alloc(g * kFp32), alloc(g * kFp32);
    Id tmp = alloc(g * kFp32);
    free(tmp);
    free(f32);
  }
}

}  // namespace ulysses
