#include "runtime/cuda/bench.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <tuple>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/attention.hpp"
#include "kernels/attention_flash_tuning.hpp"
#include "kernels/testdata.cuh"
#include "runtime/checks.hpp"
#include "runtime/cpu/bf16.hpp"
#include "runtime/cuda/block_runner.hpp"
#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/report.hpp"
#include "runtime/cuda/tracing.hpp"
#include "runtime/reference_attention.hpp"

namespace ulysses::runtime::cuda {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One rank's rows: name, bytes/flops, wrong, per-iteration seconds.
struct RankRows {
  std::vector<BenchRow> rows;
  std::vector<std::vector<double>> times;
};

std::string pack_rows(const RankRows& r) {
  Writer w;
  w.pod<std::uint64_t>(r.rows.size());
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const BenchRow& b = r.rows[i];
    w.str(b.name), w.pod(b.bytes_per_rank), w.pod(b.flops), w.pod(b.wrong), w.str(b.note), w.vec(r.times[i]);
  }
  return std::move(w.out);
}

RankRows unpack_rows(const std::string& s) {
  Reader rd(s);
  RankRows r;
  const auto n = rd.pod<std::uint64_t>();
  for (std::uint64_t i = 0; i < n; ++i) {
    BenchRow b;
    b.name = rd.str(), b.bytes_per_rank = rd.pod<std::int64_t>(), b.flops = rd.pod<double>(), b.wrong = rd.pod<std::int64_t>();
    b.note = rd.str();
    r.rows.push_back(b);
    r.times.push_back(rd.vec<double>());
  }
  return r;
}

BenchResult aggregate(Cluster& cl, const std::vector<std::string>& raw) {
  BenchResult out;
  out.device = cl.describe();
  std::vector<RankRows> ranks;
  for (const auto& s : raw) ranks.push_back(unpack_rows(s));
  for (std::size_t i = 0; i < ranks[0].rows.size(); ++i) {
    BenchRow b = ranks[0].rows[i];
    b.median_s = 0, b.max_s = 0;
    std::int64_t wrong = 0;
    for (const auto& r : ranks) {
      b.median_s = std::max(b.median_s, median(r.times[i]));
      for (double t : r.times[i]) b.max_s = std::max(b.max_s, t);
      wrong += std::max<std::int64_t>(r.rows[i].wrong, 0);
    }
    b.wrong = ranks[0].rows[i].wrong < 0 ? -1 : wrong;
    out.rows.push_back(b);
  }
  out.launcher_follower = cl.launcher_mode() && cl.my_rank() != 0;
  return out;
}

// Times fn (enqueued on ctx.stream and/or joined into it) warmup + iters times, ranks aligned.
template <class F>
std::vector<double> time_it(RankCtx& ctx, BlockRunner& run, const RunOptions& opt, F&& fn) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int it = 0; it < opt.warmup + opt.iters; ++it) {
    run.barrier();
    CUDA_CHECK(cudaEventRecord(a, ctx.stream));
    fn();
    CUDA_CHECK(cudaEventRecord(b, ctx.stream));
    ctx.wait(ctx.stream, "a timed benchmark iteration");
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (it >= opt.warmup) t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a), cudaEventDestroy(b);
  return t;
}

// Runs a bare NCCL call enqueued on comm_stream as if on ctx.stream (joined both ways).
template <class F>
void on_comm(RankCtx& ctx, F&& fn) {
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(e, ctx.stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.comm_stream, e, 0));
  fn();
  CUDA_CHECK(cudaEventRecord(e, ctx.comm_stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, e, 0));
  CUDA_CHECK(cudaEventDestroy(e));
}

std::int64_t read_counter(RankCtx& ctx, unsigned long long* w) {
  unsigned long long h = 0;
  CUDA_CHECK(cudaMemcpyAsync(&h, w, sizeof h, cudaMemcpyDeviceToHost, ctx.stream));
  ctx.wait(ctx.stream, "a validation count");
  return static_cast<std::int64_t>(h);
}

