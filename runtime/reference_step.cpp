// The fp64 training step (runtime/reference_step.hpp): forward through the layers keeping each
// layer's input, the loss head over token shards, then the backward layer by layer (each layer's
// reference recomputes its forward from the kept input: activation checkpointing, in fp64).
#include "runtime/reference_step.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "runtime/reference_layer.hpp"
#include "sim/memory.hpp"

namespace ulysses::runtime {

std::vector<std::int64_t> shift_labels(const std::vector<std::int64_t>& tokens) {
  std::vector<std::int64_t> labels(tokens.size(), kIgnoreLabel);
  for (std::size_t t = 0; t + 1 < tokens.size(); ++t) labels[t] = tokens[t + 1];
  return labels;
}

StepResult step_reference(const StepDims& d, const StepParams& p, const std::vector<std::int64_t>& tokens,
                          const std::vector<std::int64_t>& labels, const std::vector<core::bf16>& cos,
                          const std::vector<core::bf16>& sin, std::int64_t logits_shards, std::int64_t loss_divisor,
                          const LayerAttentionFactory& attention) {
  const std::int64_t T = d.layer.T, h = d.layer.h, V = d.V;
  if (static_cast<std::int64_t>(tokens.size()) != T || static_cast<std::int64_t>(labels.size()) != T || logits_shards < 1)
    throw std::invalid_argument("step_reference: tokens and labels must have T entries, logits_shards >= 1");
  for (std::int64_t t = 0; t < T; ++t)
    if (tokens[t] < 0 || tokens[t] >= V || (labels[t] != kIgnoreLabel && (labels[t] < 0 || labels[t] >= V)))
      throw std::invalid_argument("step_reference: a token or label outside [0, V) (labels may be kIgnoreLabel)");
  const std::vector<double> embed = widen(p.embed), w_final = widen(p.w_final);
  const std::vector<double> head = d.tied ? embed : widen(p.lm_head);
  // ---- forward: the embedding, the layers (their inputs kept) ----
  std::vector<std::vector<double>> inputs(static_cast<std::size_t>(d.L));
  std::vector<double> x(static_cast<std::size_t>(T * h));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < h; ++j) x[t * h + j] = embed[tokens[t] * h + j];
  for (std::int64_t l = 0; l < d.L; ++l) {
    inputs[l] = x;
    x = decoder_layer_reference(d.layer, p.layers[l], x, {}, cos, sin, attention).y;
  }
  // ---- the final norm and the loss head, shard by shard (torch.chunk: chunks of ceil(T / shards)) ----
  std::vector<double> n(static_cast<std::size_t>(T * h)), rstd(T);
  rmsnorm_forward(T, h, x.data(), w_final.data(), d.layer.eps, n.data(), rstd.data());
  StepResult res;
  for (std::int64_t t = 0; t < T; ++t) res.valid_tokens += labels[t] != kIgnoreLabel;
  const double divisor = double(loss_divisor > 0 ? loss_divisor : std::max<std::int64_t>(res.valid_tokens, 1));
  std::vector<double> dn(static_cast<std::size_t>(T * h), 0.0), dhead(static_cast<std::size_t>(V * h), 0.0);
  std::vector<double> logits(static_cast<std::size_t>(V));
  std::int64_t t0 = 0;
  for (const std::int64_t n_shard : torch_chunk_sizes(T, logits_shards)) {
    for (std::int64_t t = t0; t < t0 + n_shard; ++t) {
      if (labels[t] == kIgnoreLabel) continue;
      double mx = -1e300;
      for (std::int64_t v = 0; v < V; ++v) {
        double s = 0;
        for (std::int64_t j = 0; j < h; ++j) s += n[t * h + j] * head[v * h + j];
        logits[v] = s;
        mx = std::max(mx, s);
      }
      double z = 0;
      for (std::int64_t v = 0; v < V; ++v) z += std::exp(logits[v] - mx);
      const double lse = mx + std::log(z);
      res.loss_sum += lse - logits[labels[t]];
      // d(loss_sum / divisor) / d logits = (softmax - onehot) / divisor
      for (std::int64_t v = 0; v < V; ++v) {
        const double g = (std::exp(logits[v] - lse) - (v == labels[t] ? 1.0 : 0.0)) / divisor;
        for (std::int64_t j = 0; j < h; ++j) {
          dn[t * h + j] += g * head[v * h + j];
          dhead[v * h + j] += g * n[t * h + j];
        }
      }
    }
    t0 += n_shard;
  }
  res.loss = res.loss_sum / double(std::max<std::int64_t>(res.valid_tokens, 1));
  // ---- backward: the final norm, the layers top down, the embedding ----
  std::vector<double> dx(static_cast<std::size_t>(T * h));
  res.d_final.assign(static_cast<std::size_t>(h), 0.0);
  rmsnorm_backward(T, h, dn.data(), x.data(), w_final.data(), d.layer.eps, dx.data(), res.d_final.data());
  res.d_layers.resize(static_cast<std::size_t>(d.L));
  for (std::int64_t l = d.L - 1; l >= 0; --l) {
    DecoderLayerResult r = decoder_layer_reference(d.layer, p.layers[l], inputs[l], dx, cos, sin, attention);
    dx = std::move(r.dx);
    res.d_layers[l] = std::move(r.dparams);
  }
  res.d_embed.assign(static_cast<std::size_t>(V * h), 0.0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < h; ++j) res.d_embed[tokens[t] * h + j] += dx[t * h + j];
  if (d.tied) {
    for (std::size_t i = 0; i < dhead.size(); ++i) res.d_embed[i] += dhead[i];
  } else {
    res.d_head = std::move(dhead);
  }
  return res;
}

namespace {
template <class Out, class Layers>
std::vector<Out> in_optimizer_order(const StepDims& d, Out embed, Out final_norm, Out head, Layers& layers) {
  std::vector<Out> out = {embed, final_norm};
  if (!d.tied) out.push_back(head);
  for (auto& l : layers) {
    for (Out t : {&l.w1, &l.wq, &l.wk, &l.wv, &l.wo, &l.w2, &l.wg, &l.wu, &l.wd}) out.push_back(t);
    if (d.layer.qk_norm) out.push_back(&l.wqn), out.push_back(&l.wkn);
  }
  return out;
}
}  // namespace

std::vector<const std::vector<core::bf16>*> param_tensors(const StepDims& d, const StepParams& p) {
  return in_optimizer_order<const std::vector<core::bf16>*>(d, &p.embed, &p.w_final, &p.lm_head, p.layers);
}
std::vector<std::vector<core::bf16>*> param_tensors(const StepDims& d, StepParams& p) {
  return in_optimizer_order<std::vector<core::bf16>*>(d, &p.embed, &p.w_final, &p.lm_head, p.layers);
}
std::vector<const std::vector<double>*> grad_tensors(const StepDims& d, const StepResult& g) {
  return in_optimizer_order<const std::vector<double>*>(d, &g.d_embed, &g.d_final, &g.d_head, g.d_layers);
}
std::vector<std::vector<double>*> grad_tensors(const StepDims& d, StepResult& g) {
  return in_optimizer_order<std::vector<double>*>(d, &g.d_embed, &g.d_final, &g.d_head, g.d_layers);
}

}  // namespace ulysses::runtime
