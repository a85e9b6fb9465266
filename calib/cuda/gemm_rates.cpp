// calib/cuda/gemm_rates.hpp: per weight shape, buffers for its largest M, each pass checked at sampled entries,
// then timed at every M.
#include "calib/cuda/gemm_rates.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "core/bf16.hpp"
#include "core/stats.hpp"
#include "kernels/loss_ops.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/device_memory.hpp"
#include "runtime/cuda/event_timer.hpp"
#include "runtime/cuda/gemm.hpp"
#include "sim/gemm_key.hpp"

namespace ulysses::calib::cuda {
namespace {

using bf = __nv_bfloat16;

// n values of a strided device vector (a row: stride 1; a column of a row-major [rows, cols]: stride cols)
std::vector<double> fetch(const bf* p, std::int64_t n, std::int64_t stride) {
  std::vector<core::bf16> h(static_cast<std::size_t>(n));
  CUDA_CHECK(cudaMemcpy2D(h.data(), sizeof(core::bf16), p, static_cast<std::size_t>(stride) * sizeof(bf), sizeof(bf),
                          static_cast<std::size_t>(n), cudaMemcpyDeviceToHost));
  std::vector<double> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) out[i] = core::bf16_to_float(h[i]);
  return out;
}

// got against times * sum_i a[i] b[i] in fp64: within 2^-7 of the value (its bf16 rounding is at most 2^-9, twice
// with an accumulation) plus 1e-4 of sum_i |a[i] b[i]| (fp32 accumulation order)
void check_entry(const char* what, std::int64_t N, std::int64_t K, double got, const std::vector<double>& a,
                 const std::vector<double>& b, double times = 1) {
  double want = 0, mag = 0;
  for (std::size_t i = 0; i < a.size(); ++i) want += a[i] * b[i], mag += std::fabs(a[i] * b[i]);
  want *= times, mag *= times;
  if (!std::isfinite(got) || std::fabs(got - want) > 0x1p-7 * std::fabs(want) + 1e-4 * mag + 1e-30)
    throw std::runtime_error(fmt::format("calibrate: GEMM {} {}x{}: an entry is {} where fp64 gives {} (magnitude {})", what, N, K,
                                         got, want, mag));
}

}  // namespace

std::vector<std::pair<std::int64_t, std::int64_t>> gemm_shapes_of(const std::vector<ModelSpec>& models) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const ModelSpec& m : models)
    for (const GemmShape& s : layer_gemm_shapes(m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_hidden, m.vocab))
      if (std::find(out.begin(), out.end(), std::pair{s.N, s.K}) == out.end()) out.emplace_back(s.N, s.K);
  return out;
}

std::string gemm_point_name(const std::string& key, std::int64_t M) { return fmt::format("{} M={}", key, M); }