std::string exchange_rank(RankCtx& ctx, const BlockShape& s, const RunOptions& opt, const std::vector<int>& slices) {
  DeviceArena arena(ctx.device);
  BlockRunner run(ctx, arena, s, {kernels::AttnKernel::reference, false}, 1);
  run.fill_inputs(opt.seed);
  const core::Dims qx{s.B, s.S, s.P, s.H, s.D}, kvx{s.B, s.S, s.P, s.H_kv, s.D};
  const core::Dims kv_travel = s.H_kv < s.P && s.kv_strategy == KvStrategy::replicate ? core::Dims{s.B, s.S, s.P, s.P, s.D} : kvx;
  const std::int64_t elems = s.P * (core::chunk_elems(qx) + 2 * core::chunk_elems(kv_travel));
  unsigned long long* w = run.counter();
  RankRows out;
  Exchanger& ex = run.exchanger();
  if (ex.transport() == "p2p") {
    run.poison_outputs();
    run.barrier();
    run.phase(0);
    const auto checks = run.device_checks(opt.seed, false);
    out.rows.push_back({"ulysses q,k,v p2p (fused pack + direct stores, one kernel)", elems * 2, 0, 0, 0,
                        checks[0].wrong + checks[1].wrong + checks[2].wrong, ""});
    out.times.push_back(time_it(ctx, run, opt, [&] { run.phase(0); }));
  }
  ex.force_nccl(true);  // the NCCL path next to it
  for (int k : slices) {
    run.set_slices(k);
    run.poison_outputs();
    run.barrier();
    run.phase(0);
    const auto checks = run.device_checks(opt.seed, false);  // q, k, v bit-exact are the first three
    std::int64_t wrong = checks[0].wrong + checks[1].wrong + checks[2].wrong;
    out.rows.push_back({fmt::format("ulysses q,k,v nccl (pack+group+unpack, slices={})", k), elems * 2, 0, 0, 0, wrong, ""});
    out.times.push_back(time_it(ctx, run, opt, [&] { run.phase(0); }));
  }
  ex.force_nccl(false);
  if (ctx.world > 1) {
    void* send = run.exchanger().send_buffer();
    void* recv = run.exchanger().recv_buffer();
    const std::int64_t count = elems / s.P;
    auto validate = [&](auto&& call) {
      CUDA_CHECK(kernels::fill_a2a_send_bf16(send, elems, ctx.rank, opt.seed, ctx.stream));
      CUDA_CHECK(cudaMemsetAsync(recv, 0xFF, static_cast<std::size_t>(elems * 2), ctx.stream));
      CUDA_CHECK(cudaMemsetAsync(w, 0, sizeof *w, ctx.stream));
      run.barrier();
      on_comm(ctx, call);
      CUDA_CHECK(kernels::count_wrong_a2a_bf16(recv, count, ctx.world, ctx.rank, opt.seed, w, ctx.stream));
      return read_counter(ctx, w);
    };
    auto a2a = [&] { run.exchanger().bare_alltoall(elems); };
    const std::int64_t w1 = validate(a2a);
    out.rows.push_back({"nccl ncclAlltoAll (bare, same bytes)", elems * 2, 0, 0, 0, w1, ""});
    out.times.push_back(time_it(ctx, run, opt, [&] { on_comm(ctx, a2a); }));
    auto grp = [&] { run.exchanger().bare_sendrecv(elems); };
    const std::int64_t w2 = validate(grp);
    out.rows.push_back({"nccl grouped send/recv (bare, same bytes)", elems * 2, 0, 0, 0, w2, ""});
    out.times.push_back(time_it(ctx, run, opt, [&] { on_comm(ctx, grp); }));
  }
  return pack_rows(out);
}

// ---- attention ----

struct AttnBufs {
  DevBuf<std::uint16_t> q, k, v, o, dout, dq, dk, dv;
  DevBuf<float> lse;
  DevBuf<std::uint8_t> ws;
};

