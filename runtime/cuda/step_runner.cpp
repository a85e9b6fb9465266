// One training step on one GPU (runtime/cuda/step_runner.hpp): parameters, buffers, then the step top
// to bottom as runtime/reference_step.cpp computes it: embedding, layers, final norm, loss head per
// chunk (logits, cross-entropy with its gradient, the lm_head's two GEMMs), the final norm's backward,
// the layers top down (recomputed first under checkpointing), the embedding's backward.
#include "runtime/cuda/step_runner.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/heads.hpp"
#include "kernels/layer_ops.hpp"
#include "kernels/loss_ops.hpp"
#include "kernels/testdata.cuh"
#include "runtime/cuda/cuda_check.hpp"
#include "sim/memory.hpp"
#include "sim/step_runtime_memory.hpp"

namespace ulysses::runtime::cuda {
namespace {

static_assert(Gemm::kWorkspaceBytes == static_cast<std::size_t>(kCublasLtWorkspaceBytes),
              "sim/step_runtime_memory.hpp mirrors cuBLASLt's workspace size");

using Pass = core::StepPass;

// The seeded generator's tensor ids and the parameters' initial values (HF: normal(0, 0.02) matrices,
// norm weights 1; here 1 + 0.1 u so that the norms' weight gradients are tested off the identity).
constexpr std::uint32_t kEmbedId = 1000, kHeadId = 1001, kFinalId = 1002;
constexpr std::uint32_t layer_param_id(std::int64_t l, int j) { return 2000 + static_cast<std::uint32_t>(16 * l + j); }
constexpr float kMatrixScale = 0.02f, kNormScale = 0.1f;

struct ParamFill {
  std::uint32_t id;
  float bias, scale;
};
ParamFill matrix(std::uint32_t id) { return {id, 0.f, kMatrixScale}; }
ParamFill norm(std::uint32_t id) { return {id, 1.f, kNormScale}; }

// The layer parameters in DecoderLayerParams order (w1, wq, wk, wv, wo, w2, wg, wu, wd; with qk_norm wqn, wkn).
int layer_params(const DecoderLayerDims& d) { return d.qk_norm ? 11 : 9; }
constexpr const char* kLayerParamNames[11] = {"w1", "wq", "wk", "wv", "wo", "w2", "wg", "wu", "wd", "wqn", "wkn"};
bool is_norm(int j) { return j == 0 || j == 5 || j >= 9; }  // w1, w2, wqn, wkn: fp32 gradients
ParamFill layer_fill(std::int64_t l, int j) { return is_norm(j) ? norm(layer_param_id(l, j)) : matrix(layer_param_id(l, j)); }

std::vector<core::bf16> host_fill(std::int64_t n, std::uint64_t seed, ParamFill f) {
  std::vector<core::bf16> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    volatile float p = f.scale * kernels::seeded_value(seed, f.id, static_cast<std::uint64_t>(i));  // no contraction: the device's
    v[i] = core::float_to_bf16(f.bias + p);                                                          // __fadd_rn(__fmul_rn) bits
  }
  return v;
}
void device_fill(bf16_t* x, std::int64_t n, std::uint64_t seed, ParamFill f, cudaStream_t s) {
  CUDA_CHECK(kernels::fill_seeded_param(x, n, seed, f.id, f.bias, f.scale, s));
}


std::int64_t layer_sizes(const DecoderLayerDims& d, int j) {  // DecoderLayerParams order
  const std::int64_t h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  const std::int64_t n[11] = {h, HD * h, KD * h, KD * h, h * HD, h, F * h, F * h, h * F, d.D, d.D};
  return n[j];
}
bf16_t* layer_ptr(const LayerWeights& w, int j) {
  bf16_t* p[11] = {w.w1, w.wq, w.wk, w.wv, w.wo, w.w2, w.wg, w.wu, w.wd, w.wqn, w.wkn};
  return p[j];
}
const void* layer_grad_ptr(const LayerGrads& g, int j) {
  const void* p[11] = {g.dw1, g.dwq, g.dwk, g.dwv, g.dwo, g.dw2, g.dwg, g.dwu, g.dwd, g.dwqn, g.dwkn};
  return p[j];
}
std::vector<core::bf16>& layer_vec(DecoderLayerParams<std::vector<core::bf16>>& p, int j) {
  std::vector<core::bf16>* v[11] = {&p.w1, &p.wq, &p.wk, &p.wv, &p.wo, &p.w2, &p.wg, &p.wu, &p.wd, &p.wqn, &p.wkn};
  return *v[j];
}

}  // namespace

