#pragma once
// Direct (peer-to-peer) Ulysses exchange: every rank stores its rows straight into the
// destination tensor of every rank of the node - over NVLink for the peers, a plain copy for
// itself - in one kernel. The pack is fused into the transfer and nothing is unpacked: no
// send/recv staging buffers, no NCCL kernel. Plain C++ header, usable from .cpp and .cu.
//
// Index maps (core/layout.hpp; on rank r, destination rank c, x the travelling tensor):
//   seq -> head (a2a.qkv.fwd, a2a.out.bwd), src = x_seq on r [B,S_l,H,D], dst = x_head on c [B,S,H_l,D]:
//     x_head_c[b][r*S_l + s_l][h_l][d] = x_seq_r[b][s_l][source_head(c, h_l)][d]
//   head -> seq (a2a.out.fwd, a2a.qkv.bwd), src = x_head on r, dst = x_seq on c, H >= P only:
//     x_seq_c[b][s_l][r*H_l + h_l][d] = x_head_r[b][c*S_l + s_l][h_l][d]
//   (the send_once kv gradient, H < P, sums R chunks: it stays on the NCCL path.)
// Every map is linear in d, so rows move as 16-byte vectors (D * 2 bytes % 16 == 0).
//
// Synchronisation, per block b (the grid is the same on every rank, all blocks co-resident):
//   start: b writes `epoch` into flag[start][b][r] of every rank and waits until its own
//          flag[start][b][c] == epoch for every c: block b of every rank has started, so every
//          rank's earlier work on its stream (readers of the destination) is complete;
//   copy:  b's share of the tiles, destinations interleaved (rank r+1, r+2, ..., r itself);
//   end:   __syncthreads, a system-scope fence, then flag[end][b][r] = epoch on every rank, and
//          wait for flag[end][b][c] == epoch: every rank's block b has stored its share into us.
//          The kernel ends when all its blocks passed: everything destined here has landed.
// Flags are monotonic (epoch = call count, the same on every rank), so nothing is reset.
// A peer that never arrives: past timeout_ns the kernel sets *timeout_flag (host-mapped) and
// traps, so the host sees an error instead of a hang (runtime/cuda/p2p.hpp explains it).
#include <cstdint>

#include <cuda_runtime.h>

#include "core/layout.hpp"

namespace ulysses::kernels {

inline constexpr int kP2pMaxPeers = 8;    // one node
inline constexpr int kP2pMaxJobs = 3;     // q, k, v
inline constexpr int kP2pMaxBlocks = 512; // flags per phase per peer
// flags buffer of one rank: [2 phases][kP2pMaxBlocks][kP2pMaxPeers] uint32
inline constexpr std::int64_t kP2pFlagWords = 2LL * kP2pMaxBlocks * kP2pMaxPeers;

struct P2pJob {
  const void* src = nullptr;              // on this rank
  void* dst[kP2pMaxPeers] = {};           // dst[c]: the destination tensor on rank c (peer address)
  core::Dims x{};                       // the travelling tensor (layout.hpp Dims)
};

struct P2pSync {
  unsigned* self = nullptr;                    // this rank's flags
  unsigned* peer[kP2pMaxPeers] = {};           // every rank's flags (peer[rank] == self)
  unsigned epoch = 0;                          // > 0, +1 per call, equal on every rank
  long long timeout_ns = 0;                    // spin limit of one wait
  int* timeout_flag = nullptr;                 // host-mapped; set to 1 + the missing rank on timeout
};

// One launch for every job (all share P and S). seq_to_head selects the map above.
// blocks: the agreed grid (<= kP2pMaxBlocks), equal on every rank.
cudaError_t p2p_exchange(bool seq_to_head, const P2pJob* jobs, int n_jobs, int rank, int P, const P2pSync& sync,
                         int blocks, cudaStream_t stream);

}  // namespace ulysses::kernels
