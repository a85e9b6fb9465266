// calib/cuda/collectives.hpp: per size, one checked run of each collective, then the timed ones on the NCCL stream
// (CUDA events around each call, the ranks aligned by a host all-gather before each iteration).
#include "calib/cuda/collectives.hpp"
#include "calib/cuda/cuda_owners.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "core/bf16.hpp"
#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/device_memory.hpp"
#include "runtime/cuda/report.hpp"

namespace ulysses::calib::cuda {

using runtime::cuda::Reader;
using runtime::cuda::RankCtx;
using runtime::cuda::Writer;

namespace {

// n bf16 of `value` at p (host staging, one copy)
void fill(void* p, std::int64_t n, float value) {
  const std::vector<core::bf16> h(static_cast<std::size_t>(n), core::float_to_bf16(value));
  CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(core::bf16), cudaMemcpyHostToDevice));
}

// elements of [p, p + n) that are not `value`, chunk by chunk when `per_chunk` (chunk j must hold j + 1)
std::int64_t count_wrong(const void* p, std::int64_t n, std::int64_t chunk, bool per_chunk, float value) {
  std::vector<core::bf16> h(static_cast<std::size_t>(n));
  CUDA_CHECK(cudaMemcpy(h.data(), p, h.size() * sizeof(core::bf16), cudaMemcpyDeviceToHost));
  std::int64_t wrong = 0;
  for (std::int64_t c0 = 0; c0 < n; c0 += chunk) {
    const core::bf16 want = core::float_to_bf16(per_chunk ? float(c0 / chunk + 1) : value);
    for (std::int64_t i = c0; i < std::min(n, c0 + chunk); ++i) wrong += h[static_cast<std::size_t>(i)] != want;
  }
  return wrong;
}

}  // namespace

std::vector<CollectiveRow> collective_times(int P, const std::vector<std::int64_t>& bytes, int warmup, int iters,
                                            double timeout_s) {
  if (P < 2 || P > 8) throw std::invalid_argument(fmt::format("collective_times: P = {} (2..8: bf16 sums stay exact)", P));
  for (std::int64_t b : bytes)
    if (b <= 0 || b % (2 * P)) throw std::invalid_argument(fmt::format("collective_times: {} bytes is no multiple of 2 P", b));
  const std::int64_t max_bytes = *std::max_element(bytes.begin(), bytes.end());
  auto cl = runtime::cuda::Cluster::acquire(P, timeout_s);
  const std::vector<std::string> all = cl->run([&](RankCtx& ctx) {
    // send [max_bytes] (a reduce-scatter's input; an all-gather sends its first bytes / P), recv [max_bytes]
    runtime::cuda::DeviceArena arena(ctx.device);
    const runtime::cuda::DevBuf<core::bf16> send_buf(arena, max_bytes / 2), recv_buf(arena, max_bytes / 2);
    void* const sp = send_buf.get();
    void* const rp = recv_buf.get();
    const Events ev(2);
    const cudaEvent_t e0 = ev.e[0], e1 = ev.e[1];
    Writer w;
    fill(sp, max_bytes / 2, float(ctx.rank + 1));
    for (std::int64_t b : bytes) {
      const std::int64_t elems = b / 2, chunk = elems / P;
      auto gather = [&] {
        ctx.nccl(ncclAllGather(sp, rp, static_cast<std::size_t>(chunk), ncclBfloat16, ctx.comm, ctx.comm_stream),
                 "ncclAllGather");
      };
      auto reduce = [&] {
        ctx.nccl(ncclReduceScatter(sp, rp, static_cast<std::size_t>(chunk), ncclBfloat16, ncclSum, ctx.comm,
                                   ctx.comm_stream),
                 "ncclReduceScatter");
      };
      // checked once: the gather's chunk j is rank j's value, the reduce-scatter's output the sum over ranks
      std::int64_t wrong = 0;
      gather();
      ctx.wait(ctx.comm_stream, "an all-gather check");
      wrong += count_wrong(rp, elems, chunk, true, 0);
      reduce();
      ctx.wait(ctx.comm_stream, "a reduce-scatter check");
      wrong += count_wrong(rp, chunk, chunk, false, float(P * (P + 1) / 2));
      // nccl-tests' way: the warm-up calls, the ranks aligned, then `iters` calls back to back between one pair of
      // events (no host gap or barrier skew inside the timed span), their mean
      auto timed = [&](const std::function<void()>& op) {
        for (int it = 0; it < warmup; ++it) op();
        ctx.wait(ctx.comm_stream, "the warm-up collectives");
        ctx.allgather("");  // the ranks start together
        CUDA_CHECK(cudaEventRecord(e0, ctx.comm_stream));
        for (int it = 0; it < iters; ++it) op();
        CUDA_CHECK(cudaEventRecord(e1, ctx.comm_stream));
        ctx.wait(ctx.comm_stream, "the timed collectives");
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        return ms * 1e-3 / iters;
      };
      const double t_gather = timed(gather), t_reduce = timed(reduce);
      w.pod(b), w.pod(t_gather), w.pod(t_reduce), w.pod(wrong);
    }
    return w.out;
  });
  std::vector<CollectiveRow> rows(bytes.size());
  for (const std::string& r : all) {
    Reader rd(r);
    for (CollectiveRow& row : rows) {
      row.bytes = rd.pod<std::int64_t>();
      row.allgather_s = std::max(row.allgather_s, rd.pod<double>());
      row.reduce_scatter_s = std::max(row.reduce_scatter_s, rd.pod<double>());
      row.wrong += rd.pod<std::int64_t>();
    }
  }
  for (const CollectiveRow& row : rows)
    if (row.wrong > 0)
      throw std::runtime_error(fmt::format("calibrate: NCCL collectives over {} GPUs at {} bytes: {} elements wrong", P, row.bytes,
                                           row.wrong));
  return rows;
}

}  // namespace ulysses::calib::cuda
