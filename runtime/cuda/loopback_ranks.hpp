#pragma once
// P logical ranks on one GPU, one host thread each, moving bytes by device copies: the Ulysses exchange
// (layer_exchange.hpp) and ZeRO-3's collectives (step_collectives.hpp). This is how the sp > 1 step is checked
// on one GPU (tests/gpu/test_step_sp.cpp): NCCL refuses two ranks of a communicator on one device. Not a fast
// path: every call synchronises the rank's stream, meets its peers at a barrier, copies from the peers' tensors
// (cudaMemcpy2DAsync for the exchange's strided chunks), synchronises again and meets them once more (no source
// is overwritten while a peer still reads it).
// Sums (reduce_scatter; head_to_seq with reduce: a kv gradient with H < P, rank r's head g is the sum of the
// R = P/H chunks of ranks g*R .. g*R+R-1): the peers' parts are copied into a buffer of this rank and added in
// ascending rank order with kernels::add (bf16 rounded after each addition: for two ranks the fp32 sum rounded
// once; fp32 in fp32). That buffer is the one device allocation of its own (outside the step's arena).
// A rank that fails calls abort() on the group: its peers' waits throw PeerFailed (runtime/barrier.hpp).
#include <functional>
#include <string>
#include <vector>

#include "runtime/barrier.hpp"
#include "runtime/cuda/layer_exchange.hpp"
#include "runtime/cuda/step_collectives.hpp"

namespace ulysses::runtime::cuda {

class LoopbackGroup {
 public:
  explicit LoopbackGroup(int P);
  int size() const { return P_; }
  void abort() { bar_.abort(); }

 private:
  friend class LoopbackRank;
  int P_;
  AbortableBarrier bar_;
  std::vector<const std::vector<XTensor>*> tensors_;  // each rank's tensors of the exchange under way
  std::vector<const void*> buffers_;                 // each rank's source of the collective under way
};

class LoopbackRank : public LayerExchange, public StepCollectives {
 public:
  LoopbackRank(LoopbackGroup& g, int rank);  // on the calling thread's current device
  ~LoopbackRank() override;
  LoopbackRank(const LoopbackRank&) = delete;
  LoopbackRank& operator=(const LoopbackRank&) = delete;

  int rank() const override { return r_; }
  int ranks() const override { return g_.size(); }
  void run(Direction dir, const std::vector<XTensor>& xs, cudaStream_t stream) override;
  void all_gather(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) override;
  void reduce_scatter(const void* full, void* part, std::int64_t n, Elem e, cudaStream_t stream) override;

 private:
  LoopbackGroup& g_;
  int r_;
  void* tmp_ = nullptr;  // the sums' buffer, grown on demand
  std::size_t tmp_bytes_ = 0;
  void* tmp(std::size_t bytes);
  // around each collective: my sources written, published; then, after the copies, every peer's read
  void publish(const void* mine, cudaStream_t s);
  void done(cudaStream_t s);
  void copy_in(Direction dir, const XTensor& mine, int c, const XTensor& peer, cudaStream_t s);
  void reduce_in(const XTensor& mine, const std::vector<const XTensor*>& peers, cudaStream_t s);
};

// P logical ranks of device 0: one thread each with its own non-blocking stream and LoopbackRank, running
// fn(rank, exchange, collectives, stream); returns each rank's string, in rank order. The first rank to throw aborts
// the group (its peers' waits throw PeerFailed, swallowed) and its exception is rethrown here.
using LoopbackFn = std::function<std::string(int rank, LayerExchange& ex, StepCollectives& coll, cudaStream_t s)>;
std::vector<std::string> run_loopback_ranks(int P, const LoopbackFn& fn);

}  // namespace ulysses::runtime::cuda
