// Pack/unpack kernels (kernels/pack.cuh) against the index maps of core/layout.hpp evaluated
// on the host: every element is coded by its position, so a misplaced element is caught.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/bf16.hpp"
#include "kernels/pack.cuh"
#include "core/layout.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using gputest::Dev;
using core::Dims;
using u16 = std::uint16_t;

namespace {

std::vector<u16> coded(std::int64_t n, u16 salt) {
  std::vector<u16> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = static_cast<u16>((i * 7 + salt) & 0x3FFF);  // finite bf16 bit patterns
  return v;
}

// seq -> head pack then unpack on the chunks of one rank r, as the exchange does with P = 1
// transport (chunk c of rank r); checks pack output against the host map and the unpack's.
void check_seq_head(const Dims& x, std::int64_t s_lo, std::int64_t s_hi) {
  const std::int64_t S_l = x.S / x.P, H_l = core::heads_per_rank(x.H, x.P), ch = core::chunk_elems(x);
  const auto x_seq = coded(x.B * S_l * x.H * x.D, 3);
  Dev<u16> src(x_seq), buf(x.P * ch);
  buf.fill_bytes(0xFF);
  kernels::ChunkPtrs ptrs;
  for (int c = 0; c < x.P; ++c) ptrs.p[c] = buf.p + c * ch;
  CUDA_CHECK(kernels::pack_seq_to_head(src.p, ptrs, x, 2, s_lo, s_hi, nullptr));
  const auto got = buf.download();
  std::int64_t wrong = 0;
  for (int c = 0; c < x.P; ++c)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t s = 0; s < S_l; ++s)
        for (std::int64_t h = 0; h < H_l; ++h)
          for (std::int64_t d = 0; d < x.D; ++d) {
            const u16 g = got[core::buf_index(x, c, b, s, h, d)];
            const bool in = s >= s_lo && s < s_hi;
            const u16 want = in ? x_seq[core::seq_index(x, b, s, core::source_head(x, c, h), d)] : u16(0xFFFF);
            wrong += g != want;
          }
  CHECK(wrong == 0);
  // unpack into a head-sharded tensor: x_head[b][c*S_l + s][h][d] = chunk[c][b][s][h][d]
  Dev<u16> head(x.B * x.S * H_l * x.D);
  head.fill_bytes(0xFF);
  CUDA_CHECK(kernels::unpack_seq_to_head(ptrs, head.p, x, 2, s_lo, s_hi, nullptr));
  const auto xh = head.download();
  wrong = 0;
  for (int c = 0; c < x.P; ++c)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t s = s_lo; s < s_hi; ++s)
        for (std::int64_t h = 0; h < H_l; ++h)
          for (std::int64_t d = 0; d < x.D; ++d)
            wrong += xh[core::head_index(x, b, core::global_pos(x, c, s), h, d)] != got[core::buf_index(x, c, b, s, h, d)];
  CHECK(wrong == 0);
}

void check_head_seq(const Dims& x) {
  const std::int64_t S_l = x.S / x.P, H_l = core::heads_per_rank(x.H, x.P), ch = core::chunk_elems(x);
  const auto x_head = coded(x.B * x.S * H_l * x.D, 5);
  Dev<u16> src(x_head), buf(x.P * ch), seq(x.B * S_l * x.H * x.D);
  kernels::ChunkPtrs ptrs;
  for (int c = 0; c < x.P; ++c) ptrs.p[c] = buf.p + c * ch;
  CUDA_CHECK(kernels::pack_head_to_seq(src.p, ptrs, x, 2, 0, S_l, nullptr));
  const auto got = buf.download();
  std::int64_t wrong = 0;
  for (int c = 0; c < x.P; ++c)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t s = 0; s < S_l; ++s)
        for (std::int64_t h = 0; h < H_l; ++h)
          for (std::int64_t d = 0; d < x.D; ++d)
            wrong += got[core::buf_index(x, c, b, s, h, d)] != x_head[core::head_index(x, b, core::global_pos(x, c, s), h, d)];
  CHECK(wrong == 0);
  CUDA_CHECK(kernels::unpack_head_to_seq(ptrs, seq.p, x, 2, 0, S_l, nullptr));
  const auto xs = seq.download();
  wrong = 0;
  for (int c = 0; c < x.P; ++c)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t s = 0; s < S_l; ++s)
        for (std::int64_t h = 0; h < H_l; ++h)
          for (std::int64_t d = 0; d < x.D; ++d)
            wrong += xs[core::seq_index(x, b, s, c * H_l + h, d)] != got[core::buf_index(x, c, b, s, h, d)];
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("pack/unpack seq->head follow layout.hpp", "[.gpu][gpu][pack]") {
  if (gputest::device_count() < 1) FAIL("no CUDA device");
  check_seq_head({1, 64, 2, 8, 64}, 0, 32);   // MHA-like, whole slice
  check_seq_head({2, 48, 4, 8, 128}, 3, 9);   // B = 2, a middle slice
  check_seq_head({1, 32, 4, 2, 64}, 0, 8);    // H < P: send_once source_head = c / (P/H)
  check_seq_head({1, 40, 1, 4, 8}, 0, 40);    // P = 1, D = 8 (one vector per row)
}

