#pragma once
// Pack/unpack launchers of the Ulysses exchange (core/layout.hpp has the layouts and index
// maps; the kernels call those functions). Plain C++ header, usable from .cpp and .cu.
//
// Every tensor moves in 16-byte units (8 bf16 along d): D * elem_bytes must be a multiple of 16.
// A "chunk" is the block of one peer c in buffer layout buf[c][b][s_l][h_l][d]; the launchers
// take one pointer per chunk (ChunkPtrs), so a chunk can live in a send/recv buffer or - when
// B = 1 and the chunk already is contiguous rows of the head-sharded tensor - in the tensor
// itself (no copy). A null pointer skips that chunk. Only positions s_l in [s_lo, s_hi) are
// touched, so an exchange can be split into slices along the local sequence.
#include <cstdint>

#include <cuda_runtime.h>

#include "core/layout.hpp"

namespace ulysses::kernels {

inline constexpr int kMaxPeers = 64;

struct ChunkPtrs {
  void* p[kMaxPeers] = {};
};

// seq -> head pack (a2a.qkv.fwd, a2a.out.bwd), x = seq-sharded [B, S_l, H, D]:
//   chunk[c][b][s_l][h_l][d] = x_seq[b][s_l][source_head(c, h_l)][d]
// (source_head covers H >= P and the send_once kv case H < P.)
cudaError_t pack_seq_to_head(const void* x_seq, const ChunkPtrs& chunks, const core::Dims& x, int elem_bytes,
                             std::int64_t s_lo, std::int64_t s_hi, cudaStream_t stream);

// The same pack for up to kMaxJobs tensors (q, k, v) in one launch. max_blocks caps the grid
// (0 = enough blocks to fill the GPU): a small grid leaves SMs and memory bandwidth to a
// concurrent NCCL kernel when the pack overlaps the transfer.
inline constexpr int kMaxJobs = 3;
struct PackJob {
  const void* src = nullptr;
  ChunkPtrs chunks;
  core::Dims x{};
};
cudaError_t pack_seq_to_head_multi(const PackJob* jobs, int n_jobs, int elem_bytes, std::int64_t s_lo, std::int64_t s_hi,
                                   int max_blocks, cudaStream_t stream);

// seq -> head unpack: x_head[b][c*S_l + s_l][h_l][d] = chunk[c][b][s_l][h_l][d]
cudaError_t unpack_seq_to_head(const ChunkPtrs& chunks, void* x_head, const core::Dims& x, int elem_bytes,
                               std::int64_t s_lo, std::int64_t s_hi, cudaStream_t stream);

// head -> seq pack (a2a.out.fwd, a2a.qkv.bwd): chunk[c][b][s_l][h_l][d] = x_head[b][c*S_l + s_l][h_l][d]
cudaError_t pack_head_to_seq(const void* x_head, const ChunkPtrs& chunks, const core::Dims& x, int elem_bytes,
                             std::int64_t s_lo, std::int64_t s_hi, cudaStream_t stream);

// head -> seq unpack, x.H >= x.P: x_seq[b][s_l][c*H_l + h_l][d] = chunk[c][b][s_l][h_l][d]
cudaError_t unpack_head_to_seq(const ChunkPtrs& chunks, void* x_seq, const core::Dims& x, int elem_bytes,
                               std::int64_t s_lo, std::int64_t s_hi, cudaStream_t stream);

// head -> seq unpack of a gradient sent once per peer, x.H < x.P (R = P/H peers hold kv head g):
//   dx_seq[b][s_l][g][d] = sum over c with c/R == g of chunk[c][b][s_l][0][d]
// bf16 in and out, fp32 sum in increasing c. All P chunk pointers must be set.
cudaError_t unpack_head_to_seq_reduce_bf16(const ChunkPtrs& chunks, void* x_seq, const core::Dims& x,
                                           std::int64_t s_lo, std::int64_t s_hi, cudaStream_t stream);

// kv replication (DeepSpeed ALST), x = [B, S_l, H, D] with H < P, R = P/H:
//   x_rep[b][s_l][j][d] = x_seq[b][s_l][j/R][d]          x_rep: [B, S_l, P, D]
cudaError_t replicate_heads(const void* x_seq, void* x_rep, const core::Dims& x, int elem_bytes, cudaStream_t stream);

// Gradient of the replication: dx_seq[b][s_l][g][d] = sum_{j: j/R == g} dx_rep[b][s_l][j][d]  (bf16, fp32 sum)
cudaError_t reduce_replicas_bf16(const void* dx_rep, void* dx_seq, const core::Dims& x, cudaStream_t stream);

}  // namespace ulysses::kernels
