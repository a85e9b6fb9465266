// Flash attention backward, the default configuration per head dim (attention_flash_defaults.hpp):
// D=128 the wgmma kernel's TMA form with FlashAttention-3's dQ path behind its producer warpgroup, 368640, where usable
// (attention_flash_bwd_sm90a.cu; 106496, 40960, 8192 or 2048 when a build sets it as the default), else mma.sync variant
// 525;
// D=64 the wgmma kernel with FlashAttention-3's dQ path and 128-row q tiles, 245760, where usable
// (attention_flash_bwd_sm90a_d64.cu; 114688 or 16384 when a build sets it as the default), else mma.sync variant 1117.
// The kernel templates: attention_flash_bwd.cuh.
#include <atomic>
#include <string>

#include "kernels/attention_flash_bwd.cuh"
#include "kernels/attention_flash_defaults.hpp"

namespace ulysses::kernels {
namespace flash {
namespace {

// set once a wgmma launch found no TMA map encoder in the driver (tma.cuh), so later calls go to mma.sync at once
std::atomic<bool> no_tma_encoder{false};

template <int D>
cudaError_t launch_bwd_default(const AttnBwdParams& p, cudaStream_t stream) {
  if constexpr (D == 128) {
    const int v = bwd_variant_run(kBwdDefaultD128, 128);
    static_assert(kBwdDefaultD128 != kBwdVariantSm90aTma2, "kernels/ build the wgmma backward's 2048, 8192, 40960, 106496, 368640 only");
    if ((v == kBwdVariantSm90a || v == kBwdVariantSm90aTma3 || v == kBwdVariantSm90aTma3DqUnderDk ||
         v == kBwdVariantSm90aTma3DqBulk || v == kBwdVariantSm90aTma3DqBulkProducer) &&
        !no_tma_encoder.load()) {
      const cudaError_t err = launch_bwd_sm90a(p, stream, v);
      if (err != cudaErrorNotSupported) return err;
      no_tma_encoder = true;  // this driver has no TMA map encoder: the mma.sync kernel below, from now on at once
    }
  }
  if constexpr (D == 64) {
    const int v = bwd_variant_run(kBwdDefaultD64, 64);
    static_assert(kBwdDefaultD64 != kBwdVariantSm90aD64Ksplit, "kernels/ build the D = 64 wgmma backward's 16384, 114688, 245760 only");
    if ((v == kBwdVariantSm90aD64 || v == kBwdVariantSm90aD64DqBulk || v == kBwdVariantSm90aD64Q128) &&
        !no_tma_encoder.load()) {
      const cudaError_t err = launch_bwd_sm90a_d64(p, stream, v);
      if (err != cudaErrorNotSupported) return err;
      no_tma_encoder = true;  // as above (this once, run_bwd's memset and preprocess run again below)
    }
  }
  constexpr int V = kBwdMmaDefault<D>;
  return p.causal ? launch_bwd<D, true, V>(p, stream) : launch_bwd<D, false, V>(p, stream);
}

}  // namespace
}  // namespace flash

std::string attn_flash_kernels_in_use(int head_dim) {
  const int bv = flash::bwd_variant_run(head_dim == 64 ? flash::kBwdDefaultD64 : flash::kBwdDefaultD128, head_dim);
  return flash::kernels_in_use(flash::kFwdDefault, bv, head_dim);
}

std::size_t attn_bwd_flash_workspace_bytes(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t,
                                           std::int64_t D) {
  return flash::bwd_workspace_bytes(B, S, H, D);
}

cudaError_t attn_bwd_flash(const AttnBwdParams& p, cudaStream_t stream) {
  if (!flash::bwd_params_ok(p)) return cudaErrorInvalidValue;
  if (p.D == 128) return flash::launch_bwd_default<128>(p, stream);
  return flash::launch_bwd_default<64>(p, stream);
}

}  // namespace ulysses::kernels
