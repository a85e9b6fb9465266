// `ulysses bench layer`: a decoder layer's kernels outside attention (kernels/layer_ops.hpp) and its
// projections on cuBLASLt (runtime/cuda/gemm.hpp) at one rank's shapes of the scenario, on one GPU.
// Each kernel runs once on the full inputs and is checked on rows 0, T/2 and T-1 against the fp64
// oracle (runtime/reference_layer.hpp; the GEMMs against fp64 dot products; RMSNorm's dw on every
// column, and its bits again after the timed runs), then timed (CUDA events,
// warm-up then iterations, median and max). Bytes are the compulsory traffic (each input read once,
// each output written once); FLOPs of a GEMM 2 M N K. Gemm picks each projection's algorithm on its
// first (validation) call, so the timed calls run the kept algorithm; the row's note says which.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "bench/bench.hpp"
#include "core/bf16.hpp"
#include "core/errors.hpp"
#include "core/stats.hpp"
#include "kernels/layer_ops.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/device_info.hpp"
#include "runtime/cuda/event_timer.hpp"
#include "runtime/cuda/gemm.hpp"
#include "runtime/reference_layer.hpp"

namespace ulysses::bench {
namespace {

using core::bf16;

struct Buf {  // device bf16 tensor with its host copy (seeded inputs only; outputs start as zeros)
  std::size_t n = 0;
  std::vector<bf16> host;
  __nv_bfloat16* dev = nullptr;
  // seed != 0: uniform values of standard deviation `scale` from a counter hash (fast enough for the
  // billions of elements of a long sequence's [T, F]; drawn on all host threads, the same values)
  explicit Buf(std::size_t count, std::uint32_t seed = 0, float scale = 1.f) : n(count) {
    CUDA_CHECK(cudaMalloc(&dev, n * 2));
    if (!seed) {
      CUDA_CHECK(cudaMemset(dev, 0, n * 2));
      return;
    }
    host.resize(n);
    const float a = scale * 1.7320508f / 2147483648.f;  // sqrt(3) * scale over 2^31
    const std::size_t workers = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 32);
    std::vector<std::thread> pool;
    for (std::size_t wk = 0; wk < workers; ++wk)
      pool.emplace_back([&, wk] {
        for (std::size_t i = n * wk / workers; i < n * (wk + 1) / workers; ++i) {
          std::uint64_t z = (std::uint64_t(seed) << 40) + i + 0x9E3779B97F4A7C15ull;  // splitmix64
          z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
          z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
          z ^= z >> 31;
          host[i] = core::float_to_bf16(a * float(std::int32_t(std::uint32_t(z))));
        }
      });
    for (auto& t : pool) t.join();
    CUDA_CHECK(cudaMemcpy(dev, host.data(), n * 2, cudaMemcpyHostToDevice));
  }
  ~Buf() { cudaFree(dev); }
  Buf(const Buf&) = delete;
  std::vector<bf16> download() const {
    std::vector<bf16> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), dev, h.size() * 2, cudaMemcpyDeviceToHost));
    return h;
  }
};

double f(bf16 v) { return core::bf16_to_float(v); }
bool close(double got, double want, double rel, double abs) { return std::fabs(got - want) <= rel * std::fabs(want) + abs; }

std::vector<double> time_kernel(const RunOptions& opt, const std::function<void()>& fn) {
  return runtime::cuda::time_on_stream(nullptr, opt.warmup, opt.iters, fn);
}

BenchRow row_of(std::string name, std::int64_t bytes, double flops, std::int64_t wrong, std::vector<double> t) {
  BenchRow r;
  r.name = std::move(name);
  r.bytes_per_rank = bytes;
  r.flops = flops;
  r.wrong = wrong;
  r.median_s = t.empty() ? 0 : core::median(t);
  r.max_s = t.empty() ? 0 : *std::max_element(t.begin(), t.end());
  return r;
}

}  // namespace

