#pragma once
// The step's sp ranks over GPUs, one per rank (runtime/cuda/cluster.hpp's RankCtx): the Ulysses exchange through
// the block's Exchanger on its NCCL path (runtime/cuda/exchange.hpp; p2p would need the step's destinations
// registered) on the rank's communicator and communication stream; ZeRO-3's collectives as ncclAllGather /
// ncclReduceScatter on a communicator split from it and a stream of their own, so that the next layer's prefetch
// (all_gather_ahead) runs beside the layer's exchanges instead of ahead of them in one queue (DeepSpeed, too, runs
// ZeRO's collectives and the sequence-parallel all-to-all on separate groups). Each call is ordered after the work
// queued on the caller's stream by an event; all_gather and reduce_scatter also order the caller's later work after
// themselves, all_gather_ahead only at join. On a failure (an exception unwinding) the split communicator is aborted,
// not destroyed, so that no collective of it is left spinning. Its staging (the Exchanger's send and receive
// buffers, from the arena given here) is the memory mirror's `staging` (sim/step_runtime_memory.hpp).
// Written on 2026-12-07 without two GPUs to run it: tests/gpu/test_step_sp.cpp's and test_step_run_sp.cpp's two-GPU
// cases (skipped on a one-GPU host) are its first check.
#include <cstdint>
#include <vector>

#include "runtime/cuda/decoder_layer.hpp"
#include "runtime/cuda/exchange.hpp"
#include "runtime/cuda/layer_exchange.hpp"
#include "runtime/cuda/step_collectives.hpp"

namespace ulysses::runtime::cuda {

class NcclRank : public LayerExchange, public StepCollectives {
 public:
  // A collective (the Exchanger's set-up runs on every rank together). capacity_elems: exchange_capacity.
  NcclRank(RankCtx& ctx, DeviceArena& staging, std::int64_t capacity_elems);
  ~NcclRank() override;
  NcclRank(const NcclRank&) = delete;
  NcclRank& operator=(const NcclRank&) = delete;

  int rank() const override { return ctx_.rank; }
  int ranks() const override { return ctx_.world; }
  void run(Direction dir, const std::vector<XTensor>& xs, cudaStream_t stream) override;
  void all_gather(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) override;
  void reduce_scatter(const void* full, void* part, std::int64_t n, Elem e, cudaStream_t stream) override;
  void all_gather_ahead(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) override;
  void join(cudaStream_t stream) override { follow(zero_stream_, stream); }
  void wait(cudaStream_t stream, const char* what) override;

  // The largest exchange of a layer with d.T tokens per rank at sp = P, in bf16 elements: P chunks of q plus P of
  // k and of v (H_kv < P: one replica per rank), S_l = d.T rows each.
  static std::int64_t exchange_capacity(const DecoderLayerDims& d, int P);

 private:
  RankCtx& ctx_;
  Exchanger ex_;
  ncclComm_t zero_comm_ = nullptr;      // ZeRO-3's: split from ctx.comm (blocking)
  cudaStream_t zero_stream_ = nullptr;  // ... and its stream
  cudaEvent_t hop_ = nullptr;
  void follow(cudaStream_t first, cudaStream_t then);  // `then` waits for the work queued on `first` so far
};

}  // namespace ulysses::runtime::cuda
