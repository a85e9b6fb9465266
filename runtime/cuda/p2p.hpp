#pragma once
// Direct stores between the GPUs of one node, for the peer-to-peer Ulysses exchange
// (kernels/p2p_exchange.cuh has the kernel, its index maps and its flag protocol).
//
// Every rank constructs one P2pTransport at the same point of the program (a collective):
//   single-process mode: the rank threads' devices enable peer access to each other and share
//     raw device pointers (one address space);
//   launcher mode: every rank must be on the same host; buffers are shared with CUDA IPC
//     (cudaIpcGetMemHandle / cudaIpcOpenMemHandle, lazy peer access).
// The decision is taken together: if any rank cannot reach any other, available() is false on
// every rank and the exchange stays on NCCL. ULYSSES_A2A_TRANSPORT=nccl|p2p|auto (default
// auto) forces one; p2p when it is impossible is an error.
//
// Buffers: register_buffers() (collective, same count and order on every rank) makes local
// cudaMalloc'd buffers addressable from every rank; peer_address(mine, c) is the matching
// buffer of rank c (the k-th registered buffer of every rank belongs together). Buffers must
// stay allocated while the transport lives (BlockRunner owns both).
//
// A rank that never reaches an exchange: the kernel on the others spins up to the context's
// timeout_s, then writes the missing rank into a host-mapped word (RankCtx::p2p_timeout) and
// traps; RankCtx::wait turns that into one clear error line. Never a hang.
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/p2p_exchange.cuh"
#include "runtime/cuda/cluster.hpp"

namespace ulysses::runtime::cuda {

class P2pTransport {
 public:
  explicit P2pTransport(RankCtx& ctx);
  ~P2pTransport();
  P2pTransport(const P2pTransport&) = delete;
  P2pTransport& operator=(const P2pTransport&) = delete;

  bool available() const { return available_; }
  const std::string& why_not() const { return why_not_; }  // empty when available
  int blocks() const { return blocks_; }                  // the grid agreed by every rank

  void register_buffers(const std::vector<void*>& mine);  // collective; no-op when unavailable
  void* peer_address(const void* mine, int c) const;      // nullptr when `mine` is not registered

  // Enqueues one exchange of the jobs (dst[] filled here from peer_address of each job's dst).
  // Returns false (nothing enqueued) when a destination is not registered.
  bool exchange(bool seq_to_head, const std::vector<const void*>& srcs, const std::vector<void*>& dsts,
                const std::vector<core::Dims>& dims, cudaStream_t stream);

 private:
  RankCtx& ctx_;
  bool available_ = false, launcher_ = false;
  std::string why_not_;
  int blocks_ = 0;
  unsigned epoch_ = 0;
  unsigned* flags_ = nullptr;  // this rank's flag words (cudaMalloc)
  int* timeout_host_ = nullptr;  // cudaHostAllocMapped
  std::unordered_map<const void*, std::vector<void*>> peers_;  // my buffer -> every rank's
  std::vector<void*> opened_;                                 // IPC mappings to close
  std::vector<void*> flag_peers_;
  void decide();
};

}  // namespace ulysses::runtime::cuda
