// `ulysses bench attention --sweep | --quick | --points` on the device: per point the fp64
// oracle at a small S (cached), the full-S run checked for non-finite values and at spot rows,
// then fwd and bwd timed (bench.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "bench/attention_validate.hpp"
#include "bench/attn_flops.hpp"
#include "bench/bench_common.hpp"
#include "kernels/attention_flash.hpp"
#include "kernels/testdata.cuh"
#include "runtime/checks.hpp"
#include "core/bf16.hpp"
#include "core/stats.hpp"

namespace ulysses::bench {
namespace {

using namespace ulysses::runtime;
using namespace ulysses::runtime::cuda;

// Rows [S, D] of head `h` of a [1, S, H, D] bf16 tensor, widened to double.
std::vector<double> head_rows(const DevBuf<std::uint16_t>& x, std::int64_t S, std::int64_t H, std::int64_t D, std::int64_t h) {
  std::vector<std::uint16_t> raw(static_cast<std::size_t>(S * D));
  CUDA_CHECK(cudaMemcpy2D(raw.data(), D * 2, x.get() + h * D, H * D * 2, D * 2, S, cudaMemcpyDeviceToHost));
  std::vector<double> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = core::bf16_to_float(raw[i]);
  return out;
}

// Row i of head h of a [1, S, H, D] bf16 tensor.
std::vector<double> one_row(const DevBuf<std::uint16_t>& x, std::int64_t H, std::int64_t D, std::int64_t h, std::int64_t i) {
  std::vector<std::uint16_t> raw(static_cast<std::size_t>(D));
  CUDA_CHECK(cudaMemcpy(raw.data(), x.get() + (i * H + h) * D, static_cast<std::size_t>(D * 2), cudaMemcpyDeviceToHost));
  std::vector<double> out(raw.size());
  for (std::size_t k = 0; k < raw.size(); ++k) out[k] = core::bf16_to_float(raw[k]);
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
std::int64_t spot_rows_wrong(AttnBufs& b, const AttnPoint& p, double* worst, double* worst_lse) {
  const std::int64_t S = p.S, H = p.H, H_kv = p.H_kv, D = p.D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<std::int64_t> rows{0, S / 3, std::min(S - 1, 2 * S / 3 + 1), S - 1};
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  std::vector<std::int64_t> heads{0, H - 1};
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  std::vector<float> got_o, got_dq;
  std::vector<double> ref_o, ref_dq;
  std::int64_t wrong_lse = 0;
  *worst_lse = 0;
  for (std::int64_t h : heads) {
    const std::int64_t g = h / (H / H_kv);
    const std::vector<double> k = head_rows(b.k, S, H_kv, D, g), v = head_rows(b.v, S, H_kv, D, g);
    for (std::int64_t i : rows) {
      const std::vector<double> q = one_row(b.q, H, D, h, i), dout = one_row(b.dout, H, D, h, i);
      const std::vector<double> o_k = one_row(b.o, H, D, h, i), dq_k = one_row(b.dq, H, D, h, i);
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
  return {ulysses::core::median(t), static_cast<int>(t.size())};
}

struct OracleKey {
  std::int64_t S, H, H_kv, D;
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
  const AttnPoint& p = r.point;
  const AttnFlops flops = attn_flops(1, p.S, p.H, p.H_kv, p.D, p.causal);
  r.fwd_flops = flops.fwd, r.bwd_flops = flops.bwd;
  // 1. the fp64 oracle at a small S, same heads, head dim and mask (cached)
  const OracleKey key{std::min(p.S, opt.check_seq), p.H, p.H_kv, p.D, p.causal};
  auto it = std::find_if(oracle_cache.begin(), oracle_cache.end(), [&](const OracleResult& o) { return o.key == key; });
  if (it == oracle_cache.end()) {
    OracleResult o{key, 0, 0, "", ""};
    o.wrong = validate_attention(ctx, kernels::AttnKernel::flash, 1, key.S, key.H, key.H_kv, key.D, key.causal, opt.seed,
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
    b = attn_bufs(arena, 1, p.S, p.H, p.H_kv, p.D, false);
  } catch (const OutOfMemory& e) {
    const double gib = static_cast<double>((4 * p.H + 4 * p.H_kv) * p.S * p.D * 2 + p.H * p.S * 4 +
                                           static_cast<std::int64_t>(kernels::attn_bwd_workspace_bytes(
                                               kernels::AttnKernel::flash, 1, p.S, p.H, p.H_kv, p.D))) / (1ull << 30);
    r.status = fmt::format("out of memory (needs {:.1f} GiB of buffers)", gib);
    return;
  }
  fill_attn(b, 1, p.S, p.H, p.H_kv, p.D, opt.seed, ctx.stream);
  poison_outputs(b, ctx.stream);
  const auto fp = fwd_params(b, 1, p.S, p.H, p.H_kv, p.D, p.causal);
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

std::vector<AttnSweepRow> bench_attention_sweep(const std::vector<AttnPoint>& points, const AttnSweepOptions& opt,
                                                const std::function<void(const AttnSweepRow&)>& on_row,
                                                std::string* device) {
  auto cl = runtime::cuda::Cluster::acquire(1, opt.timeout_s);
  if (device) {
    *device = cl->describe() + "; attention kernels: D=128 " + kernels::attn_flash_kernels_in_use(128) +
              ", D=64 " + kernels::attn_flash_kernels_in_use(64);
  }
  std::vector<AttnSweepRow> rows;
  cl->run([&](runtime::cuda::RankCtx& ctx) {
    std::vector<OracleResult> cache;
    for (const AttnPoint& p : points) {
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

}  // namespace ulysses::bench
