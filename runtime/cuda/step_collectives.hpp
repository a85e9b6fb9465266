#pragma once
// ZeRO-3's collectives among the ranks of the step (runtime/cuda/zero3.hpp): the parameters' shards all-gathered
// before use, the gradients reduce-scattered after the backward, the optimizer's norm partials all-gathered. Each is
// a collective (every rank calls it with the same sizes, in the same order); the sources are read after the work
// queued on `stream` before the call, and work queued on `stream` after it sees the result. Sums run in ascending
// rank order (NCCL's: its own order). Implemented over logical ranks of one GPU (loopback_ranks.hpp) and over GPUs
// (nccl_ranks.hpp; not yet run: no two GPUs were lent).
#include <cstdint>

#include <cuda_runtime.h>

namespace ulysses::runtime::cuda {

enum class Elem { bf16, f32 };
inline std::int64_t elem_bytes(Elem e) { return e == Elem::bf16 ? 2 : 4; }

class StepCollectives {
 public:
  virtual ~StepCollectives() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // full [P * n] = every rank's part [n], in rank order
  virtual void all_gather(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) = 0;
  // part [n] = the sum over ranks c (ascending) of full_c [r * n, (r + 1) * n)
  virtual void reduce_scatter(const void* full, void* part, std::int64_t n, Elem e, cudaStream_t stream) = 0;
};

}  // namespace ulysses::runtime::cuda
