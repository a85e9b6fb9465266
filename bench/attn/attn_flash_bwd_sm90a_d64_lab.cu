// The lab build of the wgmma backward at head dim 64 with dQ split by keys (sm_90a; backward variant 20480: each
// warpgroup adds its own 64 keys' dQ share by atomics; kernels/attention_flash_bwd_sm90a_d64.cuh KSPLIT, three TMA
// stages). kernels/ build 16384, 114688 and 245760 (the D = 64 default), which the lab runs as they are. Its own
// file, so that the D = 128 lab kernels' translation unit (attn_flash_bwd_sm90a_lab.cu) and machine code stay as they
// were.
#include "bench/attn/attn_tuning.hpp"
#include "kernels/attention_flash_bwd_sm90a_d64.cuh"

namespace ulysses::bench::attn {

cudaError_t launch_bwd_main_sm90a_d64_ksplit(const kernels::flash::BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  namespace F = kernels::flash;
  return causal ? F::launch_bwd_main_sm90a_d64_form<true, 3, true>(a, B, stream)
                : F::launch_bwd_main_sm90a_d64_form<false, 3, true>(a, B, stream);
}

}  // namespace ulysses::bench::attn
