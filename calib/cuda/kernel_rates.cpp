// calib/cuda/kernel_rates.hpp: buffers at the shape, then each kernel timed alone in EagerRate order.
#include "calib/cuda/kernel_rates.hpp"

#include <algorithm>
#include <stdexcept>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "core/stats.hpp"
#include "kernels/testdata.cuh"
#include "kernels/layer_ops.hpp"
#include "kernels/loss_ops.hpp"
#include "kernels/optim_ops.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/device_memory.hpp"
#include "runtime/cuda/event_timer.hpp"

namespace ulysses::calib::cuda {

std::array<double, kEagerRates> ulysses_kernel_rates(double hbm_GBps, int warmup, int iters, std::string& report,
                                                     const KernelRateShape& s, int device) {
  using bf = __nv_bfloat16;
  CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::array<double, kEagerRates> rates{};
  rates.fill(-1);
  try {
    runtime::cuda::DeviceArena a(device);
    runtime::cuda::BufferSet b(a);
    const std::int64_t T = s.T, h = s.h, F = s.F, QK = (s.H + s.H_kv) * s.D, Th = T * h, TF = T * F, Vh = s.V * h;
    bf *x = b.take<bf>(Th), *y = b.take<bf>(Th), *dy = b.take<bf>(Th), *w = b.take<bf>(h), *qk = b.take<bf>(T * QK);
    bf *cs = b.take<bf>(T * s.D / 2), *sn = b.take<bf>(T * s.D / 2), *embed = b.take<bf>(Vh), *logits = b.take<bf>(s.T_loss * s.V);
    bf *g = b.take<bf>(TF), *u = b.take<bf>(TF), *act = b.take<bf>(TF), *dg = b.take<bf>(TF), *du = b.take<bf>(TF);
    float *rstd = b.take<float>(T), *dw = b.take<float>(h), *d_embed = b.take<float>(Vh), *loss = b.take<float>(s.T_loss);
    void* ws = b.take<unsigned char>(static_cast<std::int64_t>(kernels::rmsnorm_bwd_workspace_bytes(T, h)));
    std::int32_t *tokens = b.take<std::int32_t>(T), *labels = b.take<std::int32_t>(s.T_loss);
    // Qwen3's head norms over rows of D (q's T H rows, then k's T H_kv), and one optimizer tensor [F, h]
    const std::int64_t rows_q = T * s.H, rows_k = T * s.H_kv, n_opt = F * h;
    bf *qk_out = b.take<bf>(T * QK), *qk_dx = b.take<bf>(T * QK), *wD = b.take<bf>(s.D);
    float *rstd_qk = b.take<float>(rows_q + rows_k), *dwD = b.take<float>(s.D);
    void* ws_qk = b.take<unsigned char>(static_cast<std::int64_t>(kernels::rmsnorm_bwd_workspace_bytes(rows_q, s.D)));
    bf *param = b.take<bf>(n_opt), *grad = b.take<bf>(n_opt);
    float *master = b.take<float>(n_opt), *m1 = b.take<float>(n_opt), *m2 = b.take<float>(n_opt);
    float *partials = b.take<float>(kernels::kNormBlocks), *norm_coef = b.take<float>(2);
    // seeded values: the norms' weights near 1, activations of unit scale, RoPE angles as cos/sin of one
    const auto fill = [&](bf* p, std::int64_t n, std::uint32_t id, float bias, float scale) {
      CUDA_CHECK(kernels::fill_seeded_param(p, n, 99, id, bias, scale, st));
    };
    fill(x, Th, 1, 0, 1), fill(dy, Th, 2, 0, 1), fill(w, h, 3, 1, 0.1f), fill(qk, T * QK, 4, 0, 1);
    fill(cs, T * s.D / 2, 5, 0, 0.7f), fill(sn, T * s.D / 2, 6, 0, 0.7f), fill(embed, Vh, 7, 0, 0.02f);
    fill(g, TF, 8, 0, 1), fill(u, TF, 9, 0, 1), fill(act, TF, 10, 0, 1), fill(logits, s.T_loss * s.V, 11, 0, 1);
    fill(wD, s.D, 12, 1, 0.1f), fill(param, n_opt, 13, 0, 0.02f), fill(grad, n_opt, 14, 0, 1e-3f);
    CUDA_CHECK(kernels::widen_bf16(param, master, n_opt, st));
    CUDA_CHECK(cudaMemsetAsync(m1, 0, static_cast<std::size_t>(n_opt) * 4, st));
    CUDA_CHECK(cudaMemsetAsync(m2, 0, static_cast<std::size_t>(n_opt) * 4, st));
    std::vector<std::int32_t> tok(static_cast<std::size_t>(T)), lab(static_cast<std::size_t>(s.T_loss));
    for (std::int64_t t = 0; t < T; ++t) tok[t] = static_cast<std::int32_t>((t * 7919) % s.V);
    for (std::int64_t t = 0; t < s.T_loss; ++t) lab[t] = static_cast<std::int32_t>((t * 104729 + 3) % s.V);
    CUDA_CHECK(cudaMemcpy(tokens, tok.data(), tok.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(labels, lab.data(), lab.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaStreamSynchronize(st));
    // each kernel runs once and its output must hold no NaN or infinity before it is timed (its values
    // against fp64: the GPU tests and `bench layer`)
    unsigned long long* bad = b.take<unsigned long long>(1);
    const auto finite_or_throw = [&](EagerRate r, const bf* out, std::int64_t n) {
      CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(unsigned long long), st));
      CUDA_CHECK(kernels::count_nonfinite_bf16(out, n, bad, st));
      unsigned long long h_bad = 0;
      CUDA_CHECK(cudaMemcpyAsync(&h_bad, bad, sizeof(h_bad), cudaMemcpyDeviceToHost, st));
      CUDA_CHECK(cudaStreamSynchronize(st));
      if (h_bad)
        throw std::runtime_error(fmt::format("calibrate: {} wrote {} non-finite values", kEagerRateKeys[static_cast<std::size_t>(r)], h_bad));
    };
    const auto rate = [&](EagerRate r, double elems, auto&& fn, const bf* out = nullptr, std::int64_t out_n = 0) {
      if (out) fn(), finite_or_throw(r, out, out_n);
      const double t = core::median(runtime::cuda::time_on_stream(st, warmup, iters, fn));
      const double bpe = t * hbm_GBps * 1e9 / elems;
      rates[static_cast<std::size_t>(r)] = bpe;
      report += fmt::format("  {:<12} {:>9.1f} us over {:>12.0f} elements: {:6.2f} B/elem at {:.0f} GB/s\n",
                            kEagerRateKeys[static_cast<std::size_t>(r)], t * 1e6, elems, bpe, hbm_GBps);
    };
    rate(EagerRate::rmsnorm_fwd, double(Th), [&] { CUDA_CHECK(kernels::rmsnorm_fwd(x, w, y, rstd, T, h, 1e-5f, st)); }, y, Th);
    rate(EagerRate::rmsnorm_bwd, double(Th), [&] { CUDA_CHECK(kernels::rmsnorm_bwd(dy, x, w, rstd, y, dw, ws, T, h, st)); }, y, Th);
    rate(EagerRate::rope_fwd, double(T * QK), [&] {  // q's heads then k's, as the layer runs them
      CUDA_CHECK(kernels::rope(qk, cs, sn, T, s.H, s.D, false, st));
      CUDA_CHECK(kernels::rope(qk + T * s.H * s.D, cs, sn, T, s.H_kv, s.D, false, st));
    });
    rate(EagerRate::rope_bwd, double(T * QK), [&] {
      CUDA_CHECK(kernels::rope(qk, cs, sn, T, s.H, s.D, true, st));
      CUDA_CHECK(kernels::rope(qk + T * s.H * s.D, cs, sn, T, s.H_kv, s.D, true, st));
    });
    const bf* k_in = qk + rows_q * s.D;
    rate(EagerRate::headnorm_fwd, double(T * QK), [&] {
      CUDA_CHECK(kernels::rmsnorm_fwd(qk, wD, qk_out, rstd_qk, rows_q, s.D, 1e-6f, st));
      CUDA_CHECK(kernels::rmsnorm_fwd(k_in, wD, qk_out + rows_q * s.D, rstd_qk + rows_q, rows_k, s.D, 1e-6f, st));
    }, qk_out, T * QK);
    rate(EagerRate::headnorm_bwd, double(T * QK), [&] {  // qk_out as the incoming gradient
      CUDA_CHECK(kernels::rmsnorm_bwd(qk_out, qk, wD, rstd_qk, qk_dx, dwD, ws_qk, rows_q, s.D, st));
      CUDA_CHECK(kernels::rmsnorm_bwd(qk_out + rows_q * s.D, k_in, wD, rstd_qk + rows_q, qk_dx + rows_q * s.D, dwD, ws_qk, rows_k,
                                      s.D, st));
    }, qk_dx, T * QK);
    rate(EagerRate::add_fwd, double(Th), [&] { CUDA_CHECK(kernels::add(x, dy, y, Th, st)); }, y, Th);
    rate(EagerRate::swiglu_fwd, double(TF), [&] { CUDA_CHECK(kernels::swiglu_fwd(g, u, act, TF, st)); }, act, TF);
    rate(EagerRate::swiglu_bwd, double(TF), [&] { CUDA_CHECK(kernels::swiglu_bwd(act, g, u, dg, du, TF, st)); }, dg, TF);
    rate(EagerRate::embed_fwd, double(Th), [&] { CUDA_CHECK(kernels::embedding_fwd(embed, tokens, y, T, h, st)); }, y, Th);
    rate(EagerRate::embed_bwd, double(Th), [&] { CUDA_CHECK(kernels::embedding_bwd(dy, tokens, d_embed, T, h, st)); });
    rate(EagerRate::embed_grad, double(Vh), [&] { CUDA_CHECK(cudaMemsetAsync(d_embed, 0, static_cast<std::size_t>(Vh) * 4, st)); });
    // the cross-entropy overwrites its input with the gradient: refill the chunk each time, timed apart
    const double t_fill = core::median(runtime::cuda::time_on_stream(st, warmup, iters, [&] { fill(logits, s.T_loss * s.V, 11, 0, 1); }));
    rate(EagerRate::loss_fwd, double(s.T_loss * s.V), [&] {
      fill(logits, s.T_loss * s.V, 11, 0, 1);
      CUDA_CHECK(kernels::cross_entropy_fwd_bwd(logits, labels, loss, s.T_loss, s.V, float(s.T_loss), st));
    }, logits, s.T_loss * s.V);
    // the optimizer on one tensor: its norm pass, the coefficient, AdamW (HF's defaults; the values do not
    // change the traffic), the updated parameters checked finite
    kernels::AdamStep hp{5e-5f, 0.9f, 0.999f, 1e-8f, 0.f, 0.1f, 0.001f};
    rate(EagerRate::adam_step, double(n_opt), [&] {
      CUDA_CHECK(kernels::grad_sq_partials(grad, n_opt, partials, st));
      CUDA_CHECK(kernels::clip_coefficient(partials, kernels::kNormBlocks, 1.f, norm_coef, st));
      CUDA_CHECK(kernels::adamw_step(param, master, m1, m2, grad, n_opt, hp, norm_coef + 1, st));
    }, param, n_opt);
    auto& lf = rates[static_cast<std::size_t>(EagerRate::loss_fwd)];
    lf = std::max(0.0, lf - t_fill * hbm_GBps * 1e9 / double(s.T_loss * s.V));
    report += fmt::format("  (loss.fwd: the chunk's refill, {:.1f} us, taken out: {:.2f} B/elem)\n", t_fill * 1e6, lf);
    if (!(lf > 0)) lf = -1;
  } catch (...) {
    cudaStreamDestroy(st);
    throw;
  }
  CUDA_CHECK(cudaStreamDestroy(st));
  return rates;
}

}  // namespace ulysses::calib::cuda
