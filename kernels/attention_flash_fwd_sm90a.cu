// The wgmma forward (sm_90a, D = 128 and 64) as the product runs it: the TMA form
// (attention_flash_fwd_sm90a_tma.cuh; forward variant bits 2|4|8|16|32: two K/V stages for the causal
// mask, three for the full one, the better of each in the lab's A/B of 2026-12-03, docs/ATTENTION.md);
// the lab builds the other forms (bench/attn/attn_flash_fwd_sm90a_lab.cu).
#include "kernels/attention_flash_fwd_sm90a_tma.cuh"

namespace ulysses::kernels::flash {

cudaError_t launch_fwd_sm90a(const FwdArgs& a, int B, bool causal, int head_dim, cudaStream_t stream) {
  if (head_dim == 64) {
    return causal ? launch_fwd_sm90a_tma<true, 2, false, 64>(a, B, stream)
                  : launch_fwd_sm90a_tma<false, 3, false, 64>(a, B, stream);
  }
  if (head_dim != 128) return cudaErrorInvalidValue;
  return causal ? launch_fwd_sm90a_tma<true, 2, false>(a, B, stream) : launch_fwd_sm90a_tma<false, 3, false>(a, B, stream);
}

}  // namespace ulysses::kernels::flash
