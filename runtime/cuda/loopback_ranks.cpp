// Logical ranks on one GPU (runtime/cuda/loopback_ranks.hpp): each rank copies its parts out of its peers'
// tensors between two barriers; the exchange with core/layout.hpp's maps, B = 1.
#include "runtime/cuda/loopback_ranks.hpp"

#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>
#include <stdexcept>

#include "core/layout.hpp"
#include "kernels/layer_ops.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/env.hpp"

namespace ulysses::runtime::cuda {
namespace {

constexpr std::size_t kBf16 = 2;

const char* bytes(const void* p, std::int64_t elems) { return static_cast<const char*>(p) + elems * kBf16; }
char* bytes(void* p, std::int64_t elems) { return static_cast<char*>(p) + elems * kBf16; }

void check_dims(const core::Dims& x) {
  if (x.B != 1 || x.P < 1 || x.S % x.P != 0 || (x.H % x.P != 0 && x.P % x.H != 0))
    throw std::invalid_argument("loopback ranks: B must be 1, S a multiple of P, and the heads divide or be a multiple of P");
}

}  // namespace

LoopbackGroup::LoopbackGroup(int P)
    : P_(P), bar_(P), tensors_(static_cast<std::size_t>(P), nullptr), buffers_(static_cast<std::size_t>(P), nullptr) {
  if (P < 1) throw std::invalid_argument("loopback ranks: at least one rank");
}

LoopbackRank::LoopbackRank(LoopbackGroup& g, int rank) : g_(g), r_(rank) {
  if (rank < 0 || rank >= g.size()) throw std::invalid_argument("loopback ranks: rank out of range");
}

LoopbackRank::~LoopbackRank() {
  if (tmp_) cudaFree(tmp_);
}

void* LoopbackRank::tmp(std::size_t bytes) {
  if (bytes > tmp_bytes_) {
    if (tmp_) CUDA_CHECK(cudaFree(tmp_));
    tmp_ = nullptr, tmp_bytes_ = 0;
    CUDA_CHECK(cudaMalloc(&tmp_, bytes));
    tmp_bytes_ = bytes;
  }
  return tmp_;
}

namespace {
// ULYSSES_LOOPBACK_TRACE=1: one stderr line per collective and rank as it enters (where a stuck check waits)
void trace(int r, const char* what) {
  static const bool on = env_flag("ULYSSES_LOOPBACK_TRACE");
  if (on) std::fprintf(stderr, "loopback rank %d: %s\n", r, what);
}
}  // namespace

void LoopbackRank::publish(const void* mine, cudaStream_t s) {
  CUDA_CHECK(cudaStreamSynchronize(s));  // my sources are written
  g_.buffers_[static_cast<std::size_t>(r_)] = mine;
  g_.bar_.arrive_and_wait();
}

void LoopbackRank::done(cudaStream_t s) {
  CUDA_CHECK(cudaStreamSynchronize(s));  // every peer's source read
  g_.bar_.arrive_and_wait();
}

void LoopbackRank::all_gather(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t s) {
  trace(r_, "all_gather");
  publish(part, s);
  const auto bytes = static_cast<std::size_t>(n * elem_bytes(e));
  for (int c = 0; c < g_.size(); ++c) {
    char* dst = static_cast<char*>(full) + c * bytes;
    if (dst != g_.buffers_[static_cast<std::size_t>(c)])  // in place (part = full's own slice): already there
      CUDA_CHECK(cudaMemcpyAsync(dst, g_.buffers_[static_cast<std::size_t>(c)], bytes, cudaMemcpyDeviceToDevice, s));
  }
  done(s);
}

void LoopbackRank::reduce_scatter(const void* full, void* part, std::int64_t n, Elem e, cudaStream_t s) {
  trace(r_, "reduce_scatter");
  publish(full, s);
  const auto bytes = static_cast<std::size_t>(n * elem_bytes(e));
  auto chunk = [&](int c) { return static_cast<const char*>(g_.buffers_[static_cast<std::size_t>(c)]) + r_ * bytes; };
  void* t = g_.size() > 1 ? tmp(bytes) : nullptr;  // grown before anything is queued on s
  CUDA_CHECK(cudaMemcpyAsync(part, chunk(0), bytes, cudaMemcpyDeviceToDevice, s));
  for (int c = 1; c < g_.size(); ++c) {
    CUDA_CHECK(cudaMemcpyAsync(t, chunk(c), bytes, cudaMemcpyDeviceToDevice, s));
    if (e == Elem::f32)
      CUDA_CHECK(kernels::add(static_cast<const float*>(part), static_cast<const float*>(t), static_cast<float*>(part), n, s));
    else
      CUDA_CHECK(kernels::add(static_cast<const __nv_bfloat16*>(part), static_cast<const __nv_bfloat16*>(t),
                              static_cast<__nv_bfloat16*>(part), n, s));
  }
  done(s);
}

// One peer's part of my destination: seq -> head, its S_l rows of my heads; head -> seq (H >= P), my S_l rows
// of its heads.
void LoopbackRank::copy_in(Direction dir, const XTensor& mine, int c, const XTensor& peer, cudaStream_t s) {
  const core::Dims& x = mine.dims;
  const std::int64_t S_l = x.S / x.P, H_l = core::heads_per_rank(x.H, x.P), D = x.D;
  const std::size_t row = static_cast<std::size_t>(H_l * D) * kBf16, full = static_cast<std::size_t>(x.H * D) * kBf16;
  if (dir == Direction::seq_to_head)  // x_head[c*S_l + s][h_l] = x_seq_c[s][source_head(r, h_l)]
    CUDA_CHECK(cudaMemcpy2DAsync(bytes(mine.dst, c * S_l * H_l * D), row, bytes(peer.src, core::source_head(x, r_, 0) * D), full,
                                 row, static_cast<std::size_t>(S_l), cudaMemcpyDeviceToDevice, s));
  else  // x_seq[s][c*H_l + h_l] = x_head_c[r*S_l + s][h_l]
    CUDA_CHECK(cudaMemcpy2DAsync(bytes(mine.dst, c * H_l * D), full, bytes(peer.src, r_ * S_l * H_l * D), row, row,
                                 static_cast<std::size_t>(S_l), cudaMemcpyDeviceToDevice, s));
}

// head -> seq with H < P: my head g = the sum of ranks g*R .. g*R+R-1's chunks (one head each), ascending.
void LoopbackRank::reduce_in(const XTensor& mine, const std::vector<const XTensor*>& peers, cudaStream_t s) {
  const core::Dims& x = mine.dims;
  const std::int64_t S_l = x.S / x.P, D = x.D, R = x.P / x.H, n = S_l * D;
  auto* buf = static_cast<__nv_bfloat16*>(tmp(static_cast<std::size_t>((R + 1) * n) * kBf16));  // [R + 1, S_l, D]: the chunks, then their sum
  for (std::int64_t g = 0; g < x.H; ++g) {
    for (std::int64_t j = 0; j < R; ++j)
      CUDA_CHECK(cudaMemcpyAsync(buf + j * n, bytes(peers[static_cast<std::size_t>(g * R + j)]->src, r_ * S_l * D),
                                 static_cast<std::size_t>(n) * kBf16, cudaMemcpyDeviceToDevice, s));
    __nv_bfloat16* sum = buf + R * n;
    CUDA_CHECK(cudaMemcpyAsync(sum, buf, static_cast<std::size_t>(n) * kBf16, cudaMemcpyDeviceToDevice, s));
    for (std::int64_t j = 1; j < R; ++j) CUDA_CHECK(kernels::add(sum, buf + j * n, sum, n, s));
    CUDA_CHECK(cudaMemcpy2DAsync(bytes(mine.dst, g * D), static_cast<std::size_t>(x.H * D) * kBf16, sum,
                                 static_cast<std::size_t>(D) * kBf16, static_cast<std::size_t>(D) * kBf16,
                                 static_cast<std::size_t>(S_l), cudaMemcpyDeviceToDevice, s));
  }
}

void LoopbackRank::run(Direction dir, const std::vector<XTensor>& xs, cudaStream_t s) {
  for (const XTensor& t : xs) {
    check_dims(t.dims);
    if (t.dims.P != g_.size()) throw std::invalid_argument("loopback ranks: a tensor's P is not the group's");
    if (dir == Direction::head_to_seq && t.dims.H < t.dims.P && !t.reduce)
      throw std::invalid_argument("loopback ranks: head_to_seq of a tensor with H < P must reduce its replicas");
  }
  for (const XTensor& t : xs)  // the sums' buffer grown before anything is queued on s
    if (dir == Direction::head_to_seq && t.dims.H < t.dims.P)
      tmp(static_cast<std::size_t>((t.dims.P / t.dims.H + 1) * (t.dims.S / t.dims.P) * t.dims.D) * kBf16);
  trace(r_, dir == Direction::seq_to_head ? "exchange seq_to_head" : "exchange head_to_seq");
  CUDA_CHECK(cudaStreamSynchronize(s));  // my sources are written
  g_.tensors_[static_cast<std::size_t>(r_)] = &xs;
  g_.bar_.arrive_and_wait();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    std::vector<const XTensor*> peers;
    for (int c = 0; c < g_.size(); ++c) {
      const auto& theirs = *g_.tensors_[static_cast<std::size_t>(c)];
      if (theirs.size() != xs.size() || theirs[i].dims.S != xs[i].dims.S || theirs[i].dims.H != xs[i].dims.H ||
          theirs[i].dims.D != xs[i].dims.D)
        throw std::invalid_argument("loopback ranks: the ranks' tensors differ");
      peers.push_back(&theirs[i]);
    }
    if (dir == Direction::head_to_seq && xs[i].dims.H < xs[i].dims.P) reduce_in(xs[i], peers, s);
    else
      for (int c = 0; c < g_.size(); ++c) copy_in(dir, xs[i], c, *peers[static_cast<std::size_t>(c)], s);
  }
  done(s);
}

std::vector<std::string> run_loopback_ranks(int P, const LoopbackFn& fn) {
  LoopbackGroup group(P);
  std::vector<std::string> out(static_cast<std::size_t>(P));
  std::exception_ptr first;
  std::mutex m;
  {
    std::vector<std::jthread> ranks;
    for (int r = 0; r < P; ++r)
      ranks.emplace_back([&, r] {
        cudaStream_t s = nullptr;
        try {
          CUDA_CHECK(cudaSetDevice(0));
          CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
          LoopbackRank rank(group, r);
          out[static_cast<std::size_t>(r)] = fn(r, rank, rank, s);
        } catch (const PeerFailed&) {
        } catch (...) {
          const std::lock_guard<std::mutex> lock(m);
          if (!first) first = std::current_exception();
          group.abort();
        }
        if (s) cudaStreamDestroy(s);
      });
  }
  if (first) std::rethrow_exception(first);
  return out;
}

}  // namespace ulysses::runtime::cuda
