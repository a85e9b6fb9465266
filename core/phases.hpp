#pragma once
// core/ (namespace ulysses::core), the ground floor: standard library only; every library may include it.
// The one vocabulary shared by prediction and measurement (docs/DESIGN.md "One vocabulary").
// The runtime opens an NVTX range with exactly these names.
#include <array>
#include <string_view>

namespace ulysses::core {

// The Ulysses attention block of one layer: what `ulysses run` measures.
enum class BlockPhase : int { a2a_qkv_fwd, attn_fwd, a2a_out_fwd, a2a_out_bwd, attn_bwd, a2a_qkv_bwd, count };
inline constexpr std::array<std::string_view, 6> kBlockPhaseNames = {
    "a2a.qkv.fwd", "attn.fwd", "a2a.out.fwd", "a2a.out.bwd", "attn.bwd", "a2a.qkv.bwd"};
constexpr std::string_view name(BlockPhase p) { return kBlockPhaseNames[static_cast<int>(p)]; }

}  // namespace ulysses::core
