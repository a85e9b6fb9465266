#include "runtime/cuda/exchange.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/pack.cuh"
#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {
namespace {

using kernels::ChunkPtrs;
using core::chunk_elems;
constexpr int kBf16 = 2;
constexpr int kOverlapBlocks = 32;  // grid of a pack that overlaps an NCCL transfer

std::uint16_t* at(void* base, std::int64_t elems) { return static_cast<std::uint16_t*>(base) + elems; }
const std::uint16_t* at(const void* base, std::int64_t elems) { return static_cast<const std::uint16_t*>(base) + elems; }

}  // namespace

Exchanger::Exchanger(RankCtx& ctx, DeviceArena& arena, std::int64_t capacity_elems)
    : ctx_(ctx), send_(arena, ctx.world > 1 ? capacity_elems : 0), recv_(arena, ctx.world > 1 ? capacity_elems : 0),
      capacity_(capacity_elems) {
  const char* o = std::getenv("ULYSSES_A2A_OVERLAP");
  overlap_ = o && std::string(o) == "1";
  p2p_ = std::make_unique<P2pTransport>(ctx);  // collective: every rank builds its Exchanger together
}

void Exchanger::register_destinations(const std::vector<void*>& dsts) { p2p_->register_buffers(dsts); }

std::string Exchanger::transport() const { return p2p_->available() && !force_nccl_ ? "p2p" : "nccl"; }

bool Exchanger::run_p2p(Direction dir, const std::vector<XTensor>& xs) {
  if (force_nccl_ || !p2p_->available() || xs.size() > static_cast<std::size_t>(kernels::kP2pMaxJobs)) return false;
  std::vector<const void*> srcs;
  std::vector<void*> dsts;
  std::vector<core::Dims> dims;
  for (const auto& x : xs) {
    if (x.reduce || (dir == Direction::head_to_seq && x.dims.H < x.dims.P)) return false;  // summed gradient: NCCL
    srcs.push_back(x.src), dsts.push_back(x.dst), dims.push_back(x.dims);
  }
  return p2p_->exchange(dir == Direction::seq_to_head, srcs, dsts, dims, ctx_.stream);
}

Exchanger::~Exchanger() {
  for (auto e : packed_) cudaEventDestroy(e);
  for (auto e : moved_) cudaEventDestroy(e);
}

void Exchanger::ensure_events(int n) {
  while (static_cast<int>(packed_.size()) < n) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreateWithFlags(&a, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&b, cudaEventDisableTiming));
    packed_.push_back(a);
    moved_.push_back(b);
  }
}

