// Placeholder: the real backward kernel replaces this.
#include "kernels/attention_flash.hpp"

namespace ulysses::kernels {

cudaError_t attn_bwd_flash(const AttnBwdParams&, cudaStream_t) { return cudaErrorNotSupported; }

std::size_t attn_bwd_flash_workspace_bytes(std::int64_t B, std::int64_t S, std::int64_t Hq,
                                           std::int64_t, std::int64_t D) {
  // fp32 dq accumulator [B, S, Hq, D] + fp32 delta [B, Hq, S]
  return static_cast<std::size_t>(B * S * Hq * D) * 4 + static_cast<std::size_t>(B * Hq * S) * 4;
}

}  // namespace ulysses::kernels
