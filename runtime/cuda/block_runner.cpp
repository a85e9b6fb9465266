#include "runtime/cuda/block_runner.hpp"

#include <cmath>
#include <stdexcept>

#include "core/attn_impls.hpp"
#include "kernels/attention_flash.hpp"
#include "kernels/pack.cuh"
#include "kernels/testdata.cuh"
#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {
namespace {

using u16 = std::uint16_t;

std::vector<u16> to_host(const DevBuf<u16>& b) {
  std::vector<u16> h(static_cast<std::size_t>(b.size()));
  if (b.size() > 0) CUDA_CHECK(cudaMemcpy(h.data(), b.get(), static_cast<std::size_t>(b.bytes()), cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace

KernelChoice parse_kernel_choice(const std::string& a) {
  // plan.attn_implementation values and aliases: the one table, core/attn_impls.hpp.
  if (const core::AttnImpl* impl = core::find_attn_impl(a)) return {impl->kernel, impl->fallback};
  throw std::invalid_argument("attn_implementation '" + a +
                              "' is not a CUDA backend kernel (ulysses_flash, ulysses_reference, or a PyTorch name: "
                              "flash_attention_2, flash_attention_3, sdpa, flex_attention -> ulysses_flash)");
}

BlockRunner::BlockRunner(RankCtx& ctx, DeviceArena& a, const BlockShape& s, KernelChoice kernel, int slices)
    : ctx_(ctx), s_(s), kernel_(kernel), slices_(slices) {
  const std::int64_t P = s.P;
  S_l_ = s.S / P, H_l_ = s.H / P, H_kv_l_ = core::heads_per_rank(s.H_kv, P);
  rep_ = s.H_kv < P && s.kv_strategy == KvStrategy::replicate;
  qx_ = {s.B, s.S, P, s.H, s.D};
  kv_seq_dims_ = {s.B, s.S, P, s.H_kv, s.D};
  kvx_ = rep_ ? core::Dims{s.B, s.S, P, P, s.D} : kv_seq_dims_;  // what travels
  const std::int64_t q_seq = s.B * S_l_ * s.H * s.D, kv_seq = s.B * S_l_ * s.H_kv * s.D, rep = s.B * S_l_ * P * s.D;
  const std::int64_t q_head = s.B * s.S * H_l_ * s.D, kv_head = s.B * s.S * H_kv_l_ * s.D;
  for (auto* b : {&q_seq_, &dout_seq_, &o_seq_, &dq_seq_}) *b = DevBuf<u16>(a, q_seq);
  for (auto* b : {&k_seq_, &v_seq_, &dk_seq_, &dv_seq_}) *b = DevBuf<u16>(a, kv_seq);
  if (rep_)
    for (auto* b : {&k_rep_, &v_rep_, &dk_rep_, &dv_rep_}) *b = DevBuf<u16>(a, rep);
  for (auto* b : {&q_head_, &o_head_, &dout_head_, &dq_head_}) *b = DevBuf<u16>(a, q_head);
  for (auto* b : {&k_head_, &v_head_, &dk_head_, &dv_head_}) *b = DevBuf<u16>(a, kv_head);
  lse_ = DevBuf<float>(a, s.B * H_l_ * s.S);
  barrier_ = DevBuf<float>(a, 1);
  counter_ = DevBuf<unsigned long long>(a, 1);
  std::size_t ws = kernels::attn_bwd_workspace_bytes(kernels::AttnKernel::reference, s.B, s.S, H_l_, H_kv_l_, s.D);
  if (kernel_.kind == kernels::AttnKernel::flash)
    ws = std::max(ws, kernels::attn_bwd_workspace_bytes(kernels::AttnKernel::flash, s.B, s.S, H_l_, H_kv_l_, s.D));
  workspace_ = DevBuf<std::uint8_t>(a, static_cast<std::int64_t>(ws));
  const std::int64_t cap = P * (core::chunk_elems(qx_) + 2 * core::chunk_elems(kvx_));
  ex_ = std::make_unique<Exchanger>(ctx, a, cap);
  // every tensor an exchange writes into (phase() and device_checks()), same order on every rank
  std::vector<void*> dsts = {q_head_.get(), k_head_.get(), v_head_.get(), dout_head_.get(), o_seq_.get(), dq_seq_.get()};
  for (auto* b : rep_ ? std::vector<DevBuf<u16>*>{&dk_rep_, &dv_rep_} : std::vector<DevBuf<u16>*>{&dk_seq_, &dv_seq_})
    dsts.push_back(b->get());
  ex_->register_destinations(dsts);
}

std::string BlockRunner::kernel_name() const {
  if (kernel_.kind != kernels::AttnKernel::flash) return "reference";
  return "flash (" + kernels::attn_flash_kernels_in_use(static_cast<int>(s_.D)) + ")";
}

void BlockRunner::fill_inputs(std::uint64_t seed) {
  CUDA_CHECK(kernels::fill_seq_shard_bf16(q_seq_.get(), qx_, ctx_.rank, seed, kernels::kTensorQ, ctx_.stream));
  CUDA_CHECK(kernels::fill_seq_shard_bf16(k_seq_.get(), kv_seq_dims_, ctx_.rank, seed, kernels::kTensorK, ctx_.stream));
  CUDA_CHECK(kernels::fill_seq_shard_bf16(v_seq_.get(), kv_seq_dims_, ctx_.rank, seed, kernels::kTensorV, ctx_.stream));
  CUDA_CHECK(kernels::fill_seq_shard_bf16(dout_seq_.get(), qx_, ctx_.rank, seed, kernels::kTensorDout, ctx_.stream));
}

void BlockRunner::poison_outputs() {
  for (auto* b : {&o_seq_, &dq_seq_, &dk_seq_, &dv_seq_, &k_rep_, &v_rep_, &dk_rep_, &dv_rep_, &q_head_, &k_head_, &v_head_,
                  &o_head_, &dout_head_, &dq_head_, &dk_head_, &dv_head_})
    if (b->size() > 0) CUDA_CHECK(cudaMemsetAsync(b->get(), 0xFF, static_cast<std::size_t>(b->bytes()), ctx_.stream));
  CUDA_CHECK(cudaMemsetAsync(lse_.get(), 0xFF, static_cast<std::size_t>(lse_.bytes()), ctx_.stream));
}

void BlockRunner::barrier() {
  if (ctx_.world < 2) return;
  cudaEvent_t ev;
  CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(ev, ctx_.stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx_.comm_stream, ev, 0));
  ctx_.nccl(ncclAllReduce(barrier_.get(), barrier_.get(), 1, ncclFloat32, ncclSum, ctx_.comm, ctx_.comm_stream), "barrier");
  CUDA_CHECK(cudaEventRecord(ev, ctx_.comm_stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, ev, 0));
  CUDA_CHECK(cudaEventDestroy(ev));
}

void BlockRunner::attention_fwd() {
  kernels::AttnFwdParams p;
  p.q = reinterpret_cast<const __nv_bfloat16*>(q_head_.get());
  p.k = reinterpret_cast<const __nv_bfloat16*>(k_head_.get());
  p.v = reinterpret_cast<const __nv_bfloat16*>(v_head_.get());
  p.o = reinterpret_cast<__nv_bfloat16*>(o_head_.get());
  p.lse = lse_.get();
  p.B = s_.B, p.S = s_.S, p.H = H_l_, p.H_kv = H_kv_l_, p.D = s_.D, p.causal = s_.causal;
  p.scale = 1.0f / std::sqrt(static_cast<float>(s_.D));
  cudaError_t e = kernels::attn_fwd(kernel_.kind, p, ctx_.stream);
  if (e != cudaSuccess && kernel_.fallback && kernel_.kind == kernels::AttnKernel::flash &&
      (e == cudaErrorNotSupported || e == cudaErrorInvalidValue)) {
    cudaGetLastError();
    kernel_ = {kernels::AttnKernel::reference, false};  // flash not available for this shape/build
    e = kernels::attn_fwd(kernel_.kind, p, ctx_.stream);
  }
  CUDA_CHECK(e);
}

void BlockRunner::attention_bwd() {
  kernels::AttnBwdParams p;
  p.q = reinterpret_cast<const __nv_bfloat16*>(q_head_.get());
  p.k = reinterpret_cast<const __nv_bfloat16*>(k_head_.get());
  p.v = reinterpret_cast<const __nv_bfloat16*>(v_head_.get());
  p.o = reinterpret_cast<const __nv_bfloat16*>(o_head_.get());
  p.dout = reinterpret_cast<const __nv_bfloat16*>(dout_head_.get());
  p.lse = lse_.get();
  p.dq = reinterpret_cast<__nv_bfloat16*>(dq_head_.get());
  p.dk = reinterpret_cast<__nv_bfloat16*>(dk_head_.get());
  p.dv = reinterpret_cast<__nv_bfloat16*>(dv_head_.get());
  p.workspace = workspace_.get();
  p.B = s_.B, p.S = s_.S, p.H = H_l_, p.H_kv = H_kv_l_, p.D = s_.D, p.causal = s_.causal;
  p.scale = 1.0f / std::sqrt(static_cast<float>(s_.D));
  CUDA_CHECK(kernels::attn_bwd(kernel_.kind, p, ctx_.stream));
}

void BlockRunner::phase(int p) {
  switch (p) {
    case 0: {  // a2a.qkv.fwd
      if (rep_) {
        CUDA_CHECK(kernels::replicate_heads(k_seq_.get(), k_rep_.get(), kv_seq_dims_, 2, ctx_.stream));
        CUDA_CHECK(kernels::replicate_heads(v_seq_.get(), v_rep_.get(), kv_seq_dims_, 2, ctx_.stream));
      }
      ex_->run(Direction::seq_to_head,
               {{qx_, q_seq_.get(), q_head_.get()},
                {kvx_, rep_ ? k_rep_.get() : k_seq_.get(), k_head_.get()},
                {kvx_, rep_ ? v_rep_.get() : v_seq_.get(), v_head_.get()}},
               slices_);
      break;
    }
    case 1: attention_fwd(); break;
    case 2: ex_->run(Direction::head_to_seq, {{qx_, o_head_.get(), o_seq_.get()}}, slices_); break;
    case 3: ex_->run(Direction::seq_to_head, {{qx_, dout_seq_.get(), dout_head_.get()}}, slices_); break;
    case 4: attention_bwd(); break;
    case 5: {  // a2a.qkv.bwd
      const bool sum = !rep_ && s_.H_kv < s_.P;  // send_once: the unpack sums the R chunks
      ex_->run(Direction::head_to_seq,
               {{qx_, dq_head_.get(), dq_seq_.get()},
                {kvx_, dk_head_.get(), rep_ ? dk_rep_.get() : dk_seq_.get(), sum},
                {kvx_, dv_head_.get(), rep_ ? dv_rep_.get() : dv_seq_.get(), sum}},
               slices_);
      if (rep_) {
        CUDA_CHECK(kernels::reduce_replicas_bf16(dk_rep_.get(), dk_seq_.get(), kv_seq_dims_, ctx_.stream));
        CUDA_CHECK(kernels::reduce_replicas_bf16(dv_rep_.get(), dv_seq_.get(), kv_seq_dims_, ctx_.stream));
      }
      break;
    }
    default: throw std::logic_error("phase index");
  }
}

std::vector<Check> BlockRunner::device_checks(std::uint64_t seed, bool keep_roundtrip) {
  unsigned long long* w = counter_.get();
  auto count = [&](const std::string& name, auto&& launch) {
    CUDA_CHECK(cudaMemsetAsync(w, 0, sizeof *w, ctx_.stream));
    CUDA_CHECK(launch());
    unsigned long long h = 0;
    CUDA_CHECK(cudaMemcpyAsync(&h, w, sizeof h, cudaMemcpyDeviceToHost, ctx_.stream));
    ctx_.wait(ctx_.stream, "check " + name);
    Check c;
    c.name = name, c.wrong = static_cast<std::int64_t>(h), c.passed = h == 0;
    return c;
  };
  const int r = ctx_.rank;
  std::vector<Check> out;
  out.push_back(count("a2a.qkv.fwd q bit-exact", [&] { return kernels::count_wrong_head_bf16(q_head_.get(), qx_, r, seed, kernels::kTensorQ, w, ctx_.stream); }));
  out.push_back(count("a2a.qkv.fwd k bit-exact", [&] { return kernels::count_wrong_head_bf16(k_head_.get(), kv_seq_dims_, r, seed, kernels::kTensorK, w, ctx_.stream); }));
  out.push_back(count("a2a.qkv.fwd v bit-exact", [&] { return kernels::count_wrong_head_bf16(v_head_.get(), kv_seq_dims_, r, seed, kernels::kTensorV, w, ctx_.stream); }));
  out.push_back(count("a2a.out.bwd dout bit-exact", [&] { return kernels::count_wrong_head_bf16(dout_head_.get(), qx_, r, seed, kernels::kTensorDout, w, ctx_.stream); }));
  for (auto [name, buf] : {std::pair{"o_seq", &o_seq_}, {"dq_seq", &dq_seq_}, {"dk_seq", &dk_seq_}, {"dv_seq", &dv_seq_}})
    out.push_back(count(std::string("finite ") + name + " (no poison left)",
                        [&] { return kernels::count_nonfinite_bf16(buf->get(), buf->size(), w, ctx_.stream); }));
  // head_to_seq(seq_to_head(q)) == q, through the o exchange path, into o_seq (an output: re-poisoned next run)
  ex_->run(Direction::head_to_seq, {{qx_, q_head_.get(), o_seq_.get()}}, slices_);
  out.push_back(count("a2a head->seq(seq->head(q)) == q bit-exact",
                      [&] { return kernels::count_wrong_bits16(o_seq_.get(), q_seq_.get(), q_seq_.size(), w, ctx_.stream); }));
  if (keep_roundtrip) roundtrip_ = to_host(o_seq_);
  return out;
}

RankResult BlockRunner::download() {
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  RankResult r;
  r.q_head = to_host(q_head_), r.k_head = to_host(k_head_), r.v_head = to_host(v_head_);
  r.o_head = to_host(o_head_), r.o_seq = to_host(o_seq_), r.dout_head = to_host(dout_head_);
  r.dq_head = to_host(dq_head_), r.dk_head = to_host(dk_head_), r.dv_head = to_host(dv_head_);
  r.dq_seq = to_host(dq_seq_), r.dk_seq = to_host(dk_seq_), r.dv_seq = to_host(dv_seq_);
  return r;
}

}  // namespace ulysses::runtime::cuda
