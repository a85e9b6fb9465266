#pragma once
// One decoder layer on the GPU, forward and backward (issue 13's whole step): our RMSNorm / RoPE / SwiGLU /
// add kernels (kernels/layer_ops.hpp), the attention kernels (kernels/attention.hpp) and cuBLASLt projections
// (runtime/cuda/gemm.hpp). The formulas and shapes are runtime/reference_decoder_layer.hpp's, which is this
// layer's fp64 oracle. At sp = P > 1 (LayerCtx::sp) the layer holds T = S / P tokens of the sequence and its
// attention runs between Ulysses exchanges (runtime/cuda/layer_exchange.hpp) on H / P heads over all S
// positions: q, k, v and o in both layouts, the kept lse [H_l, S] (H_l * S = H * T).
//
// The layer's tensors are four sets, so that a step can keep them apart: weights and their gradients
// (one per layer), activations (what the backward reads: one per layer, or one shared by every layer
// under activation checkpointing, refilled by the recompute), and scratch (the backward's temporaries,
// one for the whole step). Every tensor is bf16 except the norms' rstd, attention's lse and the norms'
// weight gradients (fp32). Each op group runs after marks->begin(its phase name) (core/step_phases.hpp).
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/bf16.hpp"
#include "core/step_phases.hpp"
#include "kernels/attention.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/device_memory.hpp"
#include "runtime/cuda/gemm.hpp"
#include "runtime/cuda/layer_exchange.hpp"
#include "runtime/reference_decoder_layer.hpp"