// with_reference: the workspace is large enough for the reference kernel too.
AttnBufs attn_bufs(DeviceArena& a, std::int64_t B, std::int64_t S, std::int64_t Hq, std::int64_t Hkv, std::int64_t D,
                   bool with_reference = true) {
  AttnBufs b;
  for (auto* x : {&b.q, &b.o, &b.dout, &b.dq}) *x = DevBuf<std::uint16_t>(a, B * S * Hq * D);
  for (auto* x : {&b.k, &b.v, &b.dk, &b.dv}) *x = DevBuf<std::uint16_t>(a, B * S * Hkv * D);
  b.lse = DevBuf<float>(a, B * Hq * S);
  std::size_t ws = kernels::attn_bwd_workspace_bytes(kernels::AttnKernel::flash, B, S, Hq, Hkv, D);
  if (with_reference) ws = std::max(ws, kernels::attn_bwd_workspace_bytes(kernels::AttnKernel::reference, B, S, Hq, Hkv, D));
  b.ws = DevBuf<std::uint8_t>(a, static_cast<std::int64_t>(ws));
  return b;
}

// All-ones bytes (NaN in bf16 and fp32) in every output and the workspace: what a kernel does
// not write stays NaN and fails the checks.
void poison_outputs(AttnBufs& b, cudaStream_t st) {
  for (auto* x : {&b.o, &b.dq, &b.dk, &b.dv}) CUDA_CHECK(cudaMemsetAsync(x->get(), 0xFF, static_cast<std::size_t>(x->bytes()), st));
  CUDA_CHECK(cudaMemsetAsync(b.lse.get(), 0xFF, static_cast<std::size_t>(b.lse.bytes()), st));
  if (b.ws.bytes() > 0) CUDA_CHECK(cudaMemsetAsync(b.ws.get(), 0xFF, static_cast<std::size_t>(b.ws.bytes()), st));
}

void fill_attn(AttnBufs& b, std::int64_t B, std::int64_t S, std::int64_t Hq, std::int64_t Hkv, std::int64_t D,
               std::uint64_t seed, cudaStream_t st) {
  const core::Dims qd{B, S, 1, Hq, D}, kd{B, S, 1, Hkv, D};  // P = 1: the shard is the whole tensor
  CUDA_CHECK(kernels::fill_seq_shard_bf16(b.q.get(), qd, 0, seed, kernels::kTensorQ, st));
  CUDA_CHECK(kernels::fill_seq_shard_bf16(b.k.get(), kd, 0, seed, kernels::kTensorK, st));
  CUDA_CHECK(kernels::fill_seq_shard_bf16(b.v.get(), kd, 0, seed, kernels::kTensorV, st));
  CUDA_CHECK(kernels::fill_seq_shard_bf16(b.dout.get(), qd, 0, seed, kernels::kTensorDout, st));
}

kernels::AttnFwdParams fwd_params(AttnBufs& b, std::int64_t B, std::int64_t S, std::int64_t Hq, std::int64_t Hkv, std::int64_t D, bool causal) {
  kernels::AttnFwdParams p;
  p.q = reinterpret_cast<const __nv_bfloat16*>(b.q.get()), p.k = reinterpret_cast<const __nv_bfloat16*>(b.k.get());
  p.v = reinterpret_cast<const __nv_bfloat16*>(b.v.get()), p.o = reinterpret_cast<__nv_bfloat16*>(b.o.get());
  p.lse = b.lse.get();
  p.B = B, p.S = S, p.Hq = Hq, p.Hkv = Hkv, p.D = D, p.causal = causal, p.scale = 1.0f / std::sqrt(static_cast<float>(D));
  return p;
}

kernels::AttnBwdParams bwd_params(AttnBufs& b, const kernels::AttnFwdParams& f) {
  kernels::AttnBwdParams p;
  p.q = f.q, p.k = f.k, p.v = f.v, p.o = f.o, p.lse = f.lse;
  p.dout = reinterpret_cast<const __nv_bfloat16*>(b.dout.get());
  p.dq = reinterpret_cast<__nv_bfloat16*>(b.dq.get()), p.dk = reinterpret_cast<__nv_bfloat16*>(b.dk.get());
  p.dv = reinterpret_cast<__nv_bfloat16*>(b.dv.get());
  p.workspace = b.ws.get();
  p.B = f.B, p.S = f.S, p.Hq = f.Hq, p.Hkv = f.Hkv, p.D = f.D, p.causal = f.causal, p.scale = f.scale;
  return p;
}

