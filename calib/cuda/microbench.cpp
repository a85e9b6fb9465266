// CUDA microbenchmarks (calib/cuda/microbench.hpp): CUDA-event medians of single kernels and copies
// on one device, and of the block's exchange phases on P GPUs.
#include "calib/cuda/microbench.hpp"
#include "calib/cuda/cuda_owners.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "kernels/attention.hpp"
#include "kernels/pack.cuh"
#include "kernels/testdata.cuh"
#include "runtime/cuda/block_runner.hpp"
#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/report.hpp"
#include "runtime/cuda/tracing.hpp"
#include "runtime/cuda/device_memory.hpp"
#include "core/layout.hpp"
#include "runtime/reference_attention.hpp"
#include "core/stats.hpp"
#include "runtime/cuda/event_timer.hpp"

namespace ulysses::calib::cuda {

using namespace runtime;  // the CUDA backend's block runner, cluster and device buffers
using namespace runtime::cuda;

namespace {

kernels::AttnKernel kernel_of(const std::string& k) {
  if (k == "flash") return kernels::AttnKernel::flash;
  if (k == "reference") return kernels::AttnKernel::reference;
  throw std::invalid_argument("unknown attention kernel '" + k + "' (flash | reference)");
}

}  // namespace

void load_block_kernels(int device) {
  for (bool causal : {true, false})
    for (std::int64_t D : {64, 128})
      for (const char* k : {"flash", "reference"}) attention_time(k, 256, 2, 1, D, causal, 0, 1, device);
  pack_GBps(1 << 20, 0, 1, device);
}

std::string attention_pass_point(const std::string& point, const char* pass) { return point + " " + pass; }

AttnTime attention_time(const std::string& kernel, std::int64_t S, std::int64_t H, std::int64_t H_kv, std::int64_t D,
                        bool causal, int warmup, int iters, int device, double idle_s, PointClocks* clocks,
                        const std::string& point) {
  const kernels::AttnKernel kind = kernel_of(kernel);
  Stream st(device);
  DeviceArena a(device);
  const std::int64_t B = 1;
  // q, o, dout, dq: [B, S, H, D] bf16; k, v, dk, dv: [B, S, H_kv, D] bf16; lse [B, H, S] fp32
  DevBuf<std::uint16_t> q(a, B * S * H * D), o(a, B * S * H * D), dout(a, B * S * H * D), dq(a, B * S * H * D);
  DevBuf<std::uint16_t> k(a, B * S * H_kv * D), v(a, B * S * H_kv * D), dk(a, B * S * H_kv * D), dv(a, B * S * H_kv * D);
  DevBuf<float> lse(a, B * H * S);
  DevBuf<std::uint8_t> ws(a, static_cast<std::int64_t>(kernels::attn_bwd_workspace_bytes(kind, B, S, H, H_kv, D)));
  const core::Dims qd{B, S, 1, H, D}, kd{B, S, 1, H_kv, D};  // P = 1: the shard is the whole tensor
  const std::uint64_t seed = 77;
  CUDA_CHECK(kernels::fill_seq_shard_bf16(q.get(), qd, 0, seed, kernels::kTensorQ, st.s));
  CUDA_CHECK(kernels::fill_seq_shard_bf16(k.get(), kd, 0, seed, kernels::kTensorK, st.s));
  CUDA_CHECK(kernels::fill_seq_shard_bf16(v.get(), kd, 0, seed, kernels::kTensorV, st.s));
  CUDA_CHECK(kernels::fill_seq_shard_bf16(dout.get(), qd, 0, seed, kernels::kTensorDout, st.s));
  auto bf = [](DevBuf<std::uint16_t>& x) { return reinterpret_cast<__nv_bfloat16*>(x.get()); };
  kernels::AttnFwdParams f;
  f.q = bf(q), f.k = bf(k), f.v = bf(v), f.o = bf(o), f.lse = lse.get();
  f.B = B, f.S = S, f.H = H, f.H_kv = H_kv, f.D = D, f.causal = causal, f.scale = 1.0f / std::sqrt(static_cast<float>(D));
  kernels::AttnBwdParams b;
  b.q = f.q, b.k = f.k, b.v = f.v, b.o = f.o, b.lse = f.lse, b.dout = bf(dout);
  b.dq = bf(dq), b.dk = bf(dk), b.dv = bf(dv), b.workspace = ws.get();
  b.B = B, b.S = S, b.H = H, b.H_kv = H_kv, b.D = D, b.causal = causal, b.scale = f.scale;
  CUDA_CHECK(kernels::attn_fwd(kind, f, st.s));  // checked before it is timed: every row's lse finite
  std::vector<float> lse_host(static_cast<std::size_t>(B * H * S));
  CUDA_CHECK(cudaMemcpyAsync(lse_host.data(), lse.get(), lse_host.size() * sizeof(float), cudaMemcpyDeviceToHost, st.s));
  CUDA_CHECK(cudaStreamSynchronize(st.s));
  for (float x : lse_host)
    if (!std::isfinite(x)) throw std::runtime_error(fmt::format("attention {} at S={} H={}: an lse is not finite", kernel, S, H));
  const auto idle = [idle_s] { runtime::cuda::idle_host(idle_s); };
  AttnTime t;
  const auto timed = [&](const char* pass, auto&& call) {
    const auto run = [&] { return runtime::cuda::time_on_stream_after(st.s, warmup, iters, idle, call); };
    return core::median(clocks ? clocks->around(attention_pass_point(point, pass), run) : run());
  };
  t.fwd_s = timed("fwd", [&] { CUDA_CHECK(kernels::attn_fwd(kind, f, st.s)); });
  t.bwd_s = timed("bwd", [&] { CUDA_CHECK(kernels::attn_bwd(kind, b, st.s)); });
  const AttnDims ad{B, S, H, H_kv, D, causal};
  t.fwd_flops = attention_fwd_flops(ad), t.bwd_flops = attention_bwd_flops(ad);
  return t;
}

double pack_GBps(std::int64_t bytes, int warmup, int iters, int device) {
  Stream st(device);
  DeviceArena a(device);
  const std::int64_t H = 8, D = 128, P = 2;
  const std::int64_t S_l = std::max<std::int64_t>(1, bytes / (H * D * 2));
  const core::Dims x{1, S_l * P, P, H, D};  // this rank's seq shard: [1, S_l, H, D] bf16 = `bytes`
  DevBuf<std::uint16_t> src(a, S_l * H * D), dst(a, S_l * H * D);
  CUDA_CHECK(kernels::fill_seq_shard_bf16(src.get(), x, 0, 5, kernels::kTensorQ, st.s));
  kernels::ChunkPtrs c;  // chunk[c]: [1, S_l, H/P, D]
  for (int i = 0; i < P; ++i) c.p[i] = dst.get() + i * core::chunk_elems(x);
  const double t = time_median(st.s, warmup, iters, [&] {
    CUDA_CHECK(kernels::pack_seq_to_head(src.get(), c, x, 2, 0, S_l, st.s));
  });
  return 2.0 * static_cast<double>(src.bytes()) / t * 1e-9;
}

HostLink host_link(std::int64_t bytes, int warmup, int iters, int device) {
  Stream st(device);
  DeviceArena a(device);
  DevBuf<std::uint8_t> d(a, bytes);
  const runtime::cuda::PinnedPtr pinned = runtime::cuda::alloc_pinned(bytes);
  void* const h = pinned.get();
  const auto n = static_cast<std::size_t>(bytes);
  HostLink r;
  const double th = time_median(st.s, warmup, iters, [&] { CUDA_CHECK(cudaMemcpyAsync(d.get(), h, n, cudaMemcpyHostToDevice, st.s)); });
  const double td = time_median(st.s, warmup, iters, [&] { CUDA_CHECK(cudaMemcpyAsync(h, d.get(), n, cudaMemcpyDeviceToHost, st.s)); });
  r.h2d_GBps = static_cast<double>(bytes) / th * 1e-9;
  r.d2h_GBps = static_cast<double>(bytes) / td * 1e-9;
  return r;
}

std::vector<std::array<double, 6>> exchange_phase_times(const BlockShape& s, int warmup, int iters, double timeout_s,
                                                        std::string* transport) {
  if (const std::string why = validate(s); !why.empty()) throw std::invalid_argument(why);
  prepare_nvtx_injection();
  auto cl = Cluster::acquire(static_cast<int>(s.P), timeout_s);
  const std::vector<std::string> all = cl->run([&](RankCtx& ctx) {
    DeviceArena arena(ctx.device);
    BlockRunner run(ctx, arena, s, parse_kernel_choice(s.attn_implementation), default_slices());
    if (transport && ctx.rank == 0) *transport = run.exchanger().transport();
    run.fill_inputs(11);
    std::array<cudaEvent_t, 5> ev{};
    for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
    const std::array<int, 4> phases = {0, 2, 3, 5};
    std::array<std::vector<double>, 6> t;
    for (int it = 0; it < warmup + iters; ++it) {
      run.barrier();
      CUDA_CHECK(cudaEventRecord(ev[0], ctx.stream));
      for (int i = 0; i < 4; ++i) {
        run.phase(phases[i]);
        CUDA_CHECK(cudaEventRecord(ev[i + 1], ctx.stream));
      }
      ctx.wait(ctx.stream, "an exchange calibration iteration");
      if (it < warmup) continue;
      for (int i = 0; i < 4; ++i) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
        t[phases[i]].push_back(ms * 1e-3);
      }
    }
    for (auto& e : ev) cudaEventDestroy(e);
    Writer w;
    for (const auto& v : t) w.pod(core::median(v));
    return w.out;
  });
  std::vector<std::array<double, 6>> out;
  for (const auto& r : all) {
    Reader rd(r);
    std::array<double, 6> m{};
    for (auto& x : m) x = rd.pod<double>();
    out.push_back(m);
  }
  return out;
}