namespace ulysses::runtime::cuda {

using bf16_t = __nv_bfloat16;

// n device values (bf16 or fp32) copied to the host as doubles (the oracles' comparisons; synchronous).
template <class T>
std::vector<double> download_doubles(const T* src, std::int64_t n) {
  std::vector<T> h(static_cast<std::size_t>(n));
  CUDA_CHECK(cudaMemcpy(h.data(), src, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<double> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    if constexpr (std::is_same_v<T, float>) out[i] = h[i];
    else out[i] = core::bf16_to_float(reinterpret_cast<const core::bf16&>(h[i]));
  }
  return out;
}

// Called on the host, in stream order, before each phase's work is enqueued (timing, NVTX).
class PhaseMarks {
 public:
  virtual ~PhaseMarks() = default;
  virtual void begin(std::string_view phase, cudaStream_t stream) = 0;
};
// marks->begin(phase, stream) when the caller times the step (marks may be null).
inline void mark_phase(PhaseMarks* marks, std::string_view phase, cudaStream_t stream) {
  if (marks) marks->begin(phase, stream);
}

struct LayerWeights {   // shapes: reference_decoder_layer.hpp
  bf16_t *w1, *wq, *wk, *wv, *wo, *w2, *wg, *wu, *wd;
  bf16_t *wqn = nullptr, *wkn = nullptr;               // [D] each, qk_norm only
};
struct LayerGrads {
  bf16_t *dwq, *dwk, *dwv, *dwo, *dwg, *dwu, *dwd;
  float *dw1, *dw2;     // [h] each
  float *dwqn = nullptr, *dwkn = nullptr;              // [D] each, qk_norm only
};
struct LayerActs {      // kept by the forward (or refilled by the recompute)
  bf16_t *n1, *q, *k, *v, *o, *h1, *n2, *g, *u, *act;  // [T,h] [T,HD] [T,KD] x2 [T,HD] [T,h] x2 [T,F] x3 (TiledMLP: g, u, act null)
  float *r1, *r2, *lse;                                // [T] [T] [H, T] (sp > 1: [H_l, S], as many values)
  bf16_t *qp = nullptr, *kp = nullptr;                 // qk_norm: the projections before the head norms [T,HD] [T,KD]
  float *rq = nullptr, *rk = nullptr;                  // qk_norm: their rstd [T*H] [T*H_kv]
  bf16_t *qh = nullptr, *kh = nullptr, *vh = nullptr, *oh = nullptr;  // sp > 1: head-sharded [S,H_l,D] [S,K_l,D] x2 [S,H_l,D]
};
struct LayerScratch {   // the backward's temporaries (and the forward's o_proj / down outputs in tmp_h)
  bf16_t *dact, *dg, *du;                              // [Tm,F] x3 (Tm = T, or TiledMLP's largest shard)
  bf16_t *tg = nullptr, *tu = nullptr, *tact = nullptr;  // TiledMLP: one shard's gate, up, act [Tm,F] x3
  bf16_t *dn, *tmp_h, *dh1;                            // [T,h] x3
  bf16_t *do_, *dq, *dk, *dv;                          // [T,HD] [T,HD] [T,KD] x2
  void *norm_ws, *attn_ws;
  bf16_t *dqp = nullptr, *dkp = nullptr;               // qk_norm: the projections' output gradients [T,HD] [T,KD]
  void* head_norm_ws = nullptr;                        // qk_norm: the head norms' dw partials (rows of D)
  bf16_t *doh = nullptr, *dqh = nullptr, *dkh = nullptr, *dvh = nullptr;  // sp > 1: head-sharded [S,H_l,D] x2 [S,K_l,D] x2
};
// K_l: kv heads per rank after the exchange, core::heads_per_rank(H_kv, P) (one replica each when H_kv < P).

inline bool tiled_mlp(const DecoderLayerDims& d) { return d.mlp_shards > 1; }
std::int64_t mlp_rows(const DecoderLayerDims& d);  // the MLP's rows at once: T, or TiledMLP's largest shard

LayerWeights alloc_weights(BufferSet& b, const DecoderLayerDims& d);
LayerGrads alloc_grads(BufferSet& b, const DecoderLayerDims& d);
// sp: the ranks P the sequence is split over (d.T is one rank's tokens): at P > 1 the head-sharded tensors too,
// and attention's workspace for [S, H_l] (sim/step_runtime_memory.cpp mirrors both, byte for byte)
LayerActs alloc_acts(BufferSet& b, const DecoderLayerDims& d, int sp = 1);
LayerScratch alloc_scratch(BufferSet& b, const DecoderLayerDims& d, kernels::AttnKernel attn, int sp = 1);
std::int64_t weight_elems(const DecoderLayerDims& d);  // the parameters' elements (nine, + two head norms)

struct LayerCtx {
  DecoderLayerDims d;
  Gemm* gemm;
  kernels::AttnKernel attn;
  const bf16_t *cos, *sin;  // [T, D/2] each: this rank's positions
  PhaseMarks* marks;        // may be null
  LayerExchange* sp = nullptr;  // sp > 1: the exchange among the ranks (null: one rank, no exchange)
};

// y [T, h] = layer(x [T, h]) into `a` (pass fwd), or the recompute of the backward (pass recompute:
// stops after the last tensor the backward reads, act, or with TiledMLP n2; y unused and may be null).
// TiledMLP (d.mlp_shards > 1, DeepSpeed's TiledMLP): the MLP runs shard by shard over torch.chunk rows of
// n2 and keeps nothing of it; the backward reruns each shard's gate, up and act (phase
// mlp.tiled_recompute) before that shard's gradients, which the weight gradients sum over shards.
void layer_forward(const LayerCtx& c, const LayerWeights& w, const LayerActs& a, const LayerScratch& s,
                   const bf16_t* x, bf16_t* y, core::StepPass pass, cudaStream_t stream);
// dx [T, h] from dy [T, h] with `a` holding the forward of x; the gradients overwrite `g`.
void layer_backward(const LayerCtx& c, const LayerWeights& w, const LayerGrads& g, const LayerActs& a,
                    const LayerScratch& s, const bf16_t* x, const bf16_t* dy, bf16_t* dx, cudaStream_t stream);

// The gradients downloaded (norm weights from fp32, the rest from bf16), as doubles.
DecoderLayerParams<std::vector<double>> download_grads(const LayerGrads& g, const DecoderLayerDims& d);
void upload_weights(const LayerWeights& w, const DecoderLayerDims& d, const DecoderLayerParams<std::vector<core::bf16>>& p);

// One layer with its own weights, gradients, activations and scratch (tests, benches).
class DecoderLayer {
 public:
  // Uploads the parameters and the RoPE tables ([T, D/2] bf16 each); allocates every buffer once.
  DecoderLayer(const DecoderLayerDims& d, const DecoderLayerParams<std::vector<core::bf16>>& p,
               const std::vector<core::bf16>& cos, const std::vector<core::bf16>& sin, Gemm& gemm,
               kernels::AttnKernel attn = kernels::AttnKernel::flash);

  void forward(const bf16_t* x, bf16_t* y, cudaStream_t stream);
  void backward(const bf16_t* x, const bf16_t* dy, bf16_t* dx, cudaStream_t stream);
  DecoderLayerParams<std::vector<double>> grads() const { return download_grads(g_, ctx_.d); }
  std::int64_t device_bytes() const { return arena_.peak_bytes(); }

 private:
  DeviceArena arena_;
  BufferSet bufs_;
  LayerCtx ctx_;
  LayerWeights w_;
  LayerGrads g_;
  LayerActs a_;
  LayerScratch s_;
};

}  // namespace ulysses::runtime::cuda