std::vector<float> widen_dev(const DevBuf<std::uint16_t>& x) {
  std::vector<std::uint16_t> h(static_cast<std::size_t>(x.size()));
  CUDA_CHECK(cudaMemcpy(h.data(), x.get(), static_cast<std::size_t>(x.bytes()), cudaMemcpyDeviceToHost));
  std::vector<float> f(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) f[i] = cpu::bf16_to_float(h[i]);
  return f;
}

// The check_close tolerance of an attention output: kBf16AttentionTol; the flash kernel's
// gradients twice that (as tests/gpu/test_attention.cpp): like FlashAttention-2 it rounds P and
// dS to bf16 before the backward's tensor-core MMAs, which costs about 2x the reference
// kernel's (fp32 P) error in dq, dk, dv. (A CPU emulation of those rounding points on the
// sweep's inputs reproduces the 1x-rule failures the H200 showed: dk/dv only, worst 1.1-1.5x.)
double attention_tol(kernels::AttnKernel kind, const std::string& name) {
  return kind == kernels::AttnKernel::flash && name != "o" ? 2 * kBf16AttentionTol : kBf16AttentionTol;
}

// #wrong of fwd (o) + bwd (dq, dk, dv) of `kind` against the fp64 oracle at a small S.
std::int64_t validate_attention(RankCtx& ctx, kernels::AttnKernel kind, std::int64_t B, std::int64_t S, std::int64_t Hq,
                                std::int64_t Hkv, std::int64_t D, bool causal, std::uint64_t seed, std::string& note,
                                double* worst_out = nullptr, std::string* per_output_wrong = nullptr) {
  DeviceArena arena(ctx.device);
  AttnBufs b = attn_bufs(arena, B, S, Hq, Hkv, D);
  fill_attn(b, B, S, Hq, Hkv, D, seed, ctx.stream);
  poison_outputs(b, ctx.stream);
  const auto f = fwd_params(b, B, S, Hq, Hkv, D, causal);
  cudaError_t e = kernels::attn_fwd(kind, f, ctx.stream);
  if (e == cudaSuccess) e = kernels::attn_bwd(kind, bwd_params(b, f), ctx.stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    note = std::string("not available: ") + cudaGetErrorString(e);
    return -1;
  }
  ctx.wait(ctx.stream, "attention validation");
  const std::vector<float> q = widen_dev(b.q), k = widen_dev(b.k), v = widen_dev(b.v), dout = widen_dev(b.dout);
  std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end()), gd(dout.begin(), dout.end());
  const AttnDims a{B, S, Hq, Hkv, D, causal};
  std::vector<double> o(qd.size()), lse(static_cast<std::size_t>(B * Hq * S)), dq(qd.size()), dk(kd.size()), dv(vd.size());
  attention_forward<double>(a, qd.data(), kd.data(), vd.data(), o.data(), lse.data());
  const std::vector<float> o_gpu = widen_dev(b.o);  // backward from the kernel's rounded o (delta = dout . o)
  const std::vector<double> od(o_gpu.begin(), o_gpu.end());
  attention_backward<double>(a, qd.data(), kd.data(), vd.data(), od.data(), lse.data(), gd.data(), dq.data(), dk.data(), dv.data());
  std::int64_t wrong = 0;
  double worst = 0;  // in units of each output's tolerance
  std::string per;
  for (auto [got, ref, name] : {std::tuple{&b.o, &o, "o"}, {&b.dq, &dq, "dq"}, {&b.dk, &dk, "dk"}, {&b.dv, &dv, "dv"}}) {
    const std::vector<float> g = widen_dev(*got);
    const double tol = attention_tol(kind, name);
    const Check c = check_close(name, g.data(), ref->data(), static_cast<std::int64_t>(g.size()), tol);
    wrong += c.wrong;
    worst = std::max(worst, c.max_abs_err / tol);
    per += fmt::format("{}{} {}", per.empty() ? "" : ", ", name, c.wrong);
  }
  note = fmt::format("checked at S={} vs fp64: #wrong {}; worst {:.2f} of the tolerance", S, per, worst);
  if (worst_out) *worst_out = worst;
  if (per_output_wrong) *per_output_wrong = per;
  return wrong;
}

