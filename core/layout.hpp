#pragma once
// core/ (namespace ulysses::core), the ground floor: standard library only; every library may include it.
// Ulysses layouts and the index maps of the exchange. The CPU reference backend and the
// CUDA kernels both call these functions, so the two cannot disagree. Header-only, no
// dependencies, usable from .cu files (ULYSSES_HD marks host+device).
//
// Letters: B batch, S global sequence, P sp size, S_l = S/P, H heads of the tensor being
// exchanged (q: H, k/v: H_kv or, after replication, H_x), H_l = H/P heads per rank, D head dim.
//
// Sequence-sharded (input of a2a.qkv.fwd, output of a2a.out.fwd), on rank r:
//   x_seq[b][s_l][h][d]      shape [B, S_l, H, D], global position s = r*S_l + s_l
// Head-sharded (what attention reads), on rank r:
//   x_head[b][s][h_l][d]     shape [B, S, H_l, D], global head h = r*H_l + h_l
// Exchange buffers, one contiguous chunk per peer (chunk c = peer rank), on every rank:
//   buf[c][b][s_l][h_l][d]   shape [P, B, S_l, H_l, D]  (chunk = B*S_l*H_l*D elements)
//
// seq -> head (a2a.qkv.fwd, a2a.out.bwd):
//   pack   on rank r:  send[c][b][s_l][h_l][d] = x_seq[b][s_l][c*H_l + h_l][d]
//   exchange:           recv_on_r[c] = send_on_c[r]          (all-to-all of equal chunks)
//   unpack on rank r:  x_head[b][c*S_l + s_l][h_l][d] = recv[c][b][s_l][h_l][d]
//   (for B = 1 the unpack is the identity: recv already is x_head)
// head -> seq (a2a.out.fwd, a2a.qkv.bwd): the inverse maps
//   pack   on rank r:  send[c][b][s_l][h_l][d] = x_head[b][c*S_l + s_l][h_l][d]
//   unpack on rank r:  x_seq[b][s_l][c*H_l + h_l][d] = recv[c][b][s_l][h_l][d]
//
// GQA, kv heads H_kv, q heads H, group size G = H/H_kv; q head h reads kv head h/G.
//   P <= H_kv (H_kv % P == 0): k, v exchanged like q with H_kv heads; on rank r, local q head
//     h_l reads local kv head h_l / G.
//   P >  H_kv (P % H_kv == 0), replication factor R = P/H_kv: rank c needs kv head c/R only.
//     replicate  (DeepSpeed ALST): materialise x_rep[b][s_l][j][d] = x_seq[b][s_l][j/R][d],
//                shape [B, S_l, P, D], then exchange it as a tensor of P heads (H_l = 1).
//     send_once: pack straight from x_seq, no replica in memory:
//                send[c][b][s_l][0][d] = x_seq[b][s_l][c/R][d]
//     Both move the same bytes over the wire (each rank needs all S of its one kv head);
//     send_once saves the [B, S_l, P, D] replica and its copy. In backward, the gradient of
//     kv head g on rank r is the sum over the R peers c with c/R == g of the received chunk.
#include <cstdint>

#ifdef __CUDACC__
#define ULYSSES_HD __host__ __device__ __forceinline__
#else
#define ULYSSES_HD inline
#endif

namespace ulysses::core {

struct Dims {
  std::int64_t B, S, P, H, D;  // H: heads of the tensor as held sequence-sharded (before replication)
};

// Heads one rank holds after the seq->head exchange, and how many heads travel per chunk.
ULYSSES_HD std::int64_t heads_per_rank(std::int64_t H, std::int64_t P) { return H >= P ? H / P : 1; }

// Offsets (in elements) of the four layouts.
ULYSSES_HD std::int64_t seq_index(const Dims& x, std::int64_t b, std::int64_t s_l, std::int64_t h, std::int64_t d) {
  const std::int64_t S_l = x.S / x.P;
  return ((b * S_l + s_l) * x.H + h) * x.D + d;
}
ULYSSES_HD std::int64_t head_index(const Dims& x, std::int64_t b, std::int64_t s, std::int64_t h_l, std::int64_t d) {
  const std::int64_t H_l = heads_per_rank(x.H, x.P);
  return ((b * x.S + s) * H_l + h_l) * x.D + d;
}
ULYSSES_HD std::int64_t buf_index(const Dims& x, std::int64_t c, std::int64_t b, std::int64_t s_l, std::int64_t h_l, std::int64_t d) {
  const std::int64_t S_l = x.S / x.P, H_l = heads_per_rank(x.H, x.P);
  return (((c * x.B + b) * S_l + s_l) * H_l + h_l) * x.D + d;
}
ULYSSES_HD std::int64_t chunk_elems(const Dims& x) { return x.B * (x.S / x.P) * heads_per_rank(x.H, x.P) * x.D; }

// The sequence-sharded head that feeds chunk c, local head h_l (seq -> head pack).
// H >= P: c*H_l + h_l. H < P (kv replication / send_once): c / (P/H).
ULYSSES_HD std::int64_t source_head(const Dims& x, std::int64_t c, std::int64_t h_l) {
  return x.H >= x.P ? c * (x.H / x.P) + h_l : c / (x.P / x.H);
}

// Global sequence position of chunk c, local position s_l (head -> seq pack / seq->head unpack).
ULYSSES_HD std::int64_t global_pos(const Dims& x, std::int64_t c, std::int64_t s_l) { return c * (x.S / x.P) + s_l; }

}  // namespace ulysses::core
