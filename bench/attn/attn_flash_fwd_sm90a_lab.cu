// The lab build of the wgmma forward's forms (sm_90a, D = 128): plain, pipelined, ping-pong
// (forward variant bits 4, 8 of attn_tuning.hpp), instantiated from the one kernel template in
// kernels/attention_flash_fwd_sm90a.cuh; kernels/ build only the default form (2|4|8).
#include "bench/attn/attn_tuning.hpp"
#include "kernels/attention_flash_fwd_sm90a.cuh"

namespace ulysses::bench::attn {

cudaError_t launch_fwd_sm90a_variant(const kernels::flash::FwdArgs& a, int B, bool causal, bool pipelined,
                                     bool pingpong, cudaStream_t stream) {
  namespace F = kernels::flash;
  if (causal) {
    return !pipelined ? F::launch_fwd_sm90a_form<true, false, false>(a, B, stream)
                      : (pingpong ? F::launch_fwd_sm90a_form<true, true, true>(a, B, stream)
                                  : F::launch_fwd_sm90a_form<true, true, false>(a, B, stream));
  }
  return !pipelined ? F::launch_fwd_sm90a_form<false, false, false>(a, B, stream)
                    : (pingpong ? F::launch_fwd_sm90a_form<false, true, true>(a, B, stream)
                                : F::launch_fwd_sm90a_form<false, true, false>(a, B, stream));
}

}  // namespace ulysses::bench::attn