StepParams StepRunner::host_params(const StepDims& d, std::uint64_t seed) {
  StepParams p;
  const std::int64_t Vh = d.V * d.layer.h;
  p.embed = host_fill(Vh, seed, matrix(kEmbedId));
  p.w_final = host_fill(d.layer.h, seed, norm(kFinalId));
  if (!d.tied) p.lm_head = host_fill(Vh, seed, matrix(kHeadId));
  p.layers.resize(static_cast<std::size_t>(d.L));
  for (std::int64_t l = 0; l < d.L; ++l)
    for (int j = 0; j < layer_params(d.layer); ++j) layer_vec(p.layers[l], j) = host_fill(layer_sizes(d.layer, j), seed, layer_fill(l, j));
  return p;
}

StepRunner::StepRunner(const StepDims& d, const StepPlan& plan, DeviceArena& arena, Gemm& gemm, std::uint64_t seed,
                       kernels::AttnKernel attn, LayerExchange* sp, StepCollectives* zero)
    : d_(d), plan_(plan), bufs_(arena) {
  const int P = sp ? sp->ranks() : 1;
  if ((P > 1) != (zero != nullptr && zero->ranks() > 1) || (zero && zero->ranks() != P))
    throw std::invalid_argument("step runner: sp > 1 needs the exchange and ZeRO-3's collectives over the same ranks");
  const DecoderLayerDims& ld = d.layer;
  if (core::head_rule(ld.H, ld.H_kv, P) != core::HeadRule::ok)
    throw std::invalid_argument("step runner: at sp " + std::to_string(P) + " the heads must be a multiple of sp and the kv "
                                "heads divide the heads and divide or be a multiple of sp (H " + std::to_string(ld.H) +
                                ", H_kv " + std::to_string(ld.H_kv) + ")");
  const std::int64_t T = ld.T, h = ld.h, V = d.V;
  if (d.L < 1 || V < 2 || T < 1 || plan.logits_shards < 1 || plan.logits_shards > T || ld.mlp_shards < 1 || ld.mlp_shards > T)
    throw std::invalid_argument("step runner: needs L >= 1, V >= 2, T >= 1 and 1 <= logits_shards, mlp_shards <= T");
  if (plan.offload_checkpoints && !plan.checkpoint)
    throw std::invalid_argument("step runner: checkpoint offload needs activation checkpointing");
  if (plan.offload_params && (!zero || !plan.optimizer || !plan.offload_optimizer))
    throw std::invalid_argument("step runner: offloaded parameters need ZeRO-3's collectives (one rank: OneRank) and the "
                                "optimizer on the host");
  if (P == 1 && zero && !plan.offload_params)
    throw std::invalid_argument("step runner: ZeRO-3's collectives at sp 1 are for offloaded parameters only");
  const bool sharded = zero != nullptr;  // ZeRO-3's parts and slots (sp > 1, or offload_params on one rank)
  const std::int64_t Tc = torch_chunk_sizes(T, plan.logits_shards).front();
  // parameters (filled from the seed), then gradients, then the optimizer's state, then what the step
  // keeps, then its temporaries
  embed_ = bufs_.take<bf16_t>(V * h);
  w_final_ = bufs_.take<bf16_t>(h);
  head_ = d.tied ? embed_ : bufs_.take<bf16_t>(V * h);
  const std::int64_t slots = sharded ? std::min<std::int64_t>(2, d.L) : d.L;  // ZeRO-3: two gathered layers
  for (std::int64_t l = 0; l < slots; ++l) w_.push_back(alloc_weights(bufs_, ld));
  device_fill(embed_, V * h, seed, matrix(kEmbedId), nullptr);
  device_fill(w_final_, h, seed, norm(kFinalId), nullptr);
  if (!d.tied) device_fill(head_, V * h, seed, matrix(kHeadId), nullptr);
  d_embed_ = bufs_.take<float>(V * h);
  d_final_ = bufs_.take<float>(h);
  d_head_ = bufs_.take<bf16_t>(V * h);
  // the layers' gradients: ZeRO-3 over ranks one layer's (reduce-scattered into the parts); else every layer's (on
  // one rank with offload_params they are ZeRO-3's gradient parts themselves, as the outer tensors' full gradients)
  for (std::int64_t l = 0; l < (P > 1 ? 1 : d.L); ++l) g_.push_back(alloc_grads(bufs_, ld));
  if (sharded) {  // the rank's parts, filled from the full tensors the seed gives (a layer at a time, in slot 0)
    std::vector<ShardedTensor> t = {{"embed", V * h, true}, {"final_norm", h, true}};
    std::vector<void*> own_grads;  // one rank: its full gradients are its parts
    if (P == 1) own_grads = {d_embed_, d_final_};
    if (!d.tied) t.push_back({"lm_head", V * h, false});
    if (P == 1 && !d.tied) own_grads.push_back(d_head_);
    for (std::int64_t l = 0; l < d.L; ++l)
      for (int j = 0; j < layer_params(ld); ++j) {
        t.push_back({"layer" + std::to_string(l) + "." + kLayerParamNames[j], layer_sizes(ld, j), is_norm(j)});
        if (P == 1) own_grads.push_back(const_cast<void*>(layer_grad_ptr(g_[static_cast<std::size_t>(l)], j)));
      }
    zero_ = std::make_unique<Zero3Shards>(bufs_, *zero, std::move(t), plan.offload_params, std::move(own_grads));
    zero_->keep_part(0, embed_, nullptr), zero_->keep_part(1, w_final_, nullptr);
    if (!d.tied) zero_->keep_part(2, head_, nullptr);
    for (std::int64_t l = 0; l < d.L; ++l)
      for (int j = 0; j < layer_params(ld); ++j) {
        device_fill(layer_ptr(w_[0], j), layer_sizes(ld, j), seed, layer_fill(l, j), nullptr);
        zero_->keep_part(tensor_index(l, j), layer_ptr(w_[0], j), nullptr);
      }
    CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    for (std::int64_t l = 0; l < d.L; ++l)
      for (int j = 0; j < layer_params(ld); ++j) device_fill(layer_ptr(w_[l], j), layer_sizes(ld, j), seed, layer_fill(l, j), nullptr);
  }
  opt_params_ = zero_ ? zero_->parts() : optimizer_params();
  if (plan.optimizer && !plan.offload_optimizer) adam_ = std::make_unique<AdamW>(bufs_, opt_params_, plan.adam, zero_ ? zero : nullptr);
  tokens_ = bufs_.take<std::int32_t>(T), labels_ = bufs_.take<std::int32_t>(T);
  cos_ = bufs_.take<bf16_t>(T * ld.D / 2), sin_ = bufs_.take<bf16_t>(T * ld.D / 2);
  for (std::int64_t l = 0; l < (plan.offload_checkpoints ? 2 : d.L + 1); ++l) hidden_.push_back(bufs_.take<bf16_t>(T * h));
  const std::int64_t n_acts = plan.checkpoint ? 1 : d.L;
  for (std::int64_t l = 0; l < n_acts; ++l) acts_.push_back(alloc_acts(bufs_, ld, P));
  scratch_ = alloc_scratch(bufs_, ld, attn, P);
  n_final_ = bufs_.take<bf16_t>(T * h), dn_final_ = bufs_.take<bf16_t>(T * h), rstd_final_ = bufs_.take<float>(T);
  logits_ = bufs_.take<bf16_t>(Tc * V);
  loss_rows_ = bufs_.take<float>(T);
  dy_ = bufs_.take<bf16_t>(T * h), dx_ = bufs_.take<bf16_t>(T * h);
  ctx_ = LayerCtx{ld, &gemm, attn, cos_, sin_, nullptr, P > 1 ? sp : nullptr};
  if (plan.optimizer && plan.offload_optimizer) {  // pinned staging per tensor: its gradient, its parameters
    CUDA_CHECK(cudaDeviceSynchronize());          // the parameters' fill is done
    std::vector<std::vector<core::bf16>> initial;
    // (offloaded parameters: the part in pinned host memory is the parameters' buffer, updated in place)
    if (plan.offload_params) host_bytes_ += zero_->host_bytes();
    for (const ParamRef& r : opt_params_) {
      const std::int64_t grad_bytes = r.n * (r.grad_fp32 ? 4 : 2), param_bytes = r.n * 2;
      void *g = pinned_.emplace_back(alloc_pinned(grad_bytes)).get(), *p = plan.offload_params ? r.param : nullptr;
      host_bytes_ += grad_bytes;
      if (!plan.offload_params) {
        p = pinned_.emplace_back(alloc_pinned(param_bytes)).get();
        host_bytes_ += param_bytes;
        CUDA_CHECK(cudaMemcpy(p, r.param, static_cast<std::size_t>(param_bytes), cudaMemcpyDeviceToHost));
      }
      const auto* bits = static_cast<const core::bf16*>(p);
      initial.emplace_back(bits, bits + r.n);
      host_opt_.push_back({g, r.grad_fp32, static_cast<core::bf16*>(p), r.n});
    }
    const int threads = plan.host_threads > 0 ? plan.host_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    host_adam_ = std::make_unique<HostAdamW>(initial, plan.adam, threads);
    if (P > 1) {  // the norm's exchange between ranks
      norm_dev_ = bufs_.take<double>(1 + P);
      norm_host_ = static_cast<double*>(pinned_.emplace_back(alloc_pinned(P * 8)).get());
      host_bytes_ += P * 8;
    }
  }
  if (plan.offload_params) {
    fetch_.emplace();
    slot_free_.emplace(1, cudaEventDisableTiming);
    fetched_.emplace(3, cudaEventDisableTiming);
  }
  if (plan.offload_checkpoints) {
    const std::int64_t ckpt_bytes = (d.L - 1) * T * h * 2;
    host_bytes_ += ckpt_bytes;
    if (ckpt_bytes > 0) host_ = static_cast<bf16_t*>(pinned_.emplace_back(alloc_pinned(ckpt_bytes)).get());
    copy_.emplace();
    d2h_.emplace(static_cast<int>(d.L), cudaEventDisableTiming);
    h2d_.emplace(static_cast<int>(d.L), cudaEventDisableTiming);
    ready_.emplace(1, cudaEventDisableTiming);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
}

StepRunner::~StepRunner() {  // the streams' work done before their owners destroy them and their events
  if (fetch_) cudaStreamSynchronize(fetch_->s);
  if (copy_) cudaStreamSynchronize(copy_->s);
}

std::size_t StepRunner::tensor_index(std::int64_t l, int j) const {
  return static_cast<std::size_t>((d_.tied ? 2 : 3) + l * layer_params(d_.layer) + j);
}

StepRunner::Gathered StepRunner::layer_tensors(std::int64_t l) const {
  Gathered g;
  for (int j = 0; j < layer_params(d_.layer); ++j) g.emplace_back(tensor_index(l, j), layer_ptr(weights(l), j));
  return g;
}

// ZeRO-3: tensors into their full buffers. Now (ahead < 0): on s, the parts from the host first when they live there
// (phase offload.params), then the all-gathers (zero.allgather). Ahead (the next layer's while this one computes, the
// final norm's and lm_head's during layer 0): the parts from the host on the fetch stream once s's work so far (the
// buffer's last reader) is done, the all-gathers ordered after them (all_gather_ahead); join(ahead) before use.
void StepRunner::gather(const Gathered& g, cudaStream_t s, PhaseMarks* marks, int ahead) {
  const bool host = zero_->params_on_host();
  if (ahead < 0) {
    if (host) {
      mark_phase(marks, core::kOffloadParams, s);
      for (const auto& [i, full] : g) zero_->fetch(i, full, s);
    }
    mark_phase(marks, core::kZeroAllgather, s);
    for (const auto& [i, full] : g) zero_->gather(i, full, s);
    return;
  }
  cudaStream_t f = s;
  if (host) {
    CUDA_CHECK(cudaEventRecord(slot_free_->e[0], s));
    CUDA_CHECK(cudaStreamWaitEvent(fetch_->s, slot_free_->e[0], 0));
    for (const auto& [i, full] : g) zero_->fetch(i, full, fetch_->s);
    f = fetch_->s;
  }
  for (const auto& [i, full] : g) zero_->gather_ahead(i, full, f);
  if (host) CUDA_CHECK(cudaEventRecord(fetched_->e[static_cast<std::size_t>(ahead)], fetch_->s));
}

// s waits for an ahead gather: for its parts from the host (what the fetch did not hide shows in offload.params),
// then for the all-gathers (zero.allgather)
void StepRunner::join(int ahead, cudaStream_t s, PhaseMarks* marks) {
  if (zero_->params_on_host()) {
    mark_phase(marks, core::kOffloadParams, s);
    CUDA_CHECK(cudaStreamWaitEvent(s, fetched_->e[static_cast<std::size_t>(ahead)], 0));
  }
  mark_phase(marks, core::kZeroAllgather, s);
  zero_->join(s);
}

void StepRunner::reduce_layer(std::int64_t l, cudaStream_t s) {
  for (int j = 0; j < layer_params(d_.layer); ++j) zero_->reduce(tensor_index(l, j), layer_grad_ptr(layer_grads(l), j), s);
}

std::vector<ParamRef> StepRunner::optimizer_params() const {
  const DecoderLayerDims& ld = d_.layer;
  const std::int64_t Vh = d_.V * ld.h;
  std::vector<ParamRef> p = {{embed_, d_embed_, true, Vh}, {w_final_, d_final_, true, ld.h}};
  if (!d_.tied) p.push_back({head_, d_head_, false, Vh});
  for (std::size_t l = 0; l < w_.size(); ++l) {
    for (int j = 0; j < layer_params(ld); ++j) p.push_back({layer_ptr(w_[l], j), layer_grad_ptr(g_[l], j), is_norm(j), layer_sizes(ld, j)});
  }
  return p;
}

// The kept input of layer l to the host (after the stream's work so far), or back (before it).
void StepRunner::copy_checkpoint(std::int64_t l, bool to_host, cudaStream_t s) {
  const std::size_t bytes = static_cast<std::size_t>(d_.layer.T * d_.layer.h) * 2;
  bf16_t* host = host_ + l * d_.layer.T * d_.layer.h;
  CUDA_CHECK(cudaEventRecord(ready_->e[0], s));
  CUDA_CHECK(cudaStreamWaitEvent(copy_->s, ready_->e[0], 0));
  if (to_host) CUDA_CHECK(cudaMemcpyAsync(host, hidden(l), bytes, cudaMemcpyDeviceToHost, copy_->s));
  else CUDA_CHECK(cudaMemcpyAsync(hidden(l), host, bytes, cudaMemcpyHostToDevice, copy_->s));
  CUDA_CHECK(cudaEventRecord((to_host ? d2h_ : h2d_)->e[static_cast<std::size_t>(l)], copy_->s));
}

void StepRunner::set_batch(const std::vector<std::int64_t>& tokens, const std::vector<std::int64_t>& labels,
                           const std::vector<core::bf16>& cos, const std::vector<core::bf16>& sin, std::int64_t loss_divisor) {
  const std::int64_t T = d_.layer.T;
  if (static_cast<std::int64_t>(tokens.size()) != T || static_cast<std::int64_t>(labels.size()) != T ||
      static_cast<std::int64_t>(cos.size()) != T * d_.layer.D / 2 || cos.size() != sin.size())
    throw std::invalid_argument("step runner: tokens and labels need T entries, cos and sin T * D / 2");
  std::vector<std::int32_t> t32(tokens.size()), l32(labels.size());
  valid_ = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= d_.V || (labels[t] != kIgnoreLabel && (labels[t] < 0 || labels[t] >= d_.V)))
      throw std::invalid_argument("step runner: a token or label outside [0, V) (labels may be -100)");
    t32[t] = static_cast<std::int32_t>(tokens[t]), l32[t] = static_cast<std::int32_t>(labels[t]);
    valid_ += labels[t] != kIgnoreLabel;
  }
  divisor_ = loss_divisor > 0 ? loss_divisor : std::max<std::int64_t>(valid_, 1);
  CUDA_CHECK(cudaMemcpy(tokens_, t32.data(), t32.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(labels_, l32.data(), l32.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(cos_, cos.data(), cos.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(sin_, sin.data(), sin.size() * 2, cudaMemcpyHostToDevice));
}

void StepRunner::step(cudaStream_t s, PhaseMarks* marks) {
  const DecoderLayerDims& ld = d_.layer;
  const std::int64_t T = ld.T, h = ld.h, V = d_.V, L = d_.L;
  Gemm& gemm = *ctx_.gemm;
  LayerCtx c = ctx_;
  c.marks = marks;
  auto mark = [&](std::string_view phase) { mark_phase(marks, phase, s); };
  auto acts = [&](std::int64_t l) -> const LayerActs& { return acts_[plan_.checkpoint ? 0 : l]; };
  const bool off = plan_.offload_checkpoints;
  auto offloaded = [&](std::int64_t l) { return off && l < L - 1; };  // the last layer's input stays
  // ---- forward (offload: hidden[l] leaves as soon as it exists; its buffer is reused two layers on) ----
  if (zero_) {  // ZeRO-3: the embedding and layer 0 now; the final norm and the lm_head (whole for the step) while
                // layer 0 computes
    gather({{0, embed_}}, s, marks);
    gather(layer_tensors(0), s, marks);
    gather(d_.tied ? Gathered{{1, w_final_}} : Gathered{{1, w_final_}, {2, head_}}, s, marks, kOuterAhead);
  }
  mark(core::kEmbedFwd);
  CUDA_CHECK(kernels::embedding_fwd(embed_, tokens_, hidden(0), T, h, s));
  if (offloaded(0)) copy_checkpoint(0, true, s);
  for (std::int64_t l = 0; l < L; ++l) {
    if (off && l >= 1) CUDA_CHECK(cudaStreamWaitEvent(s, d2h_->e[static_cast<std::size_t>(l - 1)], 0));  // hidden[l - 1] is on the host
    if (zero_) {  // layer l's weights (gathered ahead while layer l - 1 ran), then layer l + 1's into the other slot,
                  // which layer l - 1, queued before, has finished with
      if (l >= 1) join(static_cast<int>(l % 2), s, marks);
      if (l + 1 < L) gather(layer_tensors(l + 1), s, marks, static_cast<int>((l + 1) % 2));
    }
    layer_forward(c, weights(l), acts(l), scratch_, hidden(l), hidden(l + 1), Pass::fwd, s);
    if (offloaded(l + 1)) copy_checkpoint(l + 1, true, s);
  }
  if (zero_) join(kOuterAhead, s, marks);
  mark(core::phase_name(core::LayerOp::norm, Pass::fwd));
  CUDA_CHECK(kernels::rmsnorm_fwd(hidden(L), w_final_, n_final_, rstd_final_, T, h, float(ld.eps), s));
  // ---- the loss head, chunk by chunk: logits, loss and dlogits, then the lm_head's gradients ----
  std::int64_t t0 = 0;
  const std::vector<std::int64_t> chunks = torch_chunk_sizes(T, plan_.logits_shards);
  for (const std::int64_t Tc : chunks) {
    mark(core::kLogitsFwd);
    gemm.forward(n_final_ + t0 * h, head_, logits_, Tc, V, h, s);
    CUDA_CHECK(kernels::cross_entropy_fwd_bwd(logits_, labels_ + t0, loss_rows_ + t0, Tc, V, float(divisor_), s));
    mark(core::kLogitsBwd);
    gemm.input_grad(logits_, head_, dn_final_ + t0 * h, Tc, V, h, s);
    if (t0 == 0)  // d_head_ is written next: free for choosing the later chunks' accumulating GEMM (no later chunk is larger)
      for (const std::int64_t Ta : accumulating_shard_sizes(chunks)) gemm.tune_accumulating_weight_grad(logits_, n_final_, d_head_, Ta, V, h, s);
    gemm.weight_grad(logits_, n_final_ + t0 * h, d_head_, Tc, V, h, t0 > 0 ? 1.f : 0.f, s);
    t0 += Tc;
  }
  // ---- backward: the final norm, the layers top down, the embedding ----
  mark(core::phase_name(core::LayerOp::norm, Pass::bwd));
  CUDA_CHECK(kernels::rmsnorm_bwd(dn_final_, hidden(L), w_final_, rstd_final_, dy_, d_final_, scratch_.norm_ws, T, h, s));
  for (std::int64_t l = L - 1; l >= 0; --l) {
    // offload: hidden[l - 1] comes back into the buffer layer l + 1 (or the final norm) has finished with,
    // while layer l computes
    if (off && l >= 1) copy_checkpoint(l - 1, false, s);
    if (offloaded(l)) CUDA_CHECK(cudaStreamWaitEvent(s, h2d_->e[static_cast<std::size_t>(l)], 0));
    if (zero_) {  // the last two layers are still in their slots from the forward (nothing wrote them since); below
                  // them, top down, layer l - 1 goes into the slot of layer l + 1, whose backward is queued
      if (l < L - 2) join(static_cast<int>(l % 2), s, marks);
      if (l >= 1 && l - 1 < L - 2) gather(layer_tensors(l - 1), s, marks, static_cast<int>((l - 1) % 2));
    }
    if (plan_.checkpoint) layer_forward(c, weights(l), acts(l), scratch_, hidden(l), nullptr, Pass::recompute, s);
    layer_backward(c, weights(l), layer_grads(l), acts(l), scratch_, hidden(l), dy_, dx_, s);
    if (zero_) mark(core::kZeroReduceScatter), reduce_layer(l, s);
    std::swap(dy_, dx_);
  }
  mark(core::kEmbedBwd);
  CUDA_CHECK(cudaMemsetAsync(d_embed_, 0, static_cast<std::size_t>(V * h) * 4, s));
  CUDA_CHECK(kernels::embedding_bwd(dy_, tokens_, d_embed_, T, h, s));
  if (d_.tied) CUDA_CHECK(kernels::add_bf16_to_fp32(d_head_, d_embed_, V * h, s));
  if (zero_) {
    mark(core::kZeroReduceScatter);
    zero_->reduce(0, d_embed_, s), zero_->reduce(1, d_final_, s);
    if (!d_.tied) zero_->reduce(2, d_head_, s);
  }
  if (adam_) {
    mark(core::kOptimizerStep);
    adam_->step(s);
  } else if (host_adam_) {
    host_optimizer_step(s, marks);
  }
}

// The gradients to the host, the step there (the stream waits: its next event is recorded after it), the
// parameters back (with offload_params none: the host's parts are the parameters).
void StepRunner::host_optimizer_step(cudaStream_t s, PhaseMarks* marks) {
  mark_phase(marks, core::kOffloadGrads, s);
  for (std::size_t i = 0; i < opt_params_.size(); ++i) {
    const ParamRef& r = opt_params_[i];
    CUDA_CHECK(cudaMemcpyAsync(const_cast<void*>(host_opt_[i].grad), r.grad, static_cast<std::size_t>(r.n * (r.grad_fp32 ? 4 : 2)),
                               cudaMemcpyDeviceToHost, s));
  }
  mark_phase(marks, core::kOptimizerStep, s);
  if (zero_)  // over GPUs the stream has waited on the peers' reduce-scatters: the watchdog's wait
    zero_->comm().wait(s, "the gradients to the host");
  else
    CUDA_CHECK(cudaStreamSynchronize(s));
  if (norm_dev_)  // ranks > 1
    host_adam_->step(host_opt_, [&](double mine) { return global_sum_squares(mine, s); });
  else
    host_adam_->step(host_opt_);
  if (plan_.offload_params) return;  // the parts were updated where they live; the gathers fetch them
  mark_phase(marks, core::kOffloadOptimizer, s);
  for (std::size_t i = 0; i < opt_params_.size(); ++i)
    CUDA_CHECK(cudaMemcpyAsync(opt_params_[i].param, host_opt_[i].param, static_cast<std::size_t>(opt_params_[i].n) * 2,
                               cudaMemcpyHostToDevice, s));
}

// sp > 1, the host optimizer: every rank's sum of squared gradient parts, added in rank order (a collective).
double StepRunner::global_sum_squares(double mine, cudaStream_t s) {
  StepCollectives& coll = zero_->comm();
  const int P = coll.ranks();
  norm_host_[0] = mine;
  CUDA_CHECK(cudaMemcpyAsync(norm_dev_, norm_host_, 8, cudaMemcpyHostToDevice, s));
  coll.all_gather(norm_dev_, norm_dev_ + 1, 2, Elem::f32, s);  // the fp64 bits as two fp32 words: copied only
  CUDA_CHECK(cudaMemcpyAsync(norm_host_, norm_dev_ + 1, static_cast<std::size_t>(P) * 8, cudaMemcpyDeviceToHost, s));
  coll.wait(s, "the host optimizer's norm");
  double total = 0;
  for (int r = 0; r < P; ++r) total += norm_host_[r];
  return total;
}

std::vector<double> StepRunner::param(std::size_t i) const {
  if (zero_ && zero_->params_on_host()) return zero_->param_part(i);
  return download_doubles(opt_params_.at(i).param, opt_params_.at(i).n);
}

double StepRunner::loss_sum() const {
  const std::vector<double> rows = download_doubles(loss_rows_, d_.layer.T);
  double s = 0;
  for (double r : rows) s += r;
  return s;
}

StepResult StepRunner::grads() const {
  if (zero_) throw std::logic_error("step runner: under ZeRO-3 the gradients are its parts (zero3()->grad_part)");
  StepResult r;
  r.loss_sum = loss_sum();
  r.valid_tokens = valid_;
  r.loss = r.loss_sum / double(std::max<std::int64_t>(valid_, 1));
  const std::int64_t Vh = d_.V * d_.layer.h;
  r.d_embed = download_doubles(d_embed_, Vh);
  r.d_final = download_doubles(d_final_, d_.layer.h);
  if (!d_.tied) r.d_head = download_doubles(d_head_, Vh);
  for (const LayerGrads& g : g_) r.d_layers.push_back(download_grads(g, d_.layer));
  return r;
}

}  // namespace ulysses::runtime::cuda
