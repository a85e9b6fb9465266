// The memory model's terms that depend on the model and the plan's ZeRO settings alone (docs/MODEL.md
// "Reduce epilogue", "Optimizer step"): computed once per structure, not per sequence length.
#include "sim/model_terms.hpp"

#include <algorithm>
#include <cmath>

#include "sim/memory.hpp"
#include "sim/model.hpp"

namespace ulysses {
std::vector<double> zero3_sub_groups(const ModelSpec& mo, double N) {
  std::vector<double> g;
  double cur = 0;
  for (std::int64_t numel : parameter_numels(mo)) {
    cur += std::ceil(double(numel) / N);
    if (cur >= kZero3SubGroupElems) g.push_back(cur), cur = 0;
  }
  if (cur > 0) g.push_back(cur);
  return g;
}

// The largest ZeRO-3 optimizer sub-group, in elements of one rank's partition. DeepSpeed walks the
// parameters in model order adding each one's partition (ceil(numel / N)) and closes a sub-group
// when it reaches sub_group_size or at the last parameter (stage3.py _create_fp16_sub_groups).
// HF order: embedding; per layer q, k, v (each + bias), o, q_norm, k_norm, gate, up, down, the two
// norms; final norm; lm_head. Whole layers that keep the group short are added at once, so the cost
// is a few steps per sub-group (zero3_sub_groups walks them one parameter at a time; a test compares).
double largest_sub_group(const ModelSpec& mo, double N) {
  const double h = double(mo.hidden);
  auto part = [&](double numel) { return std::ceil(numel / N); };
  const LayerParams lp = layer_params(mo);
  double layer[kMaxLayerParams];
  const int n = lp.n;
  for (int i = 0; i < n; ++i) layer[i] = part(double(lp.p[i].numel));
  double per_layer = 0;
  for (int i = 0; i < n; ++i) per_layer += layer[i];
  double cur = 0, best = 0;
  auto add = [&](double p) {
    cur += p;
    if (cur >= kZero3SubGroupElems) best = std::max(best, cur), cur = 0;
  };
  add(part(double(mo.vocab) * h));
  for (std::int64_t l = 0; l < mo.layers;) {
    const double room = kZero3SubGroupElems - cur;  // > 0: a closed group restarts at 0
    const std::int64_t whole = std::min<std::int64_t>(mo.layers - l, std::max<std::int64_t>(0, std::int64_t(std::ceil(room / per_layer)) - 1));
    if (whole > 0) {
      cur += double(whole) * per_layer;
      l += whole;
      continue;
    }
    for (int i = 0; i < n; ++i) add(layer[i]);
    ++l;
  }
  add(part(h));
  if (!mo.tied_embeddings) add(part(double(mo.vocab) * h));
  return std::max(best, cur);  // the last parameter closes the last group
}

ModelTermsKey model_terms_key(const Scenario& sc, const Dims& d) {
  const ModelSpec& mo = sc.model;
  const Plan& pl = sc.plan;
  ModelTermsKey k;
  k.L = mo.layers, k.h = mo.hidden, k.H = mo.heads, k.H_kv = mo.kv_heads, k.D = mo.head_dim, k.F = mo.ffn_hidden;
  k.V = mo.vocab;
  k.tied_embeddings = mo.tied_embeddings, k.qk_norm = mo.qk_norm, k.qkv_bias = mo.qkv_bias;
  k.zero_stage = pl.zero_stage;
  k.offload_optimizer = pl.offload_optimizer, k.tiled_logits = pl.tiled_logits;
  k.reduce_bucket_size = pl.reduce_bucket_size;
  k.P = d.P;
  k.zero_group = d.zero_group;
  return k;
}

ModelTerms model_terms(const ModelTermsKey& k) {
  ModelSpec mo;  // the shape only (its strings stay empty: nothing is allocated)
  mo.layers = k.L, mo.hidden = k.h, mo.heads = k.H, mo.kv_heads = k.H_kv, mo.head_dim = k.D, mo.ffn_hidden = k.F;
  mo.vocab = k.V;
  mo.tied_embeddings = k.tied_embeddings, mo.qk_norm = k.qk_norm, mo.qkv_bias = k.qkv_bias;
  ModelTerms t;
  const LayerParams lp = layer_params(mo);
  for (int i = 0; i < lp.n; ++i)
    if (double(lp.p[i].numel) > k.reduce_bucket_size) t.layer_grad = std::max(t.layer_grad, double(lp.p[i].numel));
  if (k.zero_stage >= 3) {
    const BucketPlan bp{k.reduce_bucket_size, k.offload_optimizer, k.tiled_logits};
    t.flushes = reduce_flushes(mo, bp, k.zero_group, k.P > 1);
    if (!k.offload_optimizer) t.largest_sub_group = largest_sub_group(mo, static_cast<double>(k.zero_group));
  }
  return t;
}

}  // namespace ulysses
