#pragma once
// One Llama/Qwen-style decoder layer (Qwen3's per-head q/k norms optional), forward and backward in fp64: the
// oracle of the CUDA runtime's layer (runtime/cuda/decoder_layer.hpp) and of the CPU backend's step.
// Composed from the fp64 oracles of attention (reference_attention.hpp) and of the elementwise ops
// (reference_layer.hpp); projections are exact fp64 products.
//
//   n1 = rmsnorm(x; w1)      q, k, v = n1 Wq^T, n1 Wk^T, n1 Wv^T
//   (qk_norm: q, k = rmsnorm over each head's D values; wqn, wkn [D]: Qwen3's q_norm, k_norm)
//   q, k = rope(q), rope(k)
//   o = causal_attention(q, k, v)      h1 = x + o Wo^T      n2 = rmsnorm(h1; w2)
//   act = silu(n2 Wg^T) * (n2 Wu^T)    y = h1 + act Wd^T
// Shapes (T tokens): x, y, h1, n1, n2 [T, h]; q, o [T, H, D]; k, v [T, H_kv, D]; act [T, F];
// Wq [H D, h], Wk, Wv [H_kv D, h], Wo [h, H D], Wg, Wu [F, h], Wd [h, F], w1, w2 [h].
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/bf16.hpp"

namespace ulysses::runtime {

struct DecoderLayerDims {
  std::int64_t T = 0, h = 0, H = 0, H_kv = 0, D = 0, F = 0;
  double eps = 1e-5;
  bool round_normalized = true;  // HF's bf16 rounding of the norms' normalized value (false: the smooth layer)
  bool qk_norm = false;          // Qwen3: RMSNorm over the head dim of q and k before RoPE
  std::int64_t mlp_shards = 1;   // TiledMLP on our runtime (runtime/cuda/decoder_layer.hpp): the MLP over
                                 // torch.chunk shards of the tokens; the oracle computes it whole (the same sums)
};

template <class V>
struct DecoderLayerParams {  // V = std::vector<core::bf16> (the weights a runtime holds) or std::vector<double>
  V w1, wq, wk, wv, wo, w2, wg, wu, wd;
  V wqn, wkn;  // [D] each with qk_norm, else empty
};

struct DecoderLayerResult {
  std::vector<double> y;                                                 // [T, h]
  std::vector<double> dx;                                                // [T, h]
  DecoderLayerParams<std::vector<double>> dparams;                      // each parameter's gradient
};

// The attention between the layer's rope'd q, k, v and o, all sequence-sharded as the layer holds them:
// q, o, dout, dq [T, H, D]; k, v, dk, dv [T, H_kv, D]. The layer calls forward once, then backward at most
// once (the object keeps what its backward needs). Without one the layer runs causal attention over its T
// tokens (one rank); the sequence-parallel step (runtime/cpu/sp_step.hpp) supplies the Ulysses exchange
// around the attention of the rank's heads over the whole sequence.
class LayerAttention {
 public:
  virtual ~LayerAttention() = default;
  virtual std::vector<double> forward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v) = 0;
  virtual void backward(const std::vector<double>& dout, std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) = 0;
};
using LayerAttentionFactory = std::function<std::unique_ptr<LayerAttention>()>;  // one object per layer call

// Forward from x, then the backward from dy (both fp64: a layer's input and the gradient of its output,
// e.g. from the layer above; dy empty: the forward alone, dx and dparams empty); cos/sin: the bf16 RoPE
// tables [T, D/2] (rope_tables) of the tokens' positions; attention: empty for the one-rank attention.
DecoderLayerResult decoder_layer_reference(const DecoderLayerDims& d, const DecoderLayerParams<std::vector<core::bf16>>& p,
                                           const std::vector<double>& x, const std::vector<double>& dy,
                                           const std::vector<core::bf16>& cos, const std::vector<core::bf16>& sin,
                                           const LayerAttentionFactory& attention = {});
std::vector<double> widen(const std::vector<core::bf16>& v);  // bf16 bits to fp64

}  // namespace ulysses::runtime