BenchResult bench_layer(const LayerShape& s, const RunOptions& opt) {
  // the kernels' shape rules (kernels/layer_ops.hpp), as input errors before any device work
  if (s.T < 1) throw core::InputError("", "--seq-len", "one rank's tokens (B * S / P) must be >= 1");
  if (s.h % 2 || s.h > 16384) throw core::InputError("", "model.hidden", "the layer kernels take an even hidden size <= 16384");
  if (s.F % 2) throw core::InputError("", "model.ffn_hidden", "the layer kernels take an even MLP size");
  if (s.D % 4) throw core::InputError("", "model.head_dim", "RoPE's kernel takes a head dim that is a multiple of 4");
  CUDA_CHECK(cudaSetDevice(0));
  BenchResult res;
  const runtime::cuda::DeviceInfo info = runtime::cuda::device_info();
  res.device = info.name + " (driver " + info.driver + ", runtime " + info.runtime + ")";
  const std::int64_t T = s.T, h = s.h, F = s.F, H = s.H, H_kv = s.H_kv, D = s.D;
  const std::int64_t rows[] = {0, T / 2, T - 1};
  const double eps = 1e-5;
  // ---- RMSNorm ----
  {
    Buf x(T * h, 11, 2.f), w(h, 12), out(T * h), dout(T * h, 13), dx(T * h);
    float *rstd = nullptr, *dw = nullptr;
    void* ws = nullptr;
    CUDA_CHECK(cudaMalloc(&rstd, T * 4));
    CUDA_CHECK(cudaMalloc(&dw, h * 4));
    CUDA_CHECK(cudaMalloc(&ws, kernels::rmsnorm_bwd_workspace_bytes(T, h)));
    const auto fwd = [&] { CUDA_CHECK(kernels::rmsnorm_fwd(x.dev, w.dev, out.dev, rstd, T, h, float(eps), nullptr)); };
    const auto bwd = [&] { CUDA_CHECK(kernels::rmsnorm_bwd(dout.dev, x.dev, w.dev, rstd, dx.dev, dw, ws, T, h, nullptr)); };
    fwd(), bwd();
    const auto go = out.download(), gdx = dx.download();
    std::int64_t wf = 0, wb = 0;
    std::vector<double> o(h), r(1), d(h), dwr(h);
    for (std::int64_t t : rows) {
      runtime::rmsnorm_forward(1, h, x.host.data() + t * h, w.host.data(), eps, o.data(), r.data());
      runtime::rmsnorm_backward(1, h, dout.host.data() + t * h, x.host.data() + t * h, w.host.data(), eps, d.data(), dwr.data());
      for (std::int64_t j = 0; j < h; ++j) wf += !close(f(go[t * h + j]), o[j], 1.0 / 128, 1e-3), wb += !close(f(gdx[t * h + j]), d[j], 1.0 / 128, 1e-3);
    }
    // dw: every column's sum over all T rows against the kernel's own rounding of the normalized value
    // (runtime::rmsnorm_given_rstd says why), to 1e-5 of the terms' magnitude; rstd against fp64 on the rows
    std::vector<float> gdw(h), gdw2(h), grstd(T);
    CUDA_CHECK(cudaMemcpy(gdw.data(), dw, h * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(grstd.data(), rstd, T * 4, cudaMemcpyDeviceToHost));
    std::vector<core::bf16> out_k(static_cast<std::size_t>(T * h));
    std::vector<double> dw_k(h), dw_abs(h);
    runtime::rmsnorm_given_rstd(T, h, x.host.data(), w.host.data(), dout.host.data(), grstd.data(), out_k.data(), dw_k.data(), dw_abs.data());
    std::int64_t wdw = 0;
    for (std::int64_t j = 0; j < h; ++j) wdw += !(std::fabs(gdw[j] - dw_k[j]) <= 1e-5 * dw_abs[j] + 1e-6);
    for (std::int64_t t : rows) {
      runtime::rmsnorm_forward(1, h, x.host.data() + t * h, w.host.data(), eps, o.data(), r.data());
      wdw += !(std::fabs(grstd[t] - r[0]) <= 1e-5 * r[0]);
    }
    res.rows.push_back(row_of("rmsnorm fwd [T,h]", 4 * T * h, 0, wf, time_kernel(opt, fwd)));
    res.rows.push_back(row_of("rmsnorm bwd [T,h]", 6 * T * h, 0, wb + wdw, time_kernel(opt, bwd)));
    // the timed runs recomputed dw from the same inputs: the same bits every time (no atomics)
    CUDA_CHECK(cudaMemcpy(gdw2.data(), dw, h * 4, cudaMemcpyDeviceToHost));
    std::int64_t differ = 0;
    for (std::int64_t j = 0; j < h; ++j) differ += std::memcmp(&gdw[j], &gdw2[j], sizeof(float)) != 0;
    res.rows.back().wrong += differ;
    res.rows.back().note = fmt::format("dx and rstd on 3 rows against fp64, dw on all {} columns against the kernel's own "
                                       "rounding of n ({} off); dw's bits after the timed "
                                       "runs equal the first run's in {} of {} columns",
                                       h, wb + wdw, h - differ, h);
    cudaFree(rstd), cudaFree(dw), cudaFree(ws);
  }
  // ---- RoPE on q ----
  {
    std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) pos[t] = t;
    std::vector<bf16> cos, sin;
    runtime::rope_tables(T, D, pos.data(), 500000.0, cos, sin);
    Buf q(T * H * D, 14), c(cos.size()), sn(sin.size());
    CUDA_CHECK(cudaMemcpy(c.dev, cos.data(), cos.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(sn.dev, sin.data(), sin.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(kernels::rope(q.dev, c.dev, sn.dev, T, H, D, false, nullptr));
    const auto gq = q.download();
    std::int64_t wrong = 0;
    std::vector<double> want(H * D);
    // the backward (the transposed rotation) on the forward's output, checked the same way
    CUDA_CHECK(kernels::rope(q.dev, c.dev, sn.dev, T, H, D, true, nullptr));
    const auto gb = q.download();
    for (std::int64_t t : rows)
      for (const bool back : {false, true}) {
        const std::vector<bf16>& in = back ? gq : q.host;
        const std::vector<bf16>& got = back ? gb : gq;
        runtime::rope_apply(1, H, D, in.data() + t * H * D, cos.data() + t * (D / 2), sin.data() + t * (D / 2), back,
                            want.data());
        for (std::int64_t e = 0; e < H * D; ++e) wrong += !close(f(got[t * H * D + e]), want[e], 1.0 / 256, 1e-6);
      }
    // timed in place, alternately forward and backward (both validated above; the values stay bounded)
    bool back = true;
    res.rows.push_back(row_of("rope [T,H,D]", 4 * T * H * D, 0, wrong, time_kernel(opt, [&] {
      CUDA_CHECK(kernels::rope(q.dev, c.dev, sn.dev, T, H, D, back, nullptr));
      back = !back;
    })));
  }
  // ---- SwiGLU and the residual add ----
  {
    const std::int64_t n = T * F;
    Buf gate(n, 15, 3.f), up(n, 16), act(n), dact(n, 17), dgate(n), dup(n);
    const auto fwd = [&] { CUDA_CHECK(kernels::swiglu_fwd(gate.dev, up.dev, act.dev, n, nullptr)); };
    const auto bwd = [&] { CUDA_CHECK(kernels::swiglu_bwd(dact.dev, gate.dev, up.dev, dgate.dev, dup.dev, n, nullptr)); };
    fwd(), bwd();
    const auto ga = act.download(), gg = dgate.download(), gu = dup.download();
    std::int64_t wf = 0, wb = 0;
    std::vector<double> a(F), dg(F), du(F);
    for (std::int64_t t : rows) {
      runtime::swiglu_forward(F, gate.host.data() + t * F, up.host.data() + t * F, a.data());
      runtime::swiglu_backward(F, dact.host.data() + t * F, gate.host.data() + t * F, up.host.data() + t * F, dg.data(), du.data());
      for (std::int64_t j = 0; j < F; ++j)
        wf += !close(f(ga[t * F + j]), a[j], 1.0 / 256, 1e-6),
            wb += !close(f(gg[t * F + j]), dg[j], 1.0 / 256, 1e-6) + !close(f(gu[t * F + j]), du[j], 1.0 / 256, 1e-6);
    }
    res.rows.push_back(row_of("swiglu fwd [T,F]", 6 * n, 0, wf, time_kernel(opt, fwd)));
    res.rows.push_back(row_of("swiglu bwd [T,F]", 10 * n, 0, wb, time_kernel(opt, bwd)));
  }
  {
    Buf a(T * h, 18), b(T * h, 19), out(T * h);
    const auto run = [&] { CUDA_CHECK(kernels::add(a.dev, b.dev, out.dev, T * h, nullptr)); };
    run();
    const auto g = out.download();
    std::int64_t wrong = 0;
    for (std::int64_t t : rows)
      for (std::int64_t j = 0; j < h; ++j) wrong += !close(f(g[t * h + j]), f(a.host[t * h + j]) + f(b.host[t * h + j]), 1.0 / 256, 0);
    res.rows.push_back(row_of("residual add [T,h]", 6 * T * h, 0, wrong, time_kernel(opt, run)));
  }
  // ---- projections: q, k, gate (forward), down (input and weight gradients) ----
  {
    runtime::cuda::Gemm gemm;
    struct Proj {
      const char* name;
      std::int64_t N, K;
      int pass;  // 0 forward, 1 input grad, 2 weight grad
    };
    const Proj projs[] = {{"gemm q fwd X.Wq^T", H * D, h, 0}, {"gemm k fwd X.Wk^T", H_kv * D, h, 0}, {"gemm gate fwd X.Wg^T", F, h, 0},
                          {"gemm down dX = dY.Wd", h, F, 1}, {"gemm down dW = dY^T.X", h, F, 2}};
    for (const Proj& p : projs) {
      const std::int64_t M = T, N = p.N, K = p.K;
      Buf X(M * K, 21), W(N * K, 22), dY(M * N, 23), out(p.pass == 0 ? M * N : p.pass == 1 ? M * K : N * K);
      const auto run = [&] {
        if (p.pass == 0) gemm.forward(X.dev, W.dev, out.dev, M, N, K, nullptr);
        else if (p.pass == 1) gemm.input_grad(dY.dev, W.dev, out.dev, M, N, K, nullptr);
        else gemm.weight_grad(dY.dev, X.dev, out.dev, M, N, K, 0.f, nullptr);
      };
      run();
      const auto g = out.download();
      std::int64_t wrong = 0;
      const std::int64_t cols = p.pass == 0 ? N : K, inner = p.pass == 0 ? K : p.pass == 1 ? N : M;
      const std::int64_t check_rows[] = {0, (p.pass == 2 ? N : M) / 2, (p.pass == 2 ? N : M) - 1};
      for (std::int64_t r : check_rows)
        for (std::int64_t c = 0; c < cols; c += std::max<std::int64_t>(1, cols / 64)) {
          double want = 0;
          for (std::int64_t i = 0; i < inner; ++i)
            want += p.pass == 0 ? f(X.host[r * K + i]) * f(W.host[c * K + i])
                  : p.pass == 1 ? f(dY.host[r * N + i]) * f(W.host[i * K + c])
                                : f(dY.host[i * N + r]) * f(X.host[i * K + c]);
          wrong += !close(f(g[r * cols + c]), want, 1.0 / 256, 1e-2 * std::sqrt(double(inner)));
        }
      res.rows.push_back(row_of(p.name, 0, 2.0 * double(M) * double(N) * double(K), wrong, time_kernel(opt, run)));
      // Gemm's choice on the first call (runtime/cuda/gemm.hpp): the heuristic's first against the kept one
      const auto& tu = gemm.last_tuning();
      if (!tu.median_s.empty())
        res.rows.back().note = fmt::format("cuBLASLt algorithm {} of {} kept: {:.0f} us in its tuning runs, the heuristic's first {:.0f} us",
                                           tu.chosen, tu.median_s.size(), tu.median_s[tu.chosen] * 1e6, tu.median_s[0] * 1e6);
    }
  }
  return res;
}

}  // namespace ulysses::bench
