// The lab build of the wgmma backward's TMA form in two stages (sm_90a, D = 128; backward variant 12288,
// kernels/attention_flash_bwd_sm90a_tma.cuh); 8192, 40960 and 106496 are kernels/' own (launch_bwd_sm90a). Its own
// file: the forward's and the backward's sm_90a pieces both name their tile constants kD, kBM, kBN.
#include "bench/attn/attn_tuning.hpp"
#include "kernels/attention_flash_bwd_sm90a_tma.cuh"

namespace ulysses::bench::attn {

cudaError_t launch_bwd_main_sm90a_tma2(const kernels::flash::BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  namespace F = kernels::flash;
  return causal ? F::launch_bwd_main_sm90a_tma<true, 2>(a, B, stream) : F::launch_bwd_main_sm90a_tma<false, 2>(a, B, stream);
}

}  // namespace ulysses::bench::attn
