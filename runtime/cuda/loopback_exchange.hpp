#pragma once
// P logical ranks on one GPU, one host thread each, exchanging through device copies (layer_exchange.hpp):
// the sp > 1 step checked on one GPU (tests/gpu/test_step_sp.cpp), since NCCL refuses two ranks of a
// communicator on one device. Not a fast path: every exchange synchronises the rank's stream, meets its
// peers at a barrier, copies each peer's chunks with cudaMemcpy2DAsync, synchronises again and meets them
// once more (no source is overwritten while a peer still reads it).
// head_to_seq with reduce (a kv gradient with H < P: rank r's head g is the sum of the R = P/H chunks of
// ranks g*R .. g*R+R-1): the chunks are copied into a contiguous buffer, summed in ascending rank order with
// kernels::add (bf16 after each addition: for R = 2 the fp32 sum rounded once, as the Exchanger's), then
// copied to their strided place. That buffer is the one device allocation of its own (outside the step's
// arena, which holds the layer's tensors only).
// A rank that fails calls abort() on the group: its peers' waits throw PeerFailed (runtime/barrier.hpp).
#include <vector>

#include "runtime/barrier.hpp"
#include "runtime/cuda/layer_exchange.hpp"

namespace ulysses::runtime::cuda {

class LoopbackGroup {
 public:
  explicit LoopbackGroup(int P);
  int size() const { return P_; }
  void abort() { bar_.abort(); }

 private:
  friend class LoopbackExchange;
  int P_;
  AbortableBarrier bar_;
  std::vector<const std::vector<XTensor>*> slot_;  // each rank's tensors of the exchange under way
};

class LoopbackExchange : public LayerExchange {
 public:
  LoopbackExchange(LoopbackGroup& g, int rank);  // on the calling thread's current device
  ~LoopbackExchange() override;
  LoopbackExchange(const LoopbackExchange&) = delete;
  LoopbackExchange& operator=(const LoopbackExchange&) = delete;

  int rank() const override { return r_; }
  int ranks() const override { return g_.size(); }
  void run(Direction dir, const std::vector<XTensor>& xs, cudaStream_t stream) override;

 private:
  LoopbackGroup& g_;
  int r_;
  void* sum_ = nullptr;  // reduce: [R + 1, S_l, D] bf16, grown on demand
  std::size_t sum_bytes_ = 0;
  void copy_in(Direction dir, const XTensor& mine, int c, const XTensor& peer, cudaStream_t s);
  void reduce_in(const XTensor& mine, const std::vector<const XTensor*>& peers, cudaStream_t s);
};

}  // namespace ulysses::runtime::cuda
