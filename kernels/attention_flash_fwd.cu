// Flash attention forward, the default configuration (attention_flash_defaults.hpp): D=128 the
// wgmma kernel's TMA form with the producer warpgroup where usable (attention_flash_fwd_sm90a.cu), else mma.sync; D=64 the same
// with forward bit 128 (its D=64 instance), else mma.sync with 128-key tiles. The kernel templates: attention_flash_fwd.cuh.
#include "kernels/attention_flash_defaults.hpp"
#include "kernels/attention_flash_fwd.cuh"

namespace ulysses::kernels {

cudaError_t attn_fwd_flash(const AttnFwdParams& p, cudaStream_t stream) {
  namespace F = flash;
  constexpr int v = F::kFwdDefault;
  static_assert((v & ~(F::kFwdProductForm | F::kFwdBitSm90aD64 | 1)) == 0, "a forward default kernels/ build");
  static_assert((v & F::kFwdBitSm90a) == 0 || (v & ~(F::kFwdBitSm90aD64 | 1)) == F::kFwdProductForm,
                "kernels/ build only the wgmma forward's kFwdProductForm; the other forms are the lab's");
  if (!F::fwd_params_ok(p)) return cudaErrorInvalidValue;
  if (F::fwd_wgmma_at(v, static_cast<int>(p.D)) && F::sm90a_usable()) {
    const cudaError_t err = F::launch_fwd_sm90a(F::fwd_args(p), static_cast<int>(p.B), p.causal, static_cast<int>(p.D), stream);
    if (err != cudaErrorNotSupported) return err;  // no TMA map encoder in this driver: the mma.sync kernel
  }
  return F::dispatch_fwd_mma<(v & 1) != 0>(p, stream);
}

}  // namespace ulysses::kernels