std::string attention_rank(RankCtx& ctx, const BlockShape& s, const RunOptions& opt) {
  const std::int64_t Hq = s.H / s.P, Hkv = core::heads_per_rank(s.H_kv, s.P);
  const std::int64_t S_check = std::min<std::int64_t>(s.S, 512);
  const AttnDims full{s.B, s.S, Hq, Hkv, s.D, s.causal};
  RankRows out;
  DeviceArena arena(ctx.device);
  AttnBufs b = attn_bufs(arena, s.B, s.S, Hq, Hkv, s.D);
  fill_attn(b, s.B, s.S, Hq, Hkv, s.D, opt.seed, ctx.stream);
  for (auto [kind, kname] : {std::pair{kernels::AttnKernel::flash, "flash"}, {kernels::AttnKernel::reference, "reference"}}) {
    std::string note;
    const std::int64_t wrong = validate_attention(ctx, kind, s.B, S_check, Hq, Hkv, s.D, s.causal, opt.seed, note);
    const auto f = fwd_params(b, s.B, s.S, Hq, Hkv, s.D, s.causal);
    const auto bw = bwd_params(b, f);
    std::vector<double> tf, tb;
    if (wrong >= 0) {
      cudaEvent_t e0, e1, e2;
      CUDA_CHECK(cudaEventCreate(&e0));
      CUDA_CHECK(cudaEventCreate(&e1));
      CUDA_CHECK(cudaEventCreate(&e2));
      for (int it = 0; it < opt.warmup + opt.iters; ++it) {
        CUDA_CHECK(cudaEventRecord(e0, ctx.stream));
        CUDA_CHECK(kernels::attn_fwd(kind, f, ctx.stream));
        CUDA_CHECK(cudaEventRecord(e1, ctx.stream));
        CUDA_CHECK(kernels::attn_bwd(kind, bw, ctx.stream));
        CUDA_CHECK(cudaEventRecord(e2, ctx.stream));
        ctx.wait(ctx.stream, std::string("attention ") + kname);
        float a = 0, c = 0;
        CUDA_CHECK(cudaEventElapsedTime(&a, e0, e1));
        CUDA_CHECK(cudaEventElapsedTime(&c, e1, e2));
        if (it >= opt.warmup) tf.push_back(a * 1e-3), tb.push_back(c * 1e-3);
      }
      cudaEventDestroy(e0), cudaEventDestroy(e1), cudaEventDestroy(e2);
    }
    out.rows.push_back({fmt::format("attn.fwd {}", kname), 0, attention_fwd_flops(full), 0, 0, wrong, note});
    out.times.push_back(tf);
    out.rows.push_back({fmt::format("attn.bwd {}", kname), 0, attention_bwd_flops(full), 0, 0, wrong, note});
    out.times.push_back(tb);
  }
  return pack_rows(out);
}

// ---- attention sweep ----

// Rows [S, D] of head `h` of a [1, S, H, D] bf16 tensor, widened to double.
std::vector<double> head_rows(const DevBuf<std::uint16_t>& x, std::int64_t S, std::int64_t H, std::int64_t D, std::int64_t h) {
  std::vector<std::uint16_t> raw(static_cast<std::size_t>(S * D));
  CUDA_CHECK(cudaMemcpy2D(raw.data(), D * 2, x.get() + h * D, H * D * 2, D * 2, S, cudaMemcpyDeviceToHost));
  std::vector<double> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = cpu::bf16_to_float(raw[i]);
  return out;
}

