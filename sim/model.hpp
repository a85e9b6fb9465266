#pragma once
// Parameter counts of a decoder-only transformer with SwiGLU MLP and RMSNorm (Llama, Qwen).
#include <cstdint>
#include <vector>

#include "sim/scenario.hpp"

namespace ulysses {

struct ParamCount {
  std::int64_t attn_per_layer = 0;   // q, k, v, o projections (+ biases, qk norms)
  std::int64_t mlp_per_layer = 0;    // gate, up, down: 3*h*F
  std::int64_t norm_per_layer = 0;   // two RMSNorm weights: 2*h
  std::int64_t embedding = 0;        // V*h
  std::int64_t lm_head = 0;          // V*h, 0 when tied
  std::int64_t final_norm = 0;       // h
  std::int64_t per_layer() const { return attn_per_layer + mlp_per_layer + norm_per_layer; }
  std::int64_t total(std::int64_t layers) const { return layers * per_layer() + embedding + lm_head + final_norm; }
};

ParamCount count_params(const ModelSpec& m);

// The RMSNorm epsilon and the RoPE base the runtimes compute with (numerics only: no cost or memory term
// reads them): the model's own values, else Llama 3.x's (1e-5, 500000), or the Qwen families' (1e-6, 1000000)
// for a model with qk_norm (Qwen3) or q/k/v biases (Qwen2, 2.5) (docs/INPUTS.md "Model"). A model written
// back (model_yaml) keeps only the values it was given.
double norm_eps_of(const ModelSpec& m);
double rope_theta_of(const ModelSpec& m);

// One decoder layer's parameter tensors in HF module registration order (attention q, k, v (each +
// bias), o, q_norm, k_norm; mlp gate, up, down; input and post-attention norms): the order of
// model.parameters(), which DeepSpeed's ZeRO-3 sub-groups follow.
enum class LayerParamRole { q, q_bias, k, k_bias, v, v_bias, o, q_norm, k_norm, gate, up, down, input_norm, post_norm };
struct LayerParam {
  LayerParamRole role;
  std::int64_t numel;
};
inline constexpr int kMaxLayerParams = 14;
struct LayerParams {
  LayerParam p[kMaxLayerParams];
  int n = 0;
};
LayerParams layer_params(const ModelSpec& m);
// Every parameter tensor of the model in model.parameters() order, in elements: the embedding, per layer
// layer_params(), the final norm, the lm_head unless tied (with_tied_head: also then; zero.Init creates
// it before the weights are tied).
std::vector<std::int64_t> parameter_numels(const ModelSpec& m, bool with_tied_head = false);
inline std::int64_t total_params(const ModelSpec& m) { return count_params(m).total(m.layers); }

}  // namespace ulysses
