#pragma once
// The whole training step's phase names (docs/DESIGN.md "One vocabulary"): what the step model
// predicts (sim/timing.cpp step_times) and what a whole-step run measures under NVTX ranges of these
// names (our CUDA runtime's step: runtime/cuda/step_runner.cpp; the deepspeed backend's worker writes
// the same strings). eval/step_compare.cpp groups them for the comparison. The Ulysses block's six
// phases (core/phases.hpp) keep their names inside the step.
#include <string_view>

namespace ulysses::core {

// The passes of a decoder layer's ops: the forward, the checkpoint's recompute in the backward, the backward.
enum class StepPass : int { fwd, recompute, bwd };

// The op groups of a decoder layer; a phase name is "<group>.<pass>", e.g. gemm.qkv.recompute.
enum class LayerOp : int { norm, gemm_qkv, rope_add, attn, gemm_o, mlp, count };

inline constexpr std::string_view kLayerPhaseNames[3][6] = {
    {"norm.fwd", "gemm.qkv.fwd", "rope_add.fwd", "attn.fwd", "gemm.o.fwd", "mlp.fwd"},
    {"norm.recompute", "gemm.qkv.recompute", "rope_add.recompute", "attn.recompute", "gemm.o.recompute", "mlp.recompute"},
    {"norm.bwd", "gemm.qkv.bwd", "rope_add.bwd", "attn.bwd", "gemm.o.bwd", "mlp.bwd"}};
constexpr std::string_view phase_name(LayerOp op, StepPass pass) {
  return kLayerPhaseNames[static_cast<int>(pass)][static_cast<int>(op)];
}

// The Ulysses exchanges of a layer at sp > 1, per pass: q, k, v to head-sharded (the backward: their
// gradients back), attention's output back (the backward: its gradient to head-sharded).
inline constexpr std::string_view kA2aQkv[3] = {"a2a.qkv.fwd", "a2a.qkv.recompute", "a2a.qkv.bwd"};
inline constexpr std::string_view kA2aOut[3] = {"a2a.out.fwd", "a2a.out.recompute", "a2a.out.bwd"};
constexpr std::string_view a2a_qkv_phase(StepPass pass) { return kA2aQkv[static_cast<int>(pass)]; }
constexpr std::string_view a2a_out_phase(StepPass pass) { return kA2aOut[static_cast<int>(pass)]; }

// Around the layers.
inline constexpr std::string_view kEmbedFwd = "embed.fwd", kEmbedBwd = "embed.bwd";
inline constexpr std::string_view kLogitsFwd = "logits.fwd", kLogitsBwd = "logits.bwd";
// TiledMLP's per-shard forward rerun inside the MLP's backward; the optimizer step (norm, clipping, Adam).
inline constexpr std::string_view kMlpTiledRecompute = "mlp.tiled_recompute";
inline constexpr std::string_view kOptimizerStep = "optimizer.step";
// The optimizer on the host: the gradients to the host, the updated parameters back.
inline constexpr std::string_view kOffloadGrads = "offload.grads", kOffloadOptimizer = "offload.optimizer";
// ZeRO-3 with offload_params: the bf16 parameter parts from the host before they are all-gathered.
inline constexpr std::string_view kOffloadParams = "offload.params";
// ZeRO-3's collectives: the parameters all-gathered before use, the gradients reduce-scattered.
inline constexpr std::string_view kZeroAllgather = "zero.allgather", kZeroReduceScatter = "zero.reduce_scatter";

}  // namespace ulysses::core
