// The wgmma forward (sm_90a, D = 128 and 64) as the product runs it: kFwdProductForm (attention_flash_sm90a.hpp),
// the TMA form with FlashAttention-3's producer warpgroup (attention_flash_fwd_sm90a_tma.cuh PRODUCER): two 128-key
// K/V stages for the causal mask, 176-key tiles in two stages for the full mask at D = 128, three 128-key stages for
// the full mask at D = 64 (forward 1471: +11-16 % over 191, the form before, on the mean of two rounds at the four
// target points on one H100, 2026-12-06c, docs/ATTENTION.md v18); the lab builds the other forms (bench/attn/attn_flash_fwd_sm90a_lab.cu).
#include "kernels/attention_flash_fwd_sm90a_tma.cuh"

namespace ulysses::kernels::flash {

cudaError_t launch_fwd_sm90a(const FwdArgs& a, int B, bool causal, int head_dim, cudaStream_t stream) {
  constexpr bool kProducer = true;
  if (head_dim == 64) {
    return causal ? launch_fwd_sm90a_tma<true, 2, false, 64, kProducer>(a, B, stream)
                  : launch_fwd_sm90a_tma<false, 3, false, 64, kProducer>(a, B, stream);
  }
  if (head_dim != 128) return cudaErrorInvalidValue;
  return causal ? launch_fwd_sm90a_tma<true, 2, false, 128, kProducer>(a, B, stream)
                : launch_fwd_sm90a_tma<false, 2, false, 128, kProducer, 176>(a, B, stream);
}

}  // namespace ulysses::kernels::flash