// Row i of head h of a [1, S, H, D] bf16 tensor.
std::vector<double> one_row(const DevBuf<std::uint16_t>& x, std::int64_t H, std::int64_t D, std::int64_t h, std::int64_t i) {
  std::vector<std::uint16_t> raw(static_cast<std::size_t>(D));
  CUDA_CHECK(cudaMemcpy(raw.data(), x.get() + (i * H + h) * D, static_cast<std::size_t>(D * 2), cudaMemcpyDeviceToHost));
  std::vector<double> out(raw.size());
  for (std::size_t k = 0; k < raw.size(); ++k) out[k] = cpu::bf16_to_float(raw[k]);
  return out;
}

double dot(const double* a, const double* b, std::int64_t n) {
  double s = 0;
  for (std::int64_t k = 0; k < n; ++k) s += a[k] * b[k];
  return s;
}

// Spot rows at full S (reference_attention.hpp's formulas for one query row, in fp64, from the
// same bf16 inputs; delta from the kernel's rounded o as the oracle does): o and dq through
// check_close (attention_tol), lse within 1e-3 * (1 + |lse|). Raises *worst to the worst o/dq
// error in units of its tolerance; returns #wrong.
std::int64_t spot_rows_wrong(AttnBufs& b, const AttnSweepPoint& p, double* worst, double* worst_lse) {
  const std::int64_t S = p.S, Hq = p.Hq, Hkv = p.Hkv, D = p.D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<std::int64_t> rows{0, S / 3, std::min(S - 1, 2 * S / 3 + 1), S - 1};
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  std::vector<std::int64_t> heads{0, Hq - 1};
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  std::vector<float> got_o, got_dq;
  std::vector<double> ref_o, ref_dq;
  std::int64_t wrong_lse = 0;
  *worst_lse = 0;
  for (std::int64_t h : heads) {
    const std::int64_t g = h / (Hq / Hkv);
    const std::vector<double> k = head_rows(b.k, S, Hkv, D, g), v = head_rows(b.v, S, Hkv, D, g);
    for (std::int64_t i : rows) {
      const std::vector<double> q = one_row(b.q, Hq, D, h, i), dout = one_row(b.dout, Hq, D, h, i);
      const std::vector<double> o_k = one_row(b.o, Hq, D, h, i), dq_k = one_row(b.dq, Hq, D, h, i);
      const std::int64_t n = p.causal ? i + 1 : S;
      std::vector<double> s(static_cast<std::size_t>(n));
      double m = -INFINITY;
      for (std::int64_t j = 0; j < n; ++j) m = std::max(m, s[j] = scale * dot(q.data(), &k[j * D], D));
      double sum = 0;
      for (std::int64_t j = 0; j < n; ++j) sum += std::exp(s[j] - m);
      const double lse = m + std::log(sum);
      const double delta = dot(dout.data(), o_k.data(), D);
      std::vector<double> o(D, 0.0), dq(D, 0.0);
      for (std::int64_t j = 0; j < n; ++j) {
        const double pj = std::exp(s[j] - lse);
        const double ds = pj * (dot(dout.data(), &v[j * D], D) - delta);
        for (std::int64_t d = 0; d < D; ++d) o[d] += pj * v[j * D + d], dq[d] += scale * ds * k[j * D + d];
      }
      float lse_k = 0;
      CUDA_CHECK(cudaMemcpy(&lse_k, b.lse.get() + h * S + i, sizeof lse_k, cudaMemcpyDeviceToHost));
      const double e = std::abs(static_cast<double>(lse_k) - lse) / (1.0 + std::abs(lse));
      *worst_lse = std::isfinite(e) ? std::max(*worst_lse, e) : INFINITY;
      wrong_lse += !(e <= 1e-3);
      got_o.insert(got_o.end(), o_k.begin(), o_k.end()), ref_o.insert(ref_o.end(), o.begin(), o.end());
      got_dq.insert(got_dq.end(), dq_k.begin(), dq_k.end()), ref_dq.insert(ref_dq.end(), dq.begin(), dq.end());
    }
  }
  const double tol_o = attention_tol(kernels::AttnKernel::flash, "o"), tol_dq = attention_tol(kernels::AttnKernel::flash, "dq");
  const Check co = check_close("o", got_o.data(), ref_o.data(), static_cast<std::int64_t>(got_o.size()), tol_o);
  const Check cq = check_close("dq", got_dq.data(), ref_dq.data(), static_cast<std::int64_t>(got_dq.size()), tol_dq);
  *worst = std::max({*worst, co.max_abs_err / tol_o, cq.max_abs_err / tol_dq});
  return co.wrong + cq.wrong + wrong_lse;
}

