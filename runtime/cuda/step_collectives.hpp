#pragma once
// ZeRO-3's collectives among the ranks of the step (runtime/cuda/zero3.hpp): the parameters' shards all-gathered
// before use, the gradients reduce-scattered after the backward, the optimizer's norm partials all-gathered. Each is
// a collective (every rank calls it with the same sizes, in the same order); the sources are read after the work
// queued on `stream` before the call, and work queued on `stream` after it sees the result. Sums run in ascending
// rank order (NCCL's: its own order). Implemented over logical ranks of one GPU (loopback_ranks.hpp) and over GPUs
// (nccl_ranks.hpp; not yet run: no two GPUs were lent).
#include <cstdint>

#include <cuda_runtime.h>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {

enum class Elem { bf16, f32 };
inline std::int64_t elem_bytes(Elem e) { return e == Elem::bf16 ? 2 : 4; }

class StepCollectives {
 public:
  virtual ~StepCollectives() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // full [P * n] = every rank's part [n], in rank order; part may be full's own slice, full + rank() * n (in place)
  virtual void all_gather(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) = 0;
  // part [n] = the sum over ranks c (ascending) of full_c [r * n, (r + 1) * n)
  virtual void reduce_scatter(const void* full, void* part, std::int64_t n, Elem e, cudaStream_t stream) = 0;
  // The next layer's prefetch: all_gather ordered after the work queued on `stream` so far, but work queued on
  // `stream` later sees `full` only after join(stream). By default (logical ranks, whose collectives the host
  // completes in the call) it is all_gather itself.
  virtual void all_gather_ahead(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) {
    all_gather(part, full, n, e, stream);
  }
  // Work queued on `stream` after this call sees every all_gather_ahead issued before it.
  virtual void join(cudaStream_t stream) { (void)stream; }
  // The host waits for `stream` (the host optimizer's norm between ranks). Over GPUs: bounded by the rank's
  // timeout and its peers' failures (RankCtx::wait); logical ranks: a plain synchronize (a failed peer aborts their
  // group's barriers before any copy of theirs is queued).
  virtual void wait(cudaStream_t stream, const char* what) {
    (void)what;
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }
};

// ZeRO-3's machinery over one rank (offload_params at sp 1: the parts are whole tensors on the host, gathered into
// the two layer slots): each collective a copy on the stream, none when in place (as the step runner calls them:
// the gathers in place after the fetch, the gradients their own parts).
class OneRank final : public StepCollectives {
 public:
  int rank() const override { return 0; }
  int ranks() const override { return 1; }
  void all_gather(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) override { copy(part, full, n, e, stream); }
  void reduce_scatter(const void* full, void* part, std::int64_t n, Elem e, cudaStream_t stream) override { copy(full, part, n, e, stream); }

 private:
  static void copy(const void* from, void* to, std::int64_t n, Elem e, cudaStream_t stream) {
    if (from != to) CUDA_CHECK(cudaMemcpyAsync(to, from, static_cast<std::size_t>(n * elem_bytes(e)), cudaMemcpyDeviceToDevice, stream));
  }
};

}  // namespace ulysses::runtime::cuda
