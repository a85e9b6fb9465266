// Flash attention forward, the default configuration (attention_flash_defaults.hpp): D=128 the
// pipelined ping-pong wgmma kernel where usable (attention_flash_fwd_sm90a.cu), else mma.sync;
// D=64 mma.sync with 128-key tiles. The kernel templates: attention_flash_fwd.cuh.
#include "kernels/attention_flash_defaults.hpp"
#include "kernels/attention_flash_fwd.cuh"

namespace ulysses::kernels {

cudaError_t attn_fwd_flash(const AttnFwdParams& p, cudaStream_t stream) {
  namespace F = flash;
  if (!F::fwd_params_ok(p)) return cudaErrorInvalidValue;
  constexpr int v = F::kFwdDefault;
  return F::dispatch_fwd<(v & 1) != 0>(p, stream, (v & F::kFwdBitSm90a) != 0, (v & F::kFwdBitSm90aPipe) != 0,
                                       (v & F::kFwdBitSm90aPing) != 0);
}

}  // namespace ulysses::kernels