// Median seconds of `launch` and the repetitions: until >= min_reps and >= min_time_s timed.
template <class F>
std::pair<double, int> time_pass(RankCtx& ctx, const AttnSweepOptions& opt, const char* what, F&& launch) {
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> t;
  double total = 0;
  while (static_cast<int>(t.size()) < opt.max_reps && (static_cast<int>(t.size()) < opt.min_reps || total < opt.min_time_s)) {
    CUDA_CHECK(cudaEventRecord(e0, ctx.stream));
    CUDA_CHECK(launch());
    CUDA_CHECK(cudaEventRecord(e1, ctx.stream));
    ctx.wait(ctx.stream, what);
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e-3), total += ms * 1e-3;
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return {median(t), static_cast<int>(t.size())};
}

struct OracleKey {
  std::int64_t S, Hq, Hkv, D;
  bool causal;
  bool operator==(const OracleKey&) const = default;
};

struct OracleResult {
  OracleKey key;
  std::int64_t wrong;
  double worst;     // in units of the tolerance
  std::string note, per_output;
};

void sweep_point(RankCtx& ctx, const AttnSweepOptions& opt, std::vector<OracleResult>& oracle_cache, AttnSweepRow& r) {
  const AttnSweepPoint& p = r.point;
  const AttnDims full{1, p.S, p.Hq, p.Hkv, p.D, p.causal};
  r.fwd_flops = attention_fwd_flops(full), r.bwd_flops = attention_bwd_flops(full);
  // 1. the fp64 oracle at a small S, same heads, head dim and mask (cached)
  const OracleKey key{std::min(p.S, opt.check_seq), p.Hq, p.Hkv, p.D, p.causal};
  auto it = std::find_if(oracle_cache.begin(), oracle_cache.end(), [&](const OracleResult& o) { return o.key == key; });
  if (it == oracle_cache.end()) {
    OracleResult o{key, 0, 0, "", ""};
    o.wrong = validate_attention(ctx, kernels::AttnKernel::flash, 1, key.S, key.Hq, key.Hkv, key.D, key.causal, opt.seed,
                                 o.note, &o.worst, &o.per_output);
    oracle_cache.push_back(o);
    it = oracle_cache.end() - 1;
  }
  if (it->wrong < 0) {
    r.status = "not supported: " + it->note;
    return;
  }
  // 2. full S: poisoned outputs, one fwd + bwd, no NaN left, spot rows vs fp64
  DeviceArena arena(ctx.device);
  AttnBufs b;
  try {
    b = attn_bufs(arena, 1, p.S, p.Hq, p.Hkv, p.D, false);
  } catch (const OutOfMemory& e) {
    const double gib = static_cast<double>((4 * p.Hq + 4 * p.Hkv) * p.S * p.D * 2 + p.Hq * p.S * 4 +
                                           static_cast<std::int64_t>(kernels::attn_bwd_workspace_bytes(
                                               kernels::AttnKernel::flash, 1, p.S, p.Hq, p.Hkv, p.D))) / (1ull << 30);
    r.status = fmt::format("out of memory (needs {:.1f} GiB of buffers)", gib);
    return;
  }
  fill_attn(b, 1, p.S, p.Hq, p.Hkv, p.D, opt.seed, ctx.stream);
  poison_outputs(b, ctx.stream);
  const auto fp = fwd_params(b, 1, p.S, p.Hq, p.Hkv, p.D, p.causal);
  const auto bp = bwd_params(b, fp);
  cudaError_t e = kernels::attn_fwd(kernels::AttnKernel::flash, fp, ctx.stream);
  if (e == cudaSuccess) e = kernels::attn_bwd(kernels::AttnKernel::flash, bp, ctx.stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    r.status = std::string("not supported: ") + cudaGetErrorString(e);
    return;
  }
  ctx.wait(ctx.stream, "attention sweep: full-S validation run");
  DevBuf<unsigned long long> cnt(arena, 1);
  CUDA_CHECK(cudaMemsetAsync(cnt.get(), 0, sizeof(unsigned long long), ctx.stream));
  for (auto* x : {&b.o, &b.dq, &b.dk, &b.dv}) CUDA_CHECK(kernels::count_nonfinite_bf16(x->get(), x->size(), cnt.get(), ctx.stream));
  const std::int64_t nonfinite = read_counter(ctx, cnt.get());
  double worst = it->worst, worst_lse = 0;
  const std::int64_t spot = spot_rows_wrong(b, p, &worst, &worst_lse);
  r.wrong = it->wrong + nonfinite + spot;
  r.check = fmt::format("fp64 oracle at S={} (#wrong {}); full S: {} non-finite, spot rows {} wrong; worst {:.2f} of the "
                        "tolerance, lse rel err {:.1e}",
                        key.S, it->per_output, nonfinite, spot, worst, worst_lse);
  r.status = r.wrong == 0 ? "ok" : "validation failed";
  // 3. timing, fwd and bwd separately
  std::tie(r.fwd_s, r.fwd_reps) =
      time_pass(ctx, opt, "attention sweep: fwd", [&] { return kernels::attn_fwd(kernels::AttnKernel::flash, fp, ctx.stream); });
  std::tie(r.bwd_s, r.bwd_reps) =
      time_pass(ctx, opt, "attention sweep: bwd", [&] { return kernels::attn_bwd(kernels::AttnKernel::flash, bp, ctx.stream); });
}

}  // namespace

