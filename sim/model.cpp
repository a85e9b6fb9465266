#include "sim/model.hpp"

namespace ulysses {

namespace {
bool qwen_like(const ModelSpec& m) { return m.qk_norm || m.qkv_bias; }  // Qwen3 (head norms), Qwen2/2.5 (q/k/v biases)
}  // namespace

double norm_eps_of(const ModelSpec& m) { return m.rms_norm_eps > 0 ? m.rms_norm_eps : qwen_like(m) ? 1e-6 : 1e-5; }
double rope_theta_of(const ModelSpec& m) { return m.rope_theta > 0 ? m.rope_theta : qwen_like(m) ? 1e6 : 500000.0; }

ParamCount count_params(const ModelSpec& m) {
  const std::int64_t h = m.hidden, H = m.heads, H_kv = m.kv_heads, D = m.head_dim;
  ParamCount p;
  // q: h x H*D, k and v: h x H_kv*D each, o: H*D x h
  p.attn_per_layer = h * H * D + 2 * h * H_kv * D + H * D * h;
  if (m.qkv_bias) p.attn_per_layer += (H + 2 * H_kv) * D;
  if (m.qk_norm) p.attn_per_layer += 2 * D;  // one RMSNorm weight of size D for q, one for k
  p.mlp_per_layer = 3 * h * m.ffn_hidden;    // gate, up: h x F; down: F x h
  p.norm_per_layer = 2 * h;                  // input_layernorm, post_attention_layernorm
  p.embedding = m.vocab * h;
  p.lm_head = m.tied_embeddings ? 0 : m.vocab * h;
  p.final_norm = h;
  return p;
}

LayerParams layer_params(const ModelSpec& m) {
  const std::int64_t h = m.hidden, H = m.heads, H_kv = m.kv_heads, D = m.head_dim, F = m.ffn_hidden;
  using R = LayerParamRole;
  LayerParams out;
  auto add = [&](R r, std::int64_t numel) { out.p[out.n++] = {r, numel}; };
  add(R::q, h * H * D);
  if (m.qkv_bias) add(R::q_bias, H * D);
  add(R::k, h * H_kv * D);
  if (m.qkv_bias) add(R::k_bias, H_kv * D);
  add(R::v, h * H_kv * D);
  if (m.qkv_bias) add(R::v_bias, H_kv * D);
  add(R::o, H * D * h);
  if (m.qk_norm) add(R::q_norm, D), add(R::k_norm, D);
  add(R::gate, h * F), add(R::up, h * F), add(R::down, F * h);
  add(R::input_norm, h), add(R::post_norm, h);
  return out;
}

std::vector<std::int64_t> parameter_numels(const ModelSpec& m, bool with_tied_head) {
  std::vector<std::int64_t> v;
  v.push_back(m.vocab * m.hidden);
  const LayerParams lp = layer_params(m);
  for (std::int64_t l = 0; l < m.layers; ++l)
    for (int i = 0; i < lp.n; ++i) v.push_back(lp.p[i].numel);
  v.push_back(m.hidden);
  if (!m.tied_embeddings || with_tied_head) v.push_back(m.vocab * m.hidden);
  return v;
}

}  // namespace ulysses
