#pragma once
// The Ulysses exchange as a decoder layer of the step sees it (sp > 1, docs/STEP_RUNTIME.md "The step at
// sp > 1"): q, k, v from sequence-sharded to head-sharded before attention, its output back, and the inverse
// in the backward. Layouts and index maps: core/layout.hpp; the tensors: exchange.hpp's XTensor (B = 1).
// Implemented over logical ranks of one GPU (loopback_ranks.hpp: NCCL refuses two ranks on one device) and over
// GPUs (nccl_ranks.hpp: the block's Exchanger on its NCCL path; written without two GPUs, not yet run).
// head_to_seq with XTensor::reduce (a kv gradient with H < P): each head is the sum of its R = P / H replicas'
// chunks, in ascending rank order; the Exchanger sums in fp32 and rounds once, the loopback rounds to bf16 after
// each addition (the same for R = 2; the decoder layer's tolerance covers more).
#include <vector>

#include <cuda_runtime.h>

#include "runtime/cuda/exchange.hpp"

namespace ulysses::runtime::cuda {

class LayerExchange {
 public:
  virtual ~LayerExchange() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // A collective: every rank calls it with the same tensors' dims, in the same order. The sources are
  // read after the work queued on `stream` before the call; on return, work queued on `stream` after it
  // sees the destinations written.
  virtual void run(Direction dir, const std::vector<XTensor>& xs, cudaStream_t stream) = 0;
};

}  // namespace ulysses::runtime::cuda
