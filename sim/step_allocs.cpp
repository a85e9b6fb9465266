// The PyTorch runtime's allocations in order (sim/step_allocs.hpp). Each block names the source lines
// (DeepSpeed 0.19.8) of the allocations it emits, as the recorded frames show them.
#include "sim/step_allocs.hpp"

#include <algorithm>
#include <vector>

#include "core/bf16.hpp"
#include "sim/model.hpp"
#include "sim/model_terms.hpp"

namespace ulysses {
namespace {

constexpr std::int64_t kBf16 = core::kBf16Bytes, kFp32 = 4;
// cuBLAS's workspace, allocated through the caching allocator at the process's first matmul (the rotary
// embedding's, modeling_llama.py 122) and kept: 32 MiB in every recording (torch 2.11 on H200)
constexpr std::int64_t kCublasWorkspaceBytes = std::int64_t{32} << 20;
}  // namespace

TrainingAllocs::TrainingAllocs(const Scenario& sc, CachingAllocatorSim& a, std::vector<std::int64_t>* log)
    : sc_(sc), d_(derive_dims(sc)), a_(a), log_(log) {
  const std::int64_t T = d_.B * d_.S_l;
  th_ = T * d_.h * kBf16;
  q_ = T * d_.H * d_.D * kBf16;
  kv_ = T * d_.H_kv * d_.D * kBf16;
  mlp_ = T * d_.F * kBf16;
}

bool TrainingAllocs::construction_covered() const {
  const Plan& pl = sc_.plan;
  return pl.zero_stage >= 3 && pl.dp_shard_size * pl.sp_size == 1 && !pl.offload_params;
}

bool TrainingAllocs::forward_covered() const {
  const Plan& pl = sc_.plan;
  return construction_covered() && pl.activation_checkpointing && !pl.offload_checkpoints && !pl.tiled_mlp &&
         pl.rmsnorm_implementation == RmsNormImpl::eager && pl.micro_batch_size == 1;
}

TrainingAllocs::Id TrainingAllocs::alloc(std::int64_t bytes) {
  if (bytes < kStepAllocsMinBytes) return -1;
  if (log_) log_->push_back(bytes);
  return a_.malloc(bytes, 0);
}

void TrainingAllocs::free(Id& id) {
  if (id >= 0) a_.free(id);
  id = -1;
}

void TrainingAllocs::construction() {
  if (!construction_covered()) return;
  const Plan& pl = sc_.plan;
  const std::vector<std::int64_t> numels = parameter_numels(sc_.model);
  std::int64_t total = 0;
  for (std::int64_t n : numels) total += n;
  // zero.Init: each module's parameter is created on the GPU (partition_parameters.py 269, inside the
  // module's __init__), its partition copied out (1836 _partition_param: at one partition the whole
  // tensor) and the module's tensor freed; with tied embeddings the lm_head's own weight as well
  const std::vector<std::int64_t> created = parameter_numels(sc_.model, true);
  std::vector<Id> parts;
  for (std::int64_t n : created) {
    Id full = alloc(n * kBf16);
    parts.push_back(alloc(n * kBf16));
    free(full);
  }
  // the engine gathers every parameter once (2142 _allgather_params_sequential), one at a time; then
  // a tied lm_head's own partition goes (the weight is the embedding's)
  for (std::int64_t n : created) {
    Id t = alloc(n * kBf16);
    free(t);
  }
  if (created.size() > numels.size()) free(parts.back());
  // _create_fp16_partitions_with_defragmentation (stage3.py 972 -> zero/utils.py defragment): the
  // partitions move to the host, the cache is emptied, one flat bf16 buffer holds them all (utils.py 237)
  for (Id& id : parts) free(id);
  a_.empty_cache();
  alloc(total * kBf16);
  // With offload_optimizer the optimizer's device is the host (stage3.py: self.device): the fp32
  // partitions, the gradient buffer and the gradient partitions below live there.
  const bool on_gpu = !pl.offload_optimizer;
  // _create_fp32_partitions (stage3.py 1170, 1172): per sub-group `converted = ....to(fp32)`, then its
  // `.clone()` kept; the previous `converted` is released when the name is bound to the next one
  const std::vector<double> groups = zero3_sub_groups(sc_.model, 1);
  if (on_gpu) {
    Id converted = -1;
    for (double gd : groups) {
      const auto g = static_cast<std::int64_t>(gd);
      const Id next = alloc(g * kFp32);
      free(converted);
      converted = next;
      alloc(g * kFp32);
    }
    free(converted);
    // initialize_optimizer_states (1306): an fp32 gradient buffer of the largest sub-group, dropped again
    Id buffer = alloc(static_cast<std::int64_t>(*std::max_element(groups.begin(), groups.end())) * kFp32);
    free(buffer);
  }
  // _setup_for_real_optimizer: the contiguous gradients' bucket on the GPU (782, reduce_bucket_size
  // elements) and the flat buffer of the gradient partitions (791, gradient_accumulation_dtype = bf16)
  alloc(static_cast<std::int64_t>(pl.reduce_bucket_size) * kBf16);
  if (on_gpu) alloc(total * kBf16);
  // the second gather pass of every parameter (2142)
  for (std::int64_t n : numels) {
    Id t = alloc(n * kBf16);
    free(t);
  }
}

// Eager RMSNorm (transformers 5.17 modeling_llama.py 62-67; Qwen3RMSNorm is the same code) without
// autograd's saved tensors, as inside a checkpointed layer's first pass: its output.
TrainingAllocs::Id TrainingAllocs::rmsnorm(std::int64_t x) {
  Id f32 = alloc(2 * x);  // 64 .to(float32)
  Id sq = alloc(2 * x);   // 65 pow(2), reduced by mean
  free(sq);
  Id n = alloc(2 * x);    // 66 * rsqrt(...); the fp32 copy released when the name is rebound
  free(f32);
  Id t = alloc(x);        // 67 .to(input_dtype)
  const Id out = alloc(x);  // 67 weight * ...
  free(t);
  free(n);
  return out;
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
    const Id n = rmsnorm(bytes);
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

// One decoder layer in the checkpointed first pass (modeling_llama.py 300-324): nothing is saved, every
// tensor is released when nothing refers to it (the layer's input stays: the checkpoint keeps it).
TrainingAllocs::Id TrainingAllocs::layer() {
  const std::int64_t th = th_, mlp = mlp_;
  Id n1 = rmsnorm(th);
  Id att = attention(n1);
  Id h1 = alloc(th);  // 317 residual + hidden_states
  free(att);
  Id n2 = rmsnorm(th);
  // the MLP (175): down(act(gate(x)) * up(x))
  Id gate = alloc(mlp);
  Id act = alloc(mlp);
  free(gate);
  Id up = alloc(mlp);
  Id prod = alloc(mlp);
  free(act);
  free(up);
  Id down = alloc(th);
  free(prod);
  free(n2);
  const Id out = alloc(th);  // 323 residual + hidden_states
  free(down);
  free(h1);
  return out;
}

void TrainingAllocs::forward(bool first_step) {
  if (!forward_covered()) return;
  const Dims& d = d_;
  const std::int64_t T = d.B * d.S_l, th = th_;
  embed_out_ = alloc(th);  // the embedding's output (torch/nn/functional.py 2567): layer 0's checkpoint
  // the rotary embedding (modeling_llama.py 122-125): freqs [B, D/2, T] fp32, the first matmul's cuBLAS
  // workspace, emb = cat(freqs, freqs) fp32, cos and sin and their * attention_scaling, the bf16 copies
  // the layers use (kept: the checkpoints recompute with them)
  Id freqs = alloc(T * (d.D / 2) * kFp32);
  if (first_step) keep_.push_back(alloc(kCublasWorkspaceBytes));
  Id emb = alloc(T * d.D * kFp32);
  Id c0 = alloc(T * d.D * kFp32);
  Id c1 = alloc(T * d.D * kFp32);
  free(c0);
  Id s0 = alloc(T * d.D * kFp32);
  Id s1 = alloc(T * d.D * kFp32);
  free(s0);
  keep_.push_back(alloc(T * d.D * kBf16));
  keep_.push_back(alloc(T * d.D * kBf16));
  free(freqs);
  free(emb);
  free(c1);
  free(s1);
  Id x = embed_out_;
  for (std::int64_t l = 0; l < d.L; ++l) {
    x = layer();
    if (l + 1 < d.L) keep_.push_back(x);  // the next layer's checkpoint
  }
  // the final norm, with autograd (outside the checkpoints): the fp32 input and the bf16 normalized
  // tensor are saved; the last layer's output is released once the norm has returned
  keep_.push_back(alloc(2 * th));
  Id sq = alloc(2 * th);
  free(sq);
  Id n = alloc(2 * th);
  keep_.push_back(alloc(th));
  final_hidden_ = alloc(th);
  free(n);
  free(x);
}

void TrainingAllocs::loss(bool first_step) {
  if (!forward_covered()) return;
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
  const std::int64_t chunk = (T + d.logits_shards - 1) / d.logits_shards;
  for (std::int64_t t0 = 0; t0 < T; t0 += chunk) {
    const std::int64_t n = std::min(chunk, T - t0);
    Id logits = alloc(n * d.V * kBf16);
    Id f32 = alloc(n * d.V * kFp32);
    free(logits);
    Id logp = alloc(n * d.V * kFp32);
    free(f32);
    Id g_nll = alloc(n * d.V * kFp32);
    Id g_logp = alloc(n * d.V * kFp32);
    free(g_nll);
    free(logp);
    Id g_bf16 = alloc(n * d.V * kBf16);
    free(g_logp);
    Id g_in = alloc(n * d.h * kBf16);
    if (first_step && t0 == 0) keep_.push_back(alloc(kCublasWorkspaceBytes));
    Id g_w = alloc(d.V * d.h * kBf16);
    free(g_bf16);
    if (t0 == 0) {
      head_grad_ = g_w;
    } else {
      free(g_w);
    }
    free(g_in);
  }
}

}  // namespace ulysses