double algbw_GBps(const BenchRow& r) { return r.median_s > 0 ? r.bytes_per_rank / r.median_s * 1e-9 : 0; }
double busbw_GBps(const BenchRow& r, std::int64_t P) { return algbw_GBps(r) * static_cast<double>(P - 1) / static_cast<double>(P); }

BenchResult bench_exchange(const BlockShape& s, const RunOptions& opt, const std::vector<int>& slices) {
  if (const std::string why = validate(s); !why.empty()) throw std::invalid_argument(why);
  prepare_nvtx_injection();
  auto cl = Cluster::acquire(static_cast<int>(s.P), opt.timeout_s);
  return aggregate(*cl, cl->run([&](RankCtx& ctx) { return exchange_rank(ctx, s, opt, slices); }));
}

BenchResult bench_attention(const BlockShape& s, const RunOptions& opt) {
  if (const std::string why = validate(s); !why.empty()) throw std::invalid_argument(why);
  prepare_nvtx_injection();
  auto cl = Cluster::acquire(static_cast<int>(s.P), opt.timeout_s);
  return aggregate(*cl, cl->run([&](RankCtx& ctx) { return attention_rank(ctx, s, opt); }));
}


std::vector<AttnSweepRow> bench_attention_sweep(const std::vector<AttnSweepPoint>& points, const AttnSweepOptions& opt,
                                                const std::function<void(const AttnSweepRow&)>& on_row,
                                                std::string* device) {
  auto cl = Cluster::acquire(1, opt.timeout_s);
  if (device) {
    *device = cl->describe() + "; attention kernels: D=128 " + kernels::flash_tuning::kernels_in_use(128) +
              ", D=64 " + kernels::flash_tuning::kernels_in_use(64);
  }
  std::vector<AttnSweepRow> rows;
  cl->run([&](RankCtx& ctx) {
    std::vector<OracleResult> cache;
    for (const AttnSweepPoint& p : points) {
      AttnSweepRow r;
      r.point = p;
      const auto t0 = std::chrono::steady_clock::now();
      sweep_point(ctx, opt, cache, r);
      r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rows.push_back(r);
      if (on_row) on_row(r);
    }
    return std::string();
  });
  return rows;
}

}  // namespace ulysses::runtime::cuda
