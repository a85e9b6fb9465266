// The wgmma forward (sm_90a, D = 128) as the product runs it: the pipelined ping-pong form of the
// kernel template in attention_flash_fwd_sm90a.cuh (forward variant bits 2|4|8); the lab builds the
// other forms (bench/attn/attn_flash_fwd_sm90a_lab.cu).
#include "kernels/attention_flash_fwd_sm90a.cuh"

namespace ulysses::kernels::flash {

cudaError_t launch_fwd_sm90a(const FwdArgs& a, int B, bool causal, cudaStream_t stream) {
  return causal ? launch_fwd_sm90a_form<true, true, true>(a, B, stream)
                : launch_fwd_sm90a_form<false, true, true>(a, B, stream);
}

}  // namespace ulysses::kernels::flash