std::vector<std::pair<std::string, Curve>> ulysses_gemm_curves(double peak_flops, const GemmCalibration& g, std::string& report,
                                                               int device, PointClocks* clocks) {
  CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<std::pair<std::string, Curve>> curves;
  try {
    runtime::cuda::Gemm gemm;
    for (const auto& [N, K] : g.NK) {
      std::vector<std::int64_t> Ms;
      for (std::int64_t M : g.M)
        if (M * std::max(N, K) <= g.max_elems && N * K <= g.max_elems) Ms.push_back(M);
      if (Ms.empty()) continue;
      const std::int64_t Mx = Ms.back();
      runtime::cuda::DeviceArena a(device);
      runtime::cuda::BufferSet b(a);
      // X [Mx, K], W [N, K], Y and dY [Mx, N], dX [Mx, K], dW [N, K]; seeded, unit-scale inputs
      bf *X = b.take<bf>(Mx * K), *W = b.take<bf>(N * K), *Y = b.take<bf>(Mx * N), *dY = b.take<bf>(Mx * N);
      bf *dX = b.take<bf>(Mx * K), *dW = b.take<bf>(N * K);
      CUDA_CHECK(kernels::fill_seeded_param(X, Mx * K, 31, 1, 0, 1, st));
      CUDA_CHECK(kernels::fill_seeded_param(W, N * K, 31, 2, 0, 0.02f, st));
      CUDA_CHECK(kernels::fill_seeded_param(dY, Mx * N, 31, 3, 0, 1, st));
      constexpr std::size_t kLeadBytes = std::size_t{256} << 20;
      void* lead = g.lead_fills > 0 ? b.take<char>(kLeadBytes) : nullptr;
      const auto before = [&] {
        runtime::cuda::idle_host(g.idle_s);
        for (int i = 0; i < g.lead_fills; ++i) CUDA_CHECK(cudaMemsetAsync(lead, i & 0xff, kLeadBytes, st));
      };
      for (GemmPass pass : {GemmPass::fwd, GemmPass::dgrad, GemmPass::wgrad, GemmPass::wgrad_acc}) {
        const auto run = [&](std::int64_t M) {
          if (pass == GemmPass::fwd) gemm.forward(X, W, Y, M, N, K, st);
          else if (pass == GemmPass::dgrad) gemm.input_grad(dY, W, dX, M, N, K, st);
          else gemm.weight_grad(dY, X, dW, M, N, K, pass == GemmPass::wgrad_acc ? 1.f : 0.f, st);
        };
        // the first M's output at 16 entries against fp64 (wgrad_acc: added once to wgrad's result: twice the product)
        const std::int64_t M0 = Ms.front();
        if (pass == GemmPass::wgrad_acc) {  // chosen as the runtime chooses it (dW is written next), then the check's first product
          for (std::int64_t M : Ms) gemm.tune_accumulating_weight_grad(dY, X, dW, M, N, K, st);
          gemm.weight_grad(dY, X, dW, M0, N, K, 0.f, st);
        }
        run(M0);
        CUDA_CHECK(cudaStreamSynchronize(st));
        const char* what = kGemmPassNames[static_cast<std::size_t>(pass)].data();
        for (int e = 0; e < 16; ++e) {
          const std::int64_t m = (e * 7919) % M0, n = (e * 104729 + 13) % N, k = (e * 1299709 + 7) % K;
          if (pass == GemmPass::fwd)  // Y[m, n] = X[m, :] . W[n, :]
            check_entry(what, N, K, fetch(Y + m * N + n, 1, 1)[0], fetch(X + m * K, K, 1), fetch(W + n * K, K, 1));
          else if (pass == GemmPass::dgrad)  // dX[m, k] = dY[m, :] . W[:, k]
            check_entry(what, N, K, fetch(dX + m * K + k, 1, 1)[0], fetch(dY + m * N, N, 1), fetch(W + k, N, K));
          else  // dW[n, k] = dY[:M0, n] . X[:M0, k]
            check_entry(what, N, K, fetch(dW + n * K + k, 1, 1)[0], fetch(dY + n, M0, N), fetch(X + k, M0, K),
                        pass == GemmPass::wgrad_acc ? 2 : 1);
        }
        const std::string key = gemm_curve_key(pass, N, K);
        Curve c;
        std::string line;
        for (std::int64_t M : Ms) {
          if (clocks) {  // the first call at a new M chooses cuBLASLt's algorithm (runtime/cuda/gemm.hpp): outside the point
            run(M);
            CUDA_CHECK(cudaStreamSynchronize(st));
          }
          const auto timed = [&] { return runtime::cuda::time_on_stream_after(st, g.warmup, g.iters, before, [&] { run(M); }); };
          const double t = core::median(clocks ? clocks->around(gemm_point_name(key, M), timed) : timed());
          const double eff = 2.0 * double(M) * double(N) * double(K) / t / peak_flops;
          c.points.emplace_back(double(M), std::min(eff, 1.0));
          line += fmt::format(" {}:{:.3f}", M, eff);
        }
        report += fmt::format("  {:<20} eff at M:{}\n", key, line);
        curves.emplace_back(key, std::move(c));
      }
    }
  } catch (...) {
    cudaStreamDestroy(st);
    throw;
  }
  CUDA_CHECK(cudaStreamDestroy(st));
  return curves;
}

}  // namespace ulysses::calib::cuda
