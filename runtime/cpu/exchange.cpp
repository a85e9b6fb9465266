#include "runtime/cpu/exchange.hpp"

#include <algorithm>
#include <cstring>

namespace ulysses::runtime::cpu {

using core::buf_index;
using core::global_pos;
using core::head_index;
using core::heads_per_rank;
using core::seq_index;
using core::source_head;

void pack_seq_to_head(const Dims& x, const bf16* x_seq, bf16* send) {
  const std::int64_t S_l = x.S / x.P, H_l = heads_per_rank(x.H, x.P);
  for (std::int64_t c = 0; c < x.P; ++c)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t s_l = 0; s_l < S_l; ++s_l)
        for (std::int64_t h_l = 0; h_l < H_l; ++h_l)
          std::copy_n(x_seq + seq_index(x, b, s_l, source_head(x, c, h_l), 0), x.D,
                      send + buf_index(x, c, b, s_l, h_l, 0));
}

void unpack_seq_to_head(const Dims& x, const bf16* recv, bf16* x_head) {
  const std::int64_t S_l = x.S / x.P, H_l = heads_per_rank(x.H, x.P);
  for (std::int64_t c = 0; c < x.P; ++c)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t s_l = 0; s_l < S_l; ++s_l)  // the H_l*D elements of one position are contiguous
        std::copy_n(recv + buf_index(x, c, b, s_l, 0, 0), H_l * x.D,
                    x_head + head_index(x, b, global_pos(x, c, s_l), 0, 0));
}

void pack_head_to_seq(const Dims& x, const bf16* x_head, bf16* send) {
  const std::int64_t S_l = x.S / x.P, H_l = heads_per_rank(x.H, x.P);
  for (std::int64_t c = 0; c < x.P; ++c)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t s_l = 0; s_l < S_l; ++s_l)
        std::copy_n(x_head + head_index(x, b, global_pos(x, c, s_l), 0, 0), H_l * x.D,
                    send + buf_index(x, c, b, s_l, 0, 0));
}

void unpack_head_to_seq(const Dims& x, const bf16* recv, bf16* x_seq) {
  const std::int64_t S_l = x.S / x.P, H_l = heads_per_rank(x.H, x.P);
  for (std::int64_t c = 0; c < x.P; ++c)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t s_l = 0; s_l < S_l; ++s_l)
        for (std::int64_t h_l = 0; h_l < H_l; ++h_l)
          std::copy_n(recv + buf_index(x, c, b, s_l, h_l, 0), x.D,
                      x_seq + seq_index(x, b, s_l, source_head(x, c, h_l), 0));
}

void unpack_head_to_seq_sum(const Dims& x, const bf16* recv, float* acc_seq) {
  const std::int64_t S_l = x.S / x.P, H_l = heads_per_rank(x.H, x.P);
  std::fill_n(acc_seq, x.B * S_l * x.H * x.D, 0.0f);
  for (std::int64_t c = 0; c < x.P; ++c)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t s_l = 0; s_l < S_l; ++s_l)
        for (std::int64_t h_l = 0; h_l < H_l; ++h_l) {
          const bf16* src = recv + buf_index(x, c, b, s_l, h_l, 0);
          float* dst = acc_seq + seq_index(x, b, s_l, source_head(x, c, h_l), 0);
          for (std::int64_t d = 0; d < x.D; ++d) dst[d] += bf16_to_float(src[d]);
        }
}

void replicate_heads(const Dims& x, const bf16* x_seq, bf16* x_rep) {
  const std::int64_t S_l = x.S / x.P, R = x.P / x.H;
  const Dims rep{x.B, x.S, x.P, x.P, x.D};  // the replica as a tensor of P heads
  for (std::int64_t b = 0; b < x.B; ++b)
    for (std::int64_t s_l = 0; s_l < S_l; ++s_l)
      for (std::int64_t j = 0; j < x.P; ++j)
        std::copy_n(x_seq + seq_index(x, b, s_l, j / R, 0), x.D, x_rep + seq_index(rep, b, s_l, j, 0));
}

void reduce_replicas(const Dims& x, const bf16* x_rep, float* acc_seq) {
  const std::int64_t S_l = x.S / x.P, R = x.P / x.H;
  const Dims rep{x.B, x.S, x.P, x.P, x.D};
  std::fill_n(acc_seq, x.B * S_l * x.H * x.D, 0.0f);
  for (std::int64_t b = 0; b < x.B; ++b)
    for (std::int64_t s_l = 0; s_l < S_l; ++s_l)
      for (std::int64_t j = 0; j < x.P; ++j) {
        const bf16* src = x_rep + seq_index(rep, b, s_l, j, 0);
        float* dst = acc_seq + seq_index(x, b, s_l, j / R, 0);
        for (std::int64_t d = 0; d < x.D; ++d) dst[d] += bf16_to_float(src[d]);
      }
}

void round_to_bf16(const float* x, bf16* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]);
}
void widen_to_float(const bf16* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(x[i]);
}

void SharedExchange::alltoall(int rank, const bf16* send, bf16* recv, std::int64_t chunk_elems) {
  alltoall_group(rank, {{send, recv, chunk_elems}});
}

void SharedExchange::alltoall_group(int rank, const std::vector<A2aPart>& parts) {
  std::vector<const bf16*>& mine = send_[rank];
  mine.clear();
  for (const A2aPart& t : parts) mine.push_back(t.send);
  bar_.arrive_and_wait();
  for (std::size_t i = 0; i < parts.size(); ++i)
    for (int c = 0; c < P_; ++c)  // recv_on_r[c] = send_on_c[r]
      std::memcpy(parts[i].recv + c * parts[i].chunk_elems, send_[c][i] + rank * parts[i].chunk_elems,
                  parts[i].chunk_elems * sizeof(bf16));
  bar_.arrive_and_wait();
}

}  // namespace ulysses::runtime::cpu
