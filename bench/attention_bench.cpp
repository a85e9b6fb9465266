// `ulysses bench attention`: one rank's local attention (H/P heads, full S), fwd and bwd, the
// flash and the reference kernels, each validated first against the fp64 oracle at
// S_check = min(S, 512).
#include <stdexcept>

#include <fmt/format.h>

#include "bench/attention_validate.hpp"
#include "bench/attn_flops.hpp"
#include "bench/bench_common.hpp"
#include "runtime/cuda/tracing.hpp"

namespace ulysses::bench {
namespace {

using namespace ulysses::runtime;
using namespace ulysses::runtime::cuda;

std::string attention_rank(RankCtx& ctx, const BlockShape& s, const RunOptions& opt) {
  const std::int64_t H_l = s.H / s.P, H_kv_l = core::heads_per_rank(s.H_kv, s.P);
  const std::int64_t S_check = std::min<std::int64_t>(s.S, 512);
  const AttnFlops flops = attn_flops(s.B, s.S, H_l, H_kv_l, s.D, s.causal);
  RankRows out;
  DeviceArena arena(ctx.device);
  AttnBufs b = attn_bufs(arena, s.B, s.S, H_l, H_kv_l, s.D);
  fill_attn(b, s.B, s.S, H_l, H_kv_l, s.D, opt.seed, ctx.stream);
  for (auto [kind, kname] : {std::pair{kernels::AttnKernel::flash, "flash"}, {kernels::AttnKernel::reference, "reference"}}) {
    std::string note;
    const std::int64_t wrong = validate_attention(ctx, kind, s.B, S_check, H_l, H_kv_l, s.D, s.causal, opt.seed, note);
    const auto f = fwd_params(b, s.B, s.S, H_l, H_kv_l, s.D, s.causal);
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
    out.rows.push_back({fmt::format("attn.fwd {}", kname), 0, flops.fwd, 0, 0, wrong, note});
    out.times.push_back(tf);
    out.rows.push_back({fmt::format("attn.bwd {}", kname), 0, flops.bwd, 0, 0, wrong, note});
    out.times.push_back(tb);
  }
  return pack_rows(out);
}

}  // namespace

BenchResult bench_attention(const BlockShape& s, const RunOptions& opt) {
  if (const std::string why = runtime::validate(s); !why.empty()) throw std::invalid_argument(why);
  runtime::cuda::prepare_nvtx_injection();
  auto cl = runtime::cuda::Cluster::acquire(static_cast<int>(s.P), opt.timeout_s);
  return aggregate(*cl, cl->run([&](runtime::cuda::RankCtx& ctx) { return attention_rank(ctx, s, opt); }));
}

}  // namespace ulysses::bench
