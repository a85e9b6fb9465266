#pragma once
// The Ulysses exchange on one rank: pack (kernels/pack.cuh), one grouped ncclSend/ncclRecv
// over every tensor and peer, unpack. Layouts and index maps: core/layout.hpp.
//
// Copies that are not needed are not made: with B = 1 a head-sharded tensor is already the
// concatenation of the P chunks, so
//   seq->head: the pack writes chunk r straight into x_head and the peers' chunks are received
//              straight into x_head (no unpack);
//   head->seq: chunks are sent straight from x_head (no pack); the unpack reads chunk r from x_head.
// Slices (B = 1): the local sequence is cut into `slices` ranges; slice k+1 is packed on the
// compute stream while slice k travels on the communication stream.
// Own chunk: packed after the peers' chunks, so it runs while NCCL moves them.
// ULYSSES_A2A_OVERLAP=1: q, k, v packed in one launch, and packs that overlap a transfer use a
// 32-block grid (not yet measured on the GPU host; off by default).
// Streams: pack/unpack on ctx.stream, NCCL on ctx.comm_stream; on return ctx.stream is ordered
// after the whole exchange (nothing is waited for on the host).
//
// Transport: within one node the exchange is one kernel of direct stores into every rank's
// destination tensor (runtime/cuda/p2p.hpp, kernels/p2p_exchange.cuh): pack fused, nothing
// staged, nothing unpacked, no NCCL kernel. Used when every rank can reach every other and the
// destinations were registered (register_destinations, collective); otherwise, and for the summed
// send_once kv gradient, the NCCL path above. ULYSSES_A2A_TRANSPORT=nccl|p2p|auto picks.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/device_memory.hpp"
#include "runtime/cuda/p2p.hpp"
#include "core/layout.hpp"

namespace ulysses::runtime::cuda {

enum class Direction { seq_to_head, head_to_seq };

struct XTensor {
  core::Dims dims;     // the tensor that travels: H = its heads as held sequence-sharded (P for kv replicas)
  const void* src = nullptr;  // seq_to_head: x_seq [B,S_l,H,D]; head_to_seq: x_head [B,S,H_l,D]
  void* dst = nullptr;        // seq_to_head: x_head; head_to_seq: x_seq
  bool reduce = false;        // head_to_seq with H < P: dst[g] = fp32 sum of the R chunks (send_once gradient)
};

class Exchanger {
 public:
  // capacity_elems: the largest sum over one call's tensors of P * chunk_elems (bf16 elements).
  Exchanger(RankCtx& ctx, DeviceArena& arena, std::int64_t capacity_elems);
  ~Exchanger();
  void run(Direction dir, const std::vector<XTensor>& xs, int slices = 1);

  // Collective (every rank, same order): the tensors that exchanges write into, made reachable
  // for direct stores. Buffers must outlive the Exchanger.
  void register_destinations(const std::vector<void*>& dsts);
  // "p2p" or "nccl": what run() uses for exchanges whose destinations are registered
  std::string transport() const;
  std::string p2p_unavailable_reason() const { return p2p_ ? p2p_->why_not() : "not constructed"; }
  void force_nccl(bool on) { force_nccl_ = on; }  // bench: time the NCCL path next to p2p

  // Bare NCCL baselines on the same send/recv buffers, for `ulysses bench exchange`.
  void bare_alltoall(std::int64_t elems_per_rank);       // ncclAlltoAll, bf16
  void bare_sendrecv(std::int64_t elems_per_rank);       // one group of P-1 sends + P-1 recvs
  void* send_buffer() const { return send_.get(); }
  void* recv_buffer() const { return recv_.get(); }

 private:
  RankCtx& ctx_;
  DevBuf<std::uint16_t> send_, recv_;
  std::int64_t capacity_;
  bool overlap_ = false;  // ULYSSES_A2A_OVERLAP=1: multi-tensor pack, small grids next to NCCL
  bool force_nccl_ = false;
  std::unique_ptr<P2pTransport> p2p_;
  bool run_p2p(Direction dir, const std::vector<XTensor>& xs);
  std::vector<cudaEvent_t> packed_, moved_;
  void ensure_events(int n);
};

}  // namespace ulysses::runtime::cuda
