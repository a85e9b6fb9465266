// runtime/cuda/nccl_ranks.hpp: each call hops to the stream that does it and back.
#include "runtime/cuda/nccl_ranks.hpp"

#include <algorithm>
#include <exception>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {
namespace {

ncclDataType_t nccl_type(Elem e) { return e == Elem::bf16 ? ncclBfloat16 : ncclFloat; }

}  // namespace

NcclRank::NcclRank(RankCtx& ctx, DeviceArena& staging, std::int64_t capacity_elems)
    : ctx_(ctx), ex_(ctx, staging, capacity_elems) {
  ex_.force_nccl(true);
  CUDA_CHECK(cudaEventCreateWithFlags(&hop_, cudaEventDisableTiming));
  CUDA_CHECK(cudaStreamCreateWithFlags(&zero_stream_, cudaStreamNonBlocking));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;  // collective: every rank builds its NcclRank together
  ctx_.nccl(ncclCommSplit(ctx_.comm, 0, ctx_.rank, &zero_comm_, &cfg), "ncclCommSplit for ZeRO-3's collectives");
}

NcclRank::~NcclRank() {
  if (zero_comm_) std::uncaught_exceptions() ? ncclCommAbort(zero_comm_) : ncclCommDestroy(zero_comm_);
  if (zero_stream_) cudaStreamDestroy(zero_stream_);
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

void NcclRank::wait(cudaStream_t stream, const char* what) { ctx_.wait(stream, what); }

void NcclRank::run(Direction dir, const std::vector<XTensor>& xs, cudaStream_t stream) {
  follow(stream, ctx_.stream);  // the Exchanger packs and unpacks on the rank's stream
  ex_.run(dir, xs);
  follow(ctx_.stream, stream);
}

void NcclRank::all_gather(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) {
  all_gather_ahead(part, full, n, e, stream);
  join(stream);
}

void NcclRank::all_gather_ahead(const void* part, void* full, std::int64_t n, Elem e, cudaStream_t stream) {
  follow(stream, zero_stream_);
  ctx_.nccl(ncclAllGather(part, full, static_cast<std::size_t>(n), nccl_type(e), zero_comm_, zero_stream_), "zero all_gather");
}

void NcclRank::reduce_scatter(const void* full, void* part, std::int64_t n, Elem e, cudaStream_t stream) {
  follow(stream, zero_stream_);
  ctx_.nccl(ncclReduceScatter(full, part, static_cast<std::size_t>(n), nccl_type(e), ncclSum, zero_comm_, zero_stream_),
            "zero reduce_scatter");
  follow(zero_stream_, stream);
}

}  // namespace ulysses::runtime::cuda
