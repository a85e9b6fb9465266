// The lab build of the flash attention entry points (kernels/attention_flash.hpp) for attn_check:
// attn_fwd_flash / attn_bwd_flash run the variant chosen at run time with bench::attn's setters
// (attn_tuning.hpp), instantiating every listed variant of the kernel templates
// (kernels/attention_flash_{fwd,bwd}.cuh; the wgmma kernels' forms: attn_flash_{fwd,bwd}_sm90a_lab.cu).
// It replaces kernels/attention_flash_{fwd,bwd}.cu in attn_check, which does not link
// ulysses_kernels; the product never links this file.
#include <string>

#include "bench/attn/attn_tuning.hpp"
#include "kernels/attention_flash_bwd.cuh"
#include "kernels/attention_flash_defaults.hpp"
#include "kernels/attention_flash_fwd.cuh"

namespace ulysses::kernels {
namespace flash {
namespace {

static_assert(bench::attn::bwd_variant_exists(kBwdDefaultD128) && bench::attn::bwd_variant_exists(kBwdDefaultD64),
              "default backward variants must be built");
static_assert(bench::attn::bwd_variant_exists(kBwdFallbackD128), "the mma.sync D=128 default must be built");

int g_fwd_variant = kFwdDefault;
int g_bwd_variant_d128 = kBwdDefaultD128;
int g_bwd_variant_d64 = kBwdDefaultD64;

template <int D>
cudaError_t launch_bwd_d(const AttnBwdParams& p, cudaStream_t stream) {
#define ULYSSES_BWD_CASE(V) \
  case V:                   \
    return p.causal ? launch_bwd<D, true, V>(p, stream) : launch_bwd<D, false, V>(p, stream);
  static_assert(sizeof(bench::attn::kBwdVariants) / sizeof(int) == 36, "one case per listed variant");
  const int variant = bench::attn::bwd_variant(D);
  if (variant == kBwdVariantSm90aTma2) {  // D = 128 on a usable device only
    if constexpr (D == 128) {
      return run_bwd<128>(p, stream, [&](const BwdArgs& a) {
        return bench::attn::launch_bwd_main_sm90a_tma2(a, static_cast<int>(p.B), p.causal, stream);
      });
    }
    return cudaErrorNotSupported;
  }
  if (variant == kBwdVariantSm90aD64Ksplit) {  // D = 64 on a usable device only; the lab's own kernel
    if constexpr (D == 64) {
      return run_bwd<64>(p, stream, [&](const BwdArgs& a) {
        return bench::attn::launch_bwd_main_sm90a_d64_ksplit(a, static_cast<int>(p.B), p.causal, stream);
      });
    }
    return cudaErrorNotSupported;
  }
  if (variant == kBwdVariantSm90aD64 || variant == kBwdVariantSm90aD64DqBulk ||
      variant == kBwdVariantSm90aD64Q128) {  // kernels/ build these; bwd_variant() returns them only for D = 64 on
    if constexpr (D == 64) return launch_bwd_sm90a_d64(p, stream, variant);  // a usable device
    return cudaErrorNotSupported;
  }
  if (variant == kBwdVariantSm90a || variant == kBwdVariantSm90aTma3 || variant == kBwdVariantSm90aTma3DqUnderDk ||
      variant == kBwdVariantSm90aTma3DqBulk || variant == kBwdVariantSm90aTma3DqBulkProducer) {  // kernels/ build these; bwd_variant() returns them only for D = 128 on
    if constexpr (D == 128) return launch_bwd_sm90a(p, stream, variant);  // a usable device
    return cudaErrorNotSupported;
  }
  switch (variant) {
    ULYSSES_BWD_CASE(1)
    ULYSSES_BWD_CASE(2)
    ULYSSES_BWD_CASE(3)
    ULYSSES_BWD_CASE(5)
    ULYSSES_BWD_CASE(9)
    ULYSSES_BWD_CASE(13)
    ULYSSES_BWD_CASE(15)
    ULYSSES_BWD_CASE(29)
    ULYSSES_BWD_CASE(45)
    ULYSSES_BWD_CASE(61)
    ULYSSES_BWD_CASE(77)
    ULYSSES_BWD_CASE(93)
    ULYSSES_BWD_CASE(109)
    ULYSSES_BWD_CASE(125)
    ULYSSES_BWD_CASE(141)
    ULYSSES_BWD_CASE(157)
    ULYSSES_BWD_CASE(205)
    ULYSSES_BWD_CASE(221)
    ULYSSES_BWD_CASE(461)
    ULYSSES_BWD_CASE(477)
    ULYSSES_BWD_CASE(525)
    ULYSSES_BWD_CASE(1037)
    ULYSSES_BWD_CASE(1117)
    ULYSSES_BWD_CASE(1549)
    ULYSSES_BWD_CASE(1565)
    default:
      return p.causal ? launch_bwd<D, true, 0>(p, stream) : launch_bwd<D, false, 0>(p, stream);
  }
#undef ULYSSES_BWD_CASE
}

// forward variant bits v (attn_tuning.hpp): the wgmma forward's form (attn_flash_fwd_sm90a_lab.cu)
// where asked and usable, else the mma.sync forward
cudaError_t dispatch_fwd_bits(const AttnFwdParams& p, cudaStream_t stream, int v) {
  if (fwd_wgmma_at(v, static_cast<int>(p.D)) && sm90a_usable()) {
    return bench::attn::launch_fwd_sm90a_variant(fwd_args(p), static_cast<int>(p.B), p.causal, static_cast<int>(p.D), v,
                                                 stream);
  }
  return (v & 1) != 0 ? dispatch_fwd_mma<true>(p, stream) : dispatch_fwd_mma<false>(p, stream);
}

}  // namespace
}  // namespace flash

}  // namespace ulysses::kernels

namespace ulysses::bench::attn {
namespace flash = kernels::flash;
void set_fwd_variant(int v) { flash::g_fwd_variant = v; }
int fwd_variant() { return flash::g_fwd_variant; }
void set_bwd_variant(int v) { flash::g_bwd_variant_d128 = flash::g_bwd_variant_d64 = v; }
int bwd_variant(int head_dim) {
  const int v = head_dim == 64 ? flash::g_bwd_variant_d64 : flash::g_bwd_variant_d128;
  return flash::bwd_variant_run(v, head_dim);
}
std::string kernels_in_use(int head_dim) {
  return flash::kernels_in_use(fwd_variant(), bwd_variant(head_dim), head_dim);
}
}  // namespace ulysses::bench::attn

namespace ulysses::kernels {

std::size_t attn_bwd_flash_workspace_bytes(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t,
                                           std::int64_t D) {
  return flash::bwd_workspace_bytes(B, S, H, D);
}

cudaError_t attn_fwd_flash(const AttnFwdParams& p, cudaStream_t stream) {
  if (!flash::fwd_params_ok(p)) return cudaErrorInvalidValue;
  return flash::dispatch_fwd_bits(p, stream, bench::attn::fwd_variant());
}

cudaError_t attn_bwd_flash(const AttnBwdParams& p, cudaStream_t stream) {
  if (!flash::bwd_params_ok(p)) return cudaErrorInvalidValue;
  if (p.D == 128) return flash::launch_bwd_d<128>(p, stream);
  return flash::launch_bwd_d<64>(p, stream);
}

std::string attn_flash_kernels_in_use(int head_dim) { return bench::attn::kernels_in_use(head_dim); }

}  // namespace ulysses::kernels
