// One decoder layer on the GPU (runtime/cuda/decoder_layer.hpp): buffers, forward, backward, top to
// bottom in the order the oracle (runtime/reference_decoder_layer.cpp) computes them.
#include "runtime/cuda/decoder_layer.hpp"

#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "kernels/layer_ops.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "sim/memory.hpp"

namespace ulysses::runtime::cuda {
namespace {

using core::LayerOp;
using Pass = core::StepPass;

void upload(bf16_t* dst, const std::vector<core::bf16>& src, std::int64_t n) {
  if (static_cast<std::int64_t>(src.size()) != n) throw std::invalid_argument("decoder layer: a parameter has the wrong size");
  CUDA_CHECK(cudaMemcpy(dst, src.data(), src.size() * 2, cudaMemcpyHostToDevice));
}
void mark(const LayerCtx& c, LayerOp op, Pass pass, cudaStream_t s) { mark_phase(c.marks, core::phase_name(op, pass), s); }

// Attention's shape on a rank of P: all S = T * P positions, H_l and K_l heads (one rank: S = T, every head), and
// the exchange's dims of q (and o) and of k, v (B = 1; H as held sequence-sharded).
struct Heads {
  std::int64_t P, S, H_l, K_l;
  core::Dims q, kv;
};
Heads heads_at(const DecoderLayerDims& d, std::int64_t P) {
  const std::int64_t S = d.T * P;
  return {P, S, core::heads_per_rank(d.H, P), core::heads_per_rank(d.H_kv, P), {1, S, P, d.H, d.D}, {1, S, P, d.H_kv, d.D}};
}
Heads heads_of(const LayerCtx& c) { return heads_at(c.d, c.sp ? c.sp->ranks() : 1); }

}  // namespace

std::int64_t weight_elems(const DecoderLayerDims& d) {
  const std::int64_t h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  return 2 * h + HD * h + 2 * KD * h + h * HD + 3 * F * h + (d.qk_norm ? 2 * d.D : 0);
}

LayerWeights alloc_weights(BufferSet& b, const DecoderLayerDims& d) {
  const std::int64_t h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  LayerWeights w;
  w.w1 = b.take<bf16_t>(h), w.wq = b.take<bf16_t>(HD * h), w.wk = b.take<bf16_t>(KD * h), w.wv = b.take<bf16_t>(KD * h);
  w.wo = b.take<bf16_t>(h * HD), w.w2 = b.take<bf16_t>(h), w.wg = b.take<bf16_t>(F * h), w.wu = b.take<bf16_t>(F * h);
  w.wd = b.take<bf16_t>(h * F);
  if (d.qk_norm) w.wqn = b.take<bf16_t>(d.D), w.wkn = b.take<bf16_t>(d.D);
  return w;
}

LayerGrads alloc_grads(BufferSet& b, const DecoderLayerDims& d) {
  const std::int64_t h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  LayerGrads g;
  g.dwq = b.take<bf16_t>(HD * h), g.dwk = b.take<bf16_t>(KD * h), g.dwv = b.take<bf16_t>(KD * h);
  g.dwo = b.take<bf16_t>(h * HD), g.dwg = b.take<bf16_t>(F * h), g.dwu = b.take<bf16_t>(F * h);
  g.dwd = b.take<bf16_t>(h * F), g.dw1 = b.take<float>(h), g.dw2 = b.take<float>(h);
  if (d.qk_norm) g.dwqn = b.take<float>(d.D), g.dwkn = b.take<float>(d.D);
  return g;
}

std::int64_t mlp_rows(const DecoderLayerDims& d) { return tiled_mlp(d) ? torch_chunk_sizes(d.T, d.mlp_shards).front() : d.T; }

LayerActs alloc_acts(BufferSet& b, const DecoderLayerDims& d, int sp) {
  const std::int64_t T = d.T, h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  LayerActs a;
  a.n1 = b.take<bf16_t>(T * h), a.q = b.take<bf16_t>(T * HD), a.k = b.take<bf16_t>(T * KD), a.v = b.take<bf16_t>(T * KD);
  a.o = b.take<bf16_t>(T * HD), a.h1 = b.take<bf16_t>(T * h), a.n2 = b.take<bf16_t>(T * h);
  if (!tiled_mlp(d)) a.g = b.take<bf16_t>(T * F), a.u = b.take<bf16_t>(T * F), a.act = b.take<bf16_t>(T * F);
  else a.g = a.u = a.act = nullptr;
  a.r1 = b.take<float>(T), a.r2 = b.take<float>(T), a.lse = b.take<float>(d.H * T);
  if (d.qk_norm) {
    a.qp = b.take<bf16_t>(T * HD), a.kp = b.take<bf16_t>(T * KD);
    a.rq = b.take<float>(T * d.H), a.rk = b.take<float>(T * d.H_kv);
  }
  if (sp > 1) {
    const Heads x = heads_at(d, sp);
    a.qh = b.take<bf16_t>(x.S * x.H_l * d.D), a.kh = b.take<bf16_t>(x.S * x.K_l * d.D), a.vh = b.take<bf16_t>(x.S * x.K_l * d.D);
    a.oh = b.take<bf16_t>(x.S * x.H_l * d.D);
  }
  return a;
}

LayerScratch alloc_scratch(BufferSet& b, const DecoderLayerDims& d, kernels::AttnKernel attn, int sp) {
  const std::int64_t T = d.T, h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  const std::int64_t Tm = mlp_rows(d);
  LayerScratch s;
  s.dact = b.take<bf16_t>(Tm * F), s.dg = b.take<bf16_t>(Tm * F), s.du = b.take<bf16_t>(Tm * F);
  if (tiled_mlp(d)) s.tg = b.take<bf16_t>(Tm * F), s.tu = b.take<bf16_t>(Tm * F), s.tact = b.take<bf16_t>(Tm * F);
  s.dn = b.take<bf16_t>(T * h), s.tmp_h = b.take<bf16_t>(T * h), s.dh1 = b.take<bf16_t>(T * h);
  s.do_ = b.take<bf16_t>(T * HD), s.dq = b.take<bf16_t>(T * HD), s.dk = b.take<bf16_t>(T * KD), s.dv = b.take<bf16_t>(T * KD);
  s.norm_ws = b.take<unsigned char>(static_cast<std::int64_t>(kernels::rmsnorm_bwd_workspace_bytes(T, h)));
  const Heads x = heads_at(d, sp);
  s.attn_ws = b.take<unsigned char>(static_cast<std::int64_t>(kernels::attn_bwd_workspace_bytes(attn, 1, x.S, x.H_l, x.K_l, d.D)));
  if (d.qk_norm) {
    s.dqp = b.take<bf16_t>(T * HD), s.dkp = b.take<bf16_t>(T * KD);
    s.head_norm_ws = b.take<unsigned char>(static_cast<std::int64_t>(kernels::rmsnorm_bwd_workspace_bytes(T * d.H, d.D)));
  }
  if (sp > 1) {
    s.doh = b.take<bf16_t>(x.S * x.H_l * d.D), s.dqh = b.take<bf16_t>(x.S * x.H_l * d.D);
    s.dkh = b.take<bf16_t>(x.S * x.K_l * d.D), s.dvh = b.take<bf16_t>(x.S * x.K_l * d.D);
  }
  return s;
}

void upload_weights(const LayerWeights& w, const DecoderLayerDims& d, const DecoderLayerParams<std::vector<core::bf16>>& p) {
  const std::int64_t h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  upload(w.w1, p.w1, h), upload(w.wq, p.wq, HD * h), upload(w.wk, p.wk, KD * h), upload(w.wv, p.wv, KD * h);
  upload(w.wo, p.wo, h * HD), upload(w.w2, p.w2, h), upload(w.wg, p.wg, F * h), upload(w.wu, p.wu, F * h);
  upload(w.wd, p.wd, h * F);
  if (d.qk_norm) upload(w.wqn, p.wqn, d.D), upload(w.wkn, p.wkn, d.D);
}

DecoderLayerParams<std::vector<double>> download_grads(const LayerGrads& g, const DecoderLayerDims& d) {
  const std::int64_t h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  DecoderLayerParams<std::vector<double>> r{download_doubles(g.dw1, h),      download_doubles(g.dwq, HD * h),
                                             download_doubles(g.dwk, KD * h), download_doubles(g.dwv, KD * h),
                                             download_doubles(g.dwo, h * HD), download_doubles(g.dw2, h),
                                             download_doubles(g.dwg, F * h),  download_doubles(g.dwu, F * h),
                                             download_doubles(g.dwd, h * F)};
  if (d.qk_norm) r.wqn = download_doubles(g.dwqn, d.D), r.wkn = download_doubles(g.dwkn, d.D);
  return r;
}

void layer_forward(const LayerCtx& c, const LayerWeights& w, const LayerActs& a, const LayerScratch& sc,
                   const bf16_t* x, bf16_t* y, Pass pass, cudaStream_t s) {
  const DecoderLayerDims& d = c.d;
  const std::int64_t T = d.T, h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  Gemm& gemm = *c.gemm;
  mark(c, LayerOp::norm, pass, s);
  CUDA_CHECK(kernels::rmsnorm_fwd(x, w.w1, a.n1, a.r1, T, h, float(d.eps), s));
  mark(c, LayerOp::gemm_qkv, pass, s);
  gemm.forward(a.n1, w.wq, d.qk_norm ? a.qp : a.q, T, HD, h, s);
  gemm.forward(a.n1, w.wk, d.qk_norm ? a.kp : a.k, T, KD, h, s);
  gemm.forward(a.n1, w.wv, a.v, T, KD, h, s);
  if (d.qk_norm) {  // Qwen3's head norms: rows of D values, one per (token, head)
    mark(c, LayerOp::norm, pass, s);
    CUDA_CHECK(kernels::rmsnorm_fwd(a.qp, w.wqn, a.q, a.rq, T * d.H, d.D, float(d.eps), s));
    CUDA_CHECK(kernels::rmsnorm_fwd(a.kp, w.wkn, a.k, a.rk, T * d.H_kv, d.D, float(d.eps), s));
  }
  mark(c, LayerOp::rope_add, pass, s);
  CUDA_CHECK(kernels::rope(a.q, c.cos, c.sin, T, d.H, d.D, false, s));
  CUDA_CHECK(kernels::rope(a.k, c.cos, c.sin, T, d.H_kv, d.D, false, s));
  const Heads hx = heads_of(c);
  if (c.sp) {
    mark_phase(c.marks, core::a2a_qkv_phase(pass), s);
    c.sp->run(Direction::seq_to_head, {{hx.q, a.q, a.qh}, {hx.kv, a.k, a.kh}, {hx.kv, a.v, a.vh}}, s);
  }
  mark(c, LayerOp::attn, pass, s);
  kernels::AttnFwdParams p;
  p.q = c.sp ? a.qh : a.q, p.k = c.sp ? a.kh : a.k, p.v = c.sp ? a.vh : a.v, p.o = c.sp ? a.oh : a.o, p.lse = a.lse;
  p.B = 1, p.S = hx.S, p.H = hx.H_l, p.H_kv = hx.K_l, p.D = d.D, p.causal = true;
  p.scale = float(1.0 / std::sqrt(double(d.D)));
  CUDA_CHECK(kernels::attn_fwd(c.attn, p, s));
  if (c.sp) {
    mark_phase(c.marks, core::a2a_out_phase(pass), s);
    c.sp->run(Direction::head_to_seq, {{hx.q, a.oh, a.o}}, s);
  }
  mark(c, LayerOp::gemm_o, pass, s);
  gemm.forward(a.o, w.wo, sc.tmp_h, T, h, HD, s);
  mark(c, LayerOp::rope_add, pass, s);
  CUDA_CHECK(kernels::add(x, sc.tmp_h, a.h1, T * h, s));
  mark(c, LayerOp::norm, pass, s);
  CUDA_CHECK(kernels::rmsnorm_fwd(a.h1, w.w2, a.n2, a.r2, T, h, float(d.eps), s));
  if (tiled_mlp(d)) {  // TiledMLP: nothing of the MLP is kept; the backward reruns each shard
    if (pass == Pass::recompute) return;
    mark(c, LayerOp::mlp, pass, s);
    std::int64_t t0 = 0;
    for (const std::int64_t Ts : torch_chunk_sizes(T, d.mlp_shards)) {
      gemm.forward(a.n2 + t0 * h, w.wg, sc.tg, Ts, F, h, s);
      gemm.forward(a.n2 + t0 * h, w.wu, sc.tu, Ts, F, h, s);
      CUDA_CHECK(kernels::swiglu_fwd(sc.tg, sc.tu, sc.tact, Ts * F, s));
      gemm.forward(sc.tact, w.wd, sc.tmp_h + t0 * h, Ts, h, F, s);
      t0 += Ts;
    }
  } else {
    mark(c, LayerOp::mlp, pass, s);
    gemm.forward(a.n2, w.wg, a.g, T, F, h, s);
    gemm.forward(a.n2, w.wu, a.u, T, F, h, s);
    CUDA_CHECK(kernels::swiglu_fwd(a.g, a.u, a.act, T * F, s));
    if (pass == Pass::recompute) return;  // act is the last tensor the backward reads (down_proj's input)
    gemm.forward(a.act, w.wd, sc.tmp_h, T, h, F, s);
  }
  mark(c, LayerOp::rope_add, pass, s);
  CUDA_CHECK(kernels::add(a.h1, sc.tmp_h, y, T * h, s));
}

void layer_backward(const LayerCtx& c, const LayerWeights& w, const LayerGrads& g, const LayerActs& a,
                    const LayerScratch& sc, const bf16_t* x, const bf16_t* dy, bf16_t* dx, cudaStream_t s) {
  const DecoderLayerDims& d = c.d;
  const std::int64_t T = d.T, h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  Gemm& gemm = *c.gemm;
  const Pass pass = Pass::bwd;
  // the MLP (TiledMLP: shard by shard, the shard's forward rerun first; weight gradients summed over shards)
  const bool tiled = tiled_mlp(d);
  std::int64_t t0 = 0;
  const std::vector<std::int64_t> shards = tiled ? torch_chunk_sizes(T, d.mlp_shards) : std::vector<std::int64_t>{T};
  for (const std::int64_t Ts : shards) {
    const bf16_t *n2 = a.n2 + t0 * h, *dys = dy + t0 * h;
    const bf16_t *gate = a.g, *up = a.u, *act = a.act;
    if (tiled) {
      mark_phase(c.marks, core::kMlpTiledRecompute, s);
      gemm.forward(n2, w.wg, sc.tg, Ts, F, h, s);
      gemm.forward(n2, w.wu, sc.tu, Ts, F, h, s);
      CUDA_CHECK(kernels::swiglu_fwd(sc.tg, sc.tu, sc.tact, Ts * F, s));
      gate = sc.tg, up = sc.tu, act = sc.tact;
    }
    const float beta = t0 > 0 ? 1.f : 0.f;  // the weight gradients: the first shard writes, the rest add
    mark(c, LayerOp::mlp, pass, s);
    // the first shard: the weight gradients are written next, so free for choosing the later shards' accumulating GEMMs
    // (no later shard is larger; dwu's problem is dwg's)
    const std::vector<std::int64_t> acc = t0 == 0 ? accumulating_shard_sizes(shards) : std::vector<std::int64_t>{};
    gemm.input_grad(dys, w.wd, sc.dact, Ts, h, F, s);
    for (const std::int64_t Ta : acc) gemm.tune_accumulating_weight_grad(dys, act, g.dwd, Ta, h, F, s);
    gemm.weight_grad(dys, act, g.dwd, Ts, h, F, beta, s);
    CUDA_CHECK(kernels::swiglu_bwd(sc.dact, gate, up, sc.dg, sc.du, Ts * F, s));
    gemm.input_grad(sc.dg, w.wg, sc.dn + t0 * h, Ts, F, h, s);
    gemm.input_grad(sc.du, w.wu, sc.tmp_h + t0 * h, Ts, F, h, s);
    for (const std::int64_t Ta : acc) gemm.tune_accumulating_weight_grad(sc.dg, n2, g.dwg, Ta, F, h, s);
    gemm.weight_grad(sc.dg, n2, g.dwg, Ts, F, h, beta, s);
    gemm.weight_grad(sc.du, n2, g.dwu, Ts, F, h, beta, s);
    t0 += Ts;
  }
  CUDA_CHECK(kernels::add(sc.dn, sc.tmp_h, sc.dn, T * h, s));
  // the post-attention norm and the residual
  mark(c, LayerOp::norm, pass, s);
  CUDA_CHECK(kernels::rmsnorm_bwd(sc.dn, a.h1, w.w2, a.r2, sc.tmp_h, g.dw2, sc.norm_ws, T, h, s));
  mark(c, LayerOp::rope_add, pass, s);
  CUDA_CHECK(kernels::add(dy, sc.tmp_h, sc.dh1, T * h, s));
  // o_proj, attention, RoPE
  mark(c, LayerOp::gemm_o, pass, s);
  gemm.input_grad(sc.dh1, w.wo, sc.do_, T, h, HD, s);
  gemm.weight_grad(sc.dh1, a.o, g.dwo, T, h, HD, 0.f, s);
  const Heads hx = heads_of(c);
  if (c.sp) {
    mark_phase(c.marks, core::a2a_out_phase(pass), s);
    c.sp->run(Direction::seq_to_head, {{hx.q, sc.do_, sc.doh}}, s);
  }
  mark(c, LayerOp::attn, pass, s);
  kernels::AttnBwdParams b;
  if (c.sp)
    b.q = a.qh, b.k = a.kh, b.v = a.vh, b.o = a.oh, b.dout = sc.doh, b.dq = sc.dqh, b.dk = sc.dkh, b.dv = sc.dvh;
  else
    b.q = a.q, b.k = a.k, b.v = a.v, b.o = a.o, b.dout = sc.do_, b.dq = sc.dq, b.dk = sc.dk, b.dv = sc.dv;
  b.lse = a.lse, b.workspace = sc.attn_ws;
  b.B = 1, b.S = hx.S, b.H = hx.H_l, b.H_kv = hx.K_l, b.D = d.D, b.causal = true;
  b.scale = float(1.0 / std::sqrt(double(d.D)));
  CUDA_CHECK(kernels::attn_bwd(c.attn, b, s));
  if (c.sp) {  // a replicated kv head's gradient: the sum over its replicas (reduce)
    mark_phase(c.marks, core::a2a_qkv_phase(pass), s);
    const bool rep = d.H_kv < hx.P;
    c.sp->run(Direction::head_to_seq, {{hx.q, sc.dqh, sc.dq}, {hx.kv, sc.dkh, sc.dk, rep}, {hx.kv, sc.dvh, sc.dv, rep}}, s);
  }
  mark(c, LayerOp::rope_add, pass, s);
  CUDA_CHECK(kernels::rope(sc.dq, c.cos, c.sin, T, d.H, d.D, true, s));
  CUDA_CHECK(kernels::rope(sc.dk, c.cos, c.sin, T, d.H_kv, d.D, true, s));
  const bf16_t *gq = sc.dq, *gk = sc.dk;  // the projections' output gradients
  if (d.qk_norm) {
    mark(c, LayerOp::norm, pass, s);
    CUDA_CHECK(kernels::rmsnorm_bwd(sc.dq, a.qp, w.wqn, a.rq, sc.dqp, g.dwqn, sc.head_norm_ws, T * d.H, d.D, s));
    CUDA_CHECK(kernels::rmsnorm_bwd(sc.dk, a.kp, w.wkn, a.rk, sc.dkp, g.dwkn, sc.head_norm_ws, T * d.H_kv, d.D, s));
    gq = sc.dqp, gk = sc.dkp;
  }
  // q, k, v projections and the input norm
  mark(c, LayerOp::gemm_qkv, pass, s);
  gemm.input_grad(gq, w.wq, sc.dn, T, HD, h, s);
  gemm.input_grad(gk, w.wk, sc.tmp_h, T, KD, h, s);
  CUDA_CHECK(kernels::add(sc.dn, sc.tmp_h, sc.dn, T * h, s));
  gemm.input_grad(sc.dv, w.wv, sc.tmp_h, T, KD, h, s);
  CUDA_CHECK(kernels::add(sc.dn, sc.tmp_h, sc.dn, T * h, s));
  gemm.weight_grad(gq, a.n1, g.dwq, T, HD, h, 0.f, s);
  gemm.weight_grad(gk, a.n1, g.dwk, T, KD, h, 0.f, s);
  gemm.weight_grad(sc.dv, a.n1, g.dwv, T, KD, h, 0.f, s);
  mark(c, LayerOp::norm, pass, s);
  CUDA_CHECK(kernels::rmsnorm_bwd(sc.dn, x, w.w1, a.r1, sc.tmp_h, g.dw1, sc.norm_ws, T, h, s));
  mark(c, LayerOp::rope_add, pass, s);
  CUDA_CHECK(kernels::add(sc.dh1, sc.tmp_h, dx, T * h, s));
}

DecoderLayer::DecoderLayer(const DecoderLayerDims& d, const DecoderLayerParams<std::vector<core::bf16>>& p,
                           const std::vector<core::bf16>& cos, const std::vector<core::bf16>& sin, Gemm& gemm,
                           kernels::AttnKernel attn)
    : arena_([] { int dev = 0; CUDA_CHECK(cudaGetDevice(&dev)); return dev; }()), bufs_(arena_) {
  const std::int64_t half = d.T * d.D / 2;
  bf16_t* c = bufs_.take<bf16_t>(half);
  bf16_t* s = bufs_.take<bf16_t>(half);
  upload(c, cos, half), upload(s, sin, half);
  ctx_ = LayerCtx{d, &gemm, attn, c, s, nullptr};
  w_ = alloc_weights(bufs_, d), g_ = alloc_grads(bufs_, d), a_ = alloc_acts(bufs_, d), s_ = alloc_scratch(bufs_, d, attn);
  upload_weights(w_, d, p);
}

void DecoderLayer::forward(const bf16_t* x, bf16_t* y, cudaStream_t s) { layer_forward(ctx_, w_, a_, s_, x, y, Pass::fwd, s); }

void DecoderLayer::backward(const bf16_t* x, const bf16_t* dy, bf16_t* dx, cudaStream_t s) {
  layer_backward(ctx_, w_, g_, a_, s_, x, dy, dx, s);
}

}  // namespace ulysses::runtime::cuda
