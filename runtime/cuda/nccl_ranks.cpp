// runtime/cuda/nccl_ranks.hpp: each call hops to the stream that does it and back.
#include "runtime/cuda/nccl_ranks.hpp"

#include <algorithm>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {
namespace {

ncclDataType_t nccl_type(Elem e) { return e == Elem::bf16 ? ncclBfloat16 : ncclFloat; }

}  // namespace

NcclRank::NcclRank(RankCtx& ctx, DeviceArena& staging, std::int64_t capacity_elems)
    : ctx_(ctx), ex_(ctx, staging, capacity_elems) {
  ex_.force_nccl(true);
  CUDA_CHECK(cudaEventCreateWithFlags(&hop_, cudaEventDisableTiming));
}

NcclRank::~NcclRank() {
  if (hop_) cudaEventDestroy(hop_);
}

std::int64_t NcclRank::exchange_capacity(const DecoderLayerDims& d, int P) {
  return d.T * d.D * (d.H + 2 * std::max<std::int64_t>(d.H_kv, P));
}

void NcclRank::follow(cudaStream_t first, cudaStream_t then) {
  if (first == then) return;
  CUDA_CHECK(cudaEventRecord(hop_, first));
  CUDA_CHECK(cudaStreamWaitEvent(then, hop_, 0));
}

void NcclRank::run(Direction dir, const std::vector<XTensor>& xs, cudaStream_t stream) {
  follow(stream, ctx_.stream);  // the Exchanger packs and unpacks on the rank's stream
  ex_.run(dir, xs);
  follow(ctx_.stream, stream);
}

void NcclRank::all_gather(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) {
  follow(stream, ctx_.comm_stream);
  ctx_.nccl(ncclAllGather(part, full, static_cast<std::size_t>(n), nccl_type(e), ctx_.comm, ctx_.comm_stream), "zero all_gather");
  follow(ctx_.comm_stream, stream);
}

void NcclRank::all_gather_ahead(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) {
  follow(stream, ctx_.comm_stream);
  ctx_.nccl(ncclAllGather(part, full, static_cast<std::size_t>(n), nccl_type(e), ctx_.comm, ctx_.comm_stream), "zero all_gather ahead");
}

void NcclRank::reduce_scatter(const void* full, void* part, std::int64_t n, Elem e, cudaStream_t stream) {
  follow(stream, ctx_.comm_stream);
  ctx_.nccl(ncclReduceScatter(full, part, static_cast<std::size_t>(n), nccl_type(e), ncclSum, ctx_.comm, ctx_.comm_stream),
            "zero reduce_scatter");
  follow(ctx_.comm_stream, stream);
}

}  // namespace ulysses::runtime::cuda