TEST_CASE("pack/unpack head->seq follow layout.hpp", "[.gpu][gpu][pack]") {
  if (gputest::device_count() < 1) FAIL("no CUDA device");
  check_head_seq({1, 64, 2, 8, 64});
  check_head_seq({3, 24, 4, 4, 128});
}

TEST_CASE("kv replication, replica reduction and the send_once reduce-unpack", "[.gpu][gpu][pack]") {
  if (gputest::device_count() < 1) FAIL("no CUDA device");
  using cpu = std::int64_t;
  const Dims x{2, 32, 4, 2, 64};  // H_kv = 2 < P = 4, R = 2
  const std::int64_t S_l = x.S / x.P, R = x.P / x.H;
  std::vector<u16> kv(x.B * S_l * x.H * x.D);
  for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = core::float_to_bf16(static_cast<float>(i % 97) * 0.25f);
  Dev<u16> src(kv), rep(x.B * S_l * x.P * x.D), back(x.B * S_l * x.H * x.D);
  CUDA_CHECK(kernels::replicate_heads(src.p, rep.p, x, 2, nullptr));
  const auto r = rep.download();
  const Dims rd{x.B, x.S, x.P, x.P, x.D};
  cpu wrong = 0;
  for (cpu b = 0; b < x.B; ++b)
    for (cpu s = 0; s < S_l; ++s)
      for (cpu j = 0; j < x.P; ++j)
        for (cpu d = 0; d < x.D; ++d) wrong += r[core::seq_index(rd, b, s, j, d)] != kv[core::seq_index(x, b, s, j / R, d)];
  CHECK(wrong == 0);
  // gradient of the replication: the sum of the R replicas (exact here: small multiples of 0.25)
  CUDA_CHECK(kernels::reduce_replicas_bf16(rep.p, back.p, x, nullptr));
  const auto g = back.download();
  wrong = 0;
  for (std::size_t i = 0; i < g.size(); ++i) wrong += core::bf16_to_float(g[i]) != R * core::bf16_to_float(kv[i]);
  CHECK(wrong == 0);
  // send_once reduce-unpack: chunks c hold head c/R; every chunk = the kv tensor's head -> sum = R*value
  const std::int64_t ch = core::chunk_elems(x);
  Dev<u16> chunks(x.P * ch);
  kernels::ChunkPtrs ptrs;
  for (int c = 0; c < x.P; ++c) ptrs.p[c] = chunks.p + c * ch;
  CUDA_CHECK(kernels::pack_seq_to_head(src.p, ptrs, x, 2, 0, S_l, nullptr));
  CUDA_CHECK(kernels::unpack_head_to_seq_reduce_bf16(ptrs, back.p, x, 0, S_l, nullptr));
  const auto g2 = back.download();
  wrong = 0;
  for (std::size_t i = 0; i < g2.size(); ++i) wrong += core::bf16_to_float(g2[i]) != R * core::bf16_to_float(kv[i]);
  CHECK(wrong == 0);
}

TEST_CASE("pack launchers reject bad shapes", "[.gpu][gpu][pack]") {
  kernels::ChunkPtrs ptrs;
  CHECK(kernels::pack_seq_to_head(nullptr, ptrs, {1, 30, 4, 8, 64}, 2, 0, 7, nullptr) == cudaErrorInvalidValue);  // S % P
  CHECK(kernels::pack_seq_to_head(nullptr, ptrs, {1, 32, 4, 8, 60}, 2, 0, 8, nullptr) == cudaErrorInvalidValue);  // D*2 % 16
  CHECK(kernels::pack_seq_to_head(nullptr, ptrs, {1, 32, 4, 6, 64}, 2, 0, 8, nullptr) == cudaErrorInvalidValue);  // heads rule
  CHECK(kernels::unpack_head_to_seq(ptrs, nullptr, {1, 32, 4, 2, 64}, 2, 0, 8, nullptr) == cudaErrorInvalidValue); // H < P
}
