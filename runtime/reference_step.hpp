#pragma once
// One training step's forward and backward of a causal LM in fp64 (issue 13): the oracle of the whole
// step on our runtime, and the CPU loop CI runs at tiny shapes. Embedding -> L decoder layers
// (runtime/reference_decoder_layer.hpp) -> final RMSNorm -> lm_head -> cross-entropy.
//
// The loss is what the Accelerate + DeepSpeed integration computes with sequence parallelism: labels
// shifted once over the whole sequence before it is split (`shift_labels`: position t predicts token
// t + 1, the last position and any label -100 are ignored), each rank sums its tokens' cross-entropy,
// and the sum over ranks is divided by the number of valid tokens over ranks (token-weighted, not a
// mean of rank means). Tiled logits (`logits_shards` > 1) compute the same sums over torch.chunk shards
// of the tokens, without the [T, V] logits at once.
//
// Shapes: tokens, labels [T]; embed [V, h]; lm_head [V, h] (tied: the embedding); w_final [h].
#include <cstdint>
#include <vector>

#include "core/bf16.hpp"
#include "runtime/reference_decoder_layer.hpp"

namespace ulysses::runtime {

inline constexpr std::int64_t kIgnoreLabel = -100;

struct StepDims {
  DecoderLayerDims layer;  // T, h, H, H_kv, D, F, eps
  std::int64_t L = 1, V = 0;
  bool tied = false;
};

struct StepParams {
  std::vector<core::bf16> embed, w_final, lm_head;  // lm_head unused when tied
  std::vector<DecoderLayerParams<std::vector<core::bf16>>> layers;
};

struct StepResult {
  double loss_sum = 0;            // sum of the valid tokens' cross-entropy (one rank's part)
  std::int64_t valid_tokens = 0;  // its valid tokens
  double loss = 0;                // loss_sum / valid_tokens (one rank alone)
  std::vector<double> d_embed, d_final, d_head;  // d_head empty when tied (folded into d_embed)
  std::vector<DecoderLayerParams<std::vector<double>>> d_layers;
};

// HF's shift over the whole sequence: labels[t] = tokens[t + 1], the last one kIgnoreLabel.
std::vector<std::int64_t> shift_labels(const std::vector<std::int64_t>& tokens);

// The step on T tokens with their (shifted) labels; `loss_divisor`: the number of valid tokens the
// loss is divided by (over every SP rank; 0: this call's own). The gradients are those of
// loss_sum / loss_divisor. `attention`: every layer's (empty: causal attention over these T tokens; one
// rank of the sequence-parallel step passes the Ulysses exchange, runtime/cpu/sp_step.hpp).
StepResult step_reference(const StepDims& d, const StepParams& p, const std::vector<std::int64_t>& tokens,
                          const std::vector<std::int64_t>& labels, const std::vector<core::bf16>& cos,
                          const std::vector<core::bf16>& sin, std::int64_t logits_shards = 1,
                          std::int64_t loss_divisor = 0, const LayerAttentionFactory& attention = {});

// The parameters as one list of tensors in the optimizer's order (runtime/cuda/step_runner.cpp
// optimizer_params): embed, final norm, lm_head (untied only), then per layer w1 wq wk wv wo w2 wg wu wd
// and, with qk_norm, wqn wkn. grad_tensors: a StepResult's gradients in the same order.
std::vector<const std::vector<core::bf16>*> param_tensors(const StepDims& d, const StepParams& p);
std::vector<std::vector<core::bf16>*> param_tensors(const StepDims& d, StepParams& p);
std::vector<const std::vector<double>*> grad_tensors(const StepDims& d, const StepResult& g);
std::vector<std::vector<double>*> grad_tensors(const StepDims& d, StepResult& g);

}  // namespace ulysses::runtime