std::vector<double> exchange_after_idle(const BlockShape& s, const std::vector<double>& idle_ms, int warmup, int iters,
                                        double timeout_s) {
  if (const std::string why = validate(s); !why.empty()) throw std::invalid_argument(why);
  auto cl = Cluster::acquire(static_cast<int>(s.P), timeout_s);
  const std::vector<std::string> all = cl->run([&](RankCtx& ctx) {
    DeviceArena arena(ctx.device);
    BlockRunner run(ctx, arena, s, parse_kernel_choice(s.attn_implementation), default_slices());
    run.fill_inputs(11);
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    Writer w;
    for (double T : idle_ms) {
      std::vector<double> t;
      for (int it = 0; it < warmup + iters; ++it) {
        run.phase(3);  // links busy right before the idle period
        CUDA_CHECK(kernels::spin_for_ns(static_cast<long long>(T * 1e6), ctx.stream));
        run.barrier();
        CUDA_CHECK(cudaEventRecord(e0, ctx.stream));
        run.phase(3);
        CUDA_CHECK(cudaEventRecord(e1, ctx.stream));
        ctx.wait(ctx.stream, "an exchange after idle links");
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (it >= warmup) t.push_back(ms * 1e-3);
      }
      w.pod(core::median(t));
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return w.out;
  });
  std::vector<double> out(idle_ms.size(), 0.0);
  for (const auto& r : all) {
    Reader rd(r);
    for (auto& x : out) x = std::max(x, rd.pod<double>());
  }
  return out;
}

}  // namespace ulysses::calib::cuda