void Exchanger::run(Direction dir, const std::vector<XTensor>& xs, int slices) {
  const int P = ctx_.world, r = ctx_.rank;
  if (xs.empty()) return;
  bool b1 = true;
  std::int64_t need = 0, S_l = xs[0].dims.S / P;
  std::vector<std::int64_t> offset;  // each tensor's region in send/recv
  for (const auto& x : xs) {
    if (x.dims.P != P || x.dims.S / P != S_l) throw std::invalid_argument("exchange: tensors disagree on P or S");
    b1 = b1 && x.dims.B == 1;
    offset.push_back(need);
    need += P * chunk_elems(x.dims);
  }
  if (P > 1 && run_p2p(dir, xs)) return;
  if (P > 1 && need > capacity_) throw std::invalid_argument("exchange: buffers too small for this call");
  if (!b1 || slices < 1) slices = 1;
  // With P = 1 the single chunk is the tensor itself in both layouts, whatever B is.
  b1 = b1 || P == 1;
  if (slices > S_l) slices = static_cast<int>(S_l > 0 ? S_l : 1);
  ensure_events(slices);
  const bool fwd = dir == Direction::seq_to_head;

  auto slice_lo = [&](int k) { return S_l * k / slices; };
  // Per tensor: where chunk c lives for the pack (seq->head) / the unpack (head->seq).
  auto self_or_buf = [&](std::size_t i, int c, bool for_pack) -> void* {
    const XTensor& x = xs[i];
    const std::int64_t ch = chunk_elems(x.dims);
    if (c == r && b1) return fwd ? at(x.dst, r * ch) : const_cast<std::uint16_t*>(at(x.src, r * ch));
    return at(for_pack || c == r ? send_.get() : recv_.get(), offset[i] + c * ch);
  };

  // 1. pack the peers' chunks of every slice (compute stream), marking each slice done; the own
  //    chunk (no NCCL) is packed after them, so it overlaps the transfer instead of delaying it
  //    overlap_ (ULYSSES_A2A_OVERLAP=1, not yet measured on the GPU host): one launch for all
  //    tensors, and a pack that runs next to a transfer gets a small grid (SMs and HBM left to NCCL).
  auto pack = [&](std::int64_t lo, std::int64_t hi, bool own, bool next_to_transfer) {
    if (fwd && overlap_) {
      std::vector<kernels::PackJob> jobs(xs.size());
      for (std::size_t i = 0; i < xs.size(); ++i) {
        jobs[i].src = xs[i].src, jobs[i].x = xs[i].dims;
        for (int c = 0; c < P; ++c)
          if ((c == r) == own) jobs[i].chunks.p[c] = self_or_buf(i, c, true);
      }
      for (std::size_t i = 0; i < jobs.size(); i += kernels::kMaxJobs)
        CUDA_CHECK(kernels::pack_seq_to_head_multi(jobs.data() + i,
                                                   static_cast<int>(std::min<std::size_t>(kernels::kMaxJobs, jobs.size() - i)),
                                                   kBf16, lo, hi, next_to_transfer ? kOverlapBlocks : 0, ctx_.stream));
      return;
    }
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const XTensor& x = xs[i];
      if (!fwd && b1) continue;  // sent straight from x_head
      ChunkPtrs ptrs;
      for (int c = 0; c < P; ++c)
        if ((c == r) == own) ptrs.p[c] = fwd ? self_or_buf(i, c, true) : at(send_.get(), offset[i] + c * chunk_elems(x.dims));
      if (fwd) CUDA_CHECK(kernels::pack_seq_to_head(x.src, ptrs, x.dims, kBf16, lo, hi, ctx_.stream));
      else CUDA_CHECK(kernels::pack_head_to_seq(x.src, ptrs, x.dims, kBf16, lo, hi, ctx_.stream));
    }
  };
  for (int k = 0; k < slices; ++k) {
    if (P > 1) pack(slice_lo(k), slice_lo(k + 1), false, k > 0);
    CUDA_CHECK(cudaEventRecord(packed_[k], ctx_.stream));
  }
  pack(0, S_l, true, P > 1);
  // 2. move every slice (communication stream), one group per slice holding every tensor
  for (int k = 0; k < slices && P > 1; ++k) {
    const std::int64_t lo = slice_lo(k), hi = slice_lo(k + 1);
    CUDA_CHECK(cudaStreamWaitEvent(ctx_.comm_stream, packed_[k], 0));
    NCCL_CHECK(ncclGroupStart());
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const XTensor& x = xs[i];
      const std::int64_t ch = chunk_elems(x.dims);
      const bool whole = lo == 0 && hi == S_l;  // always when B > 1 (slices = 1)
      const std::int64_t off = whole ? 0 : lo * (ch / S_l), count = whole ? ch : (hi - lo) * (ch / S_l);
      for (int c = 0; c < P; ++c) {
        if (c == r) continue;
        const void* sbuf = (!fwd && b1) ? at(x.src, c * ch + off) : at(send_.get(), offset[i] + c * ch + off);
        void* rbuf = (fwd && b1) ? at(x.dst, c * ch + off) : at(recv_.get(), offset[i] + c * ch + off);
        NCCL_CHECK(ncclSend(sbuf, static_cast<std::size_t>(count), ncclBfloat16, c, ctx_.comm, ctx_.comm_stream));
        NCCL_CHECK(ncclRecv(rbuf, static_cast<std::size_t>(count), ncclBfloat16, c, ctx_.comm, ctx_.comm_stream));
      }
    }
    ctx_.group_end("exchange group");
    CUDA_CHECK(cudaEventRecord(moved_[k], ctx_.comm_stream));
  }
  // 3. unpack every slice as it lands (compute stream)
  for (int k = 0; k < slices; ++k) {
    const std::int64_t lo = slice_lo(k), hi = slice_lo(k + 1);
    if (P > 1) CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, moved_[k], 0));
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const XTensor& x = xs[i];
      if (fwd && b1) continue;  // received in place
      ChunkPtrs ptrs;
      for (int c = 0; c < P; ++c) ptrs.p[c] = self_or_buf(i, c, false);
      if (fwd) CUDA_CHECK(kernels::unpack_seq_to_head(ptrs, x.dst, x.dims, kBf16, lo, hi, ctx_.stream));
      else if (x.reduce) CUDA_CHECK(kernels::unpack_head_to_seq_reduce_bf16(ptrs, x.dst, x.dims, lo, hi, ctx_.stream));
      else CUDA_CHECK(kernels::unpack_head_to_seq(ptrs, x.dst, x.dims, kBf16, lo, hi, ctx_.stream));
    }
  }
}

void Exchanger::bare_alltoall(std::int64_t elems_per_rank) {
  const int P = ctx_.world;
  if (P < 2 || elems_per_rank > capacity_ || elems_per_rank % P) throw std::invalid_argument("bare_alltoall: bad size");
  ctx_.nccl(ncclAlltoAll(send_.get(), recv_.get(), static_cast<std::size_t>(elems_per_rank / P), ncclBfloat16, ctx_.comm,
                         ctx_.comm_stream),
            "ncclAlltoAll");
}

void Exchanger::bare_sendrecv(std::int64_t elems_per_rank) {
  const int P = ctx_.world;
  if (P < 2 || elems_per_rank > capacity_ || elems_per_rank % P) throw std::invalid_argument("bare_sendrecv: bad size");
  const std::int64_t ch = elems_per_rank / P;
  NCCL_CHECK(ncclGroupStart());
  for (int c = 0; c < P; ++c) {  // the self chunk too, as ncclAlltoAll moves it
    NCCL_CHECK(ncclSend(at(send_.get(), c * ch), static_cast<std::size_t>(ch), ncclBfloat16, c, ctx_.comm, ctx_.comm_stream));
    NCCL_CHECK(ncclRecv(at(recv_.get(), c * ch), static_cast<std::size_t>(ch), ncclBfloat16, c, ctx_.comm, ctx_.comm_stream));
  }
  ctx_.group_end("bare send/recv group");
}

}  // namespace ulysses::runtime::cuda
