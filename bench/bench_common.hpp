#pragma once
// What the CUDA benches share (bench/*_bench.cpp): one rank's rows and their aggregation over
// ranks, timing with CUDA events with the ranks aligned, a bare NCCL call on the comm stream,
// reading a device counter.
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench/bench.hpp"
#include "runtime/cuda/block_runner.hpp"
#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::bench {

// One rank's rows: name, bytes/flops, wrong, per-iteration seconds.
struct RankRows {
  std::vector<BenchRow> rows;
  std::vector<std::vector<double>> times;
};

// Serialised rows of one rank (Cluster::run's per-rank result) and back.
std::string pack_rows(const RankRows& r);
RankRows unpack_rows(const std::string& s);

// The rows of rank 0 with the max over ranks of the per-rank median and the max over ranks
// and iterations; #wrong summed over ranks.
BenchResult aggregate(runtime::cuda::Cluster& cl, const std::vector<std::string>& raw);

// Times fn (enqueued on ctx.stream and/or joined into it) warmup + iters times, ranks aligned.
template <class F>
std::vector<double> time_it(runtime::cuda::RankCtx& ctx, runtime::cuda::BlockRunner& run, const RunOptions& opt, F&& fn) {
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
void on_comm(runtime::cuda::RankCtx& ctx, F&& fn) {
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(e, ctx.stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.comm_stream, e, 0));
  fn();
  CUDA_CHECK(cudaEventRecord(e, ctx.comm_stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, e, 0));
  CUDA_CHECK(cudaEventDestroy(e));
}

// The device counter at w, read on ctx.stream.
std::int64_t read_counter(runtime::cuda::RankCtx& ctx, unsigned long long* w);

}  // namespace ulysses::bench
