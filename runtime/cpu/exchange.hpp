#pragma once
// The Ulysses exchange on the CPU: pack / unpack written with the index maps of
// core/layout.hpp (the same functions the CUDA kernels call), and an all-to-all of equal
// chunks among P threads through shared memory.
//
// Layouts (core/layout.hpp, x = Dims{B, S, P, H, D}, S_l = S/P, H_l = heads_per_rank(H, P)):
//   x_seq  [B, S_l, H, D]   on rank r, positions r*S_l ..
//   x_head [B, S, H_l, D]   on rank r, heads r*H_l .. (H < P: the one head source_head(x, r, 0))
//   send, recv [P, B, S_l, H_l, D]   chunk c goes to / came from rank c
#include <cstdint>
#include <vector>

#include "core/bf16.hpp"
#include "core/layout.hpp"
#include "runtime/barrier.hpp"

namespace ulysses::runtime::cpu {

using runtime::AbortableBarrier;
using runtime::PeerFailed;

using core::Dims;
using core::bf16;  // the CPU backend's tensors are bf16 bits (core/bf16.hpp)
using core::bf16_to_float;
using core::float_to_bf16;
using core::kBf16Bytes;
using core::kBf16NaN;

// seq -> head (a2a.qkv.fwd, a2a.out.bwd)
//   pack:   send[c][b][s_l][h_l][d] = x_seq[b][s_l][source_head(x, c, h_l)][d]
//   unpack: x_head[b][global_pos(x, c, s_l)][h_l][d] = recv[c][b][s_l][h_l][d]
void pack_seq_to_head(const Dims& x, const bf16* x_seq, bf16* send);
void unpack_seq_to_head(const Dims& x, const bf16* recv, bf16* x_head);

// head -> seq (a2a.out.fwd, a2a.qkv.bwd), the inverse maps
//   pack:   send[c][b][s_l][h_l][d] = x_head[b][global_pos(x, c, s_l)][h_l][d]
//   unpack: x_seq[b][s_l][source_head(x, c, h_l)][d] = recv[c][b][s_l][h_l][d]       (H >= P)
//   H < P (kv gradients, send_once): several chunks map to one head; they are summed in fp32
//   in ascending c:  acc[b][s_l][source_head(x, c, 0)][d] += recv[c][b][s_l][0][d]
void pack_head_to_seq(const Dims& x, const bf16* x_head, bf16* send);
void unpack_head_to_seq(const Dims& x, const bf16* recv, bf16* x_seq);
void unpack_head_to_seq_sum(const Dims& x, const bf16* recv, float* acc_seq);

// KV replication (DeepSpeed ALST) when H < P, R = P/H:
//   x_rep[b][s_l][j][d] = x_seq[b][s_l][j/R][d]      x_rep: [B, S_l, P, D]
//   backward: acc[b][s_l][g][d] = sum_{j/R == g, ascending j} x_rep[b][s_l][j][d]
void replicate_heads(const Dims& x, const bf16* x_seq, bf16* x_rep);
void reduce_replicas(const Dims& x, const bf16* x_rep, float* acc_seq);

void round_to_bf16(const float* x, bf16* y, std::int64_t n);
void widen_to_float(const bf16* x, float* y, std::int64_t n);

// All-to-all of equal chunks among P threads (ranks 0..P-1) of one process. Every rank
// publishes its send buffer, waits, copies chunk r of every peer's buffer into its recv[c],
// and waits again so no send buffer is reused while a peer still reads it.
// alltoall_group moves several tensors under one pair of barriers, as an NCCL group does: for
// each part t, recv_t on r [c] = send_t on c [r].
struct A2aPart {
  const bf16* send;          // [P, chunk_elems]
  bf16* recv;                // [P, chunk_elems]
  std::int64_t chunk_elems;
};

class SharedExchange {
 public:
  explicit SharedExchange(int P) : P_(P), bar_(P), send_(P) {}
  int size() const { return P_; }
  void barrier() { bar_.arrive_and_wait(); }
  void abort() { bar_.abort(); }  // a rank failed: peers waiting in barrier() throw PeerFailed
  // send, recv: [P, chunk_elems]
  void alltoall(int rank, const bf16* send, bf16* recv, std::int64_t chunk_elems);
  void alltoall_group(int rank, const std::vector<A2aPart>& parts);  // same parts, same order, on every rank

 private:
  int P_;
  AbortableBarrier bar_;
  std::vector<std::vector<const bf16*>> send_;  // [rank][part]
};

}  // namespace ulysses::runtime::cpu
