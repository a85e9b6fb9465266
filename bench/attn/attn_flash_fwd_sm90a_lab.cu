// The lab build of the wgmma forward's forms (sm_90a, D = 128; the TMA form also D = 64): plain, pipelined, ping-pong
// (forward variant bits 4, 8 of attn_tuning.hpp), instantiated from the one kernel template in
// kernels/attention_flash_fwd_sm90a.cuh, and the TMA form (bits 16, 32, 64;
// kernels/attention_flash_fwd_sm90a_tma.cuh), with bit 256 its producer-warpgroup form (PRODUCER: 384 threads,
// setmaxnreg 24/240; bit 512 three stages for the causal mask too; bit 1024 176-key tiles in two stages for the full
// mask at D = 128); kernels/ build only the default form (kFwdProductForm: 2|4|8|16|32|256|1024).
#include "bench/attn/attn_tuning.hpp"
#include "kernels/attention_flash_fwd_sm90a_tma.cuh"

namespace ulysses::bench::attn {
namespace {

namespace F = kernels::flash;

template <bool CAUSAL, int D, bool PRODUCER>
cudaError_t launch_tma_form(const F::FwdArgs& a, int B, int v, cudaStream_t stream) {
  // three stages for the full mask only (bit 32; the product's rule); with the producer (256), bit 512 the causal too
  const bool three = (v & F::kFwdBitTma3) != 0 && (!CAUSAL || (PRODUCER && (v & kFwdBitTmaProducer3) != 0));
  const bool heads_first = (v & F::kFwdBitTmaHeads) != 0;
  if (three) {
    return heads_first ? F::launch_fwd_sm90a_tma<CAUSAL, 3, true, D, PRODUCER>(a, B, stream)
                       : F::launch_fwd_sm90a_tma<CAUSAL, 3, false, D, PRODUCER>(a, B, stream);
  }
  return heads_first ? F::launch_fwd_sm90a_tma<CAUSAL, 2, true, D, PRODUCER>(a, B, stream)
                     : F::launch_fwd_sm90a_tma<CAUSAL, 2, false, D, PRODUCER>(a, B, stream);
}

template <bool CAUSAL, int D>
cudaError_t launch_tma(const F::FwdArgs& a, int B, int v, cudaStream_t stream) {
  if constexpr (!CAUSAL && D == 128) {  // bit 1024 (with 256): 176-key tiles, two stages (3 x 88 KiB would not fit)
    if ((v & kFwdBitTmaProducer176) != 0 && (v & kFwdBitTmaProducer) != 0) {
      return (v & F::kFwdBitTmaHeads) != 0 ? F::launch_fwd_sm90a_tma<false, 2, true, 128, true, 176>(a, B, stream)
                                           : F::launch_fwd_sm90a_tma<false, 2, false, 128, true, 176>(a, B, stream);
    }
  }
  return (v & kFwdBitTmaProducer) != 0 ? launch_tma_form<CAUSAL, D, true>(a, B, v, stream)
                                       : launch_tma_form<CAUSAL, D, false>(a, B, v, stream);
}

template <bool CAUSAL>
cudaError_t launch_form(const F::FwdArgs& a, int B, int head_dim, int v, cudaStream_t stream) {
  if ((v & F::kFwdBitTma) != 0) return head_dim == 64 ? launch_tma<CAUSAL, 64>(a, B, v, stream) : launch_tma<CAUSAL, 128>(a, B, v, stream);
  if (head_dim != 128) return cudaErrorInvalidValue;
  if ((v & F::kFwdBitSm90aPipe) == 0) return F::launch_fwd_sm90a_form<CAUSAL, false, false>(a, B, stream);
  return (v & F::kFwdBitSm90aPing) != 0 ? F::launch_fwd_sm90a_form<CAUSAL, true, true>(a, B, stream)
                                        : F::launch_fwd_sm90a_form<CAUSAL, true, false>(a, B, stream);
}

}  // namespace

cudaError_t launch_fwd_sm90a_variant(const kernels::flash::FwdArgs& a, int B, bool causal, int head_dim, int v,
                                     cudaStream_t stream) {
  return causal ? launch_form<true>(a, B, head_dim, v, stream) : launch_form<false>(a, B, head_dim, v, stream);
}

}  // namespace ulysses::bench::attn
