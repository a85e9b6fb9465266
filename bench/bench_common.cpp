// What the CUDA benches share: rows of one rank, their aggregation, a device counter.
#include "bench/bench_common.hpp"

#include <algorithm>

#include "runtime/cuda/report.hpp"
#include "core/stats.hpp"

namespace ulysses::bench {

using namespace ulysses::runtime;
using namespace ulysses::runtime::cuda;

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
      b.median_s = std::max(b.median_s, ulysses::core::median(r.times[i]));
      for (double t : r.times[i]) b.max_s = std::max(b.max_s, t);
      wrong += std::max<std::int64_t>(r.rows[i].wrong, 0);
    }
    b.wrong = ranks[0].rows[i].wrong < 0 ? -1 : wrong;
    out.rows.push_back(b);
  }
  out.launcher_follower = cl.launcher_mode() && cl.my_rank() != 0;
  return out;
}

std::int64_t read_counter(RankCtx& ctx, unsigned long long* w) {
  unsigned long long h = 0;
  CUDA_CHECK(cudaMemcpyAsync(&h, w, sizeof h, cudaMemcpyDeviceToHost, ctx.stream));
  ctx.wait(ctx.stream, "a validation count");
  return static_cast<std::int64_t>(h);
}

double algbw_GBps(const BenchRow& r) { return r.median_s > 0 ? r.bytes_per_rank / r.median_s * 1e-9 : 0; }
double busbw_GBps(const BenchRow& r, std::int64_t P) { return algbw_GBps(r) * static_cast<double>(P - 1) / static_cast<double>(P); }


}  // namespace ulysses::bench
