#pragma once
// One decoder layer on the GPU, forward and backward (issue 13's whole step, one rank without the
// Ulysses exchange yet): our RMSNorm / RoPE / SwiGLU / add kernels (kernels/layer_ops.hpp), the
// attention kernels (kernels/attention.hpp) and cuBLASLt projections (runtime/cuda/gemm.hpp). The
// formulas and shapes are runtime/reference_decoder_layer.hpp's, which is this layer's fp64 oracle.
// Everything the backward needs is kept from the forward (no recompute yet); every tensor is bf16
// except the norms' rstd (fp32) and their weight gradients (fp32).
#include <cstdint>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/bf16.hpp"
#include "kernels/attention.hpp"
#include "runtime/cuda/gemm.hpp"
#include "runtime/reference_decoder_layer.hpp"

namespace ulysses::runtime::cuda {

class DecoderLayer {
 public:
  // Uploads the parameters and the RoPE tables ([T, D/2] bf16 each); allocates every buffer once.
  DecoderLayer(const DecoderLayerDims& d, const DecoderLayerParams<std::vector<core::bf16>>& p,
               const std::vector<core::bf16>& cos, const std::vector<core::bf16>& sin, Gemm& gemm,
               kernels::AttnKernel attn = kernels::AttnKernel::flash);
  ~DecoderLayer();
  DecoderLayer(const DecoderLayer&) = delete;
  DecoderLayer& operator=(const DecoderLayer&) = delete;

  // y [T, h] = layer(x [T, h]), device pointers; keeps what the backward reads.
  void forward(const __nv_bfloat16* x, __nv_bfloat16* y, cudaStream_t stream);
  // dx [T, h] from dy [T, h] after forward(x); the parameters' gradients land in grads().
  void backward(const __nv_bfloat16* x, const __nv_bfloat16* dy, __nv_bfloat16* dx, cudaStream_t stream);

  // The parameters' gradients, downloaded (norm weights from fp32, the rest from bf16), as doubles.
  DecoderLayerParams<std::vector<double>> grads() const;
  std::int64_t device_bytes() const { return bytes_; }

 private:
  void allocate(const DecoderLayerParams<std::vector<core::bf16>>& p, const std::vector<core::bf16>& cos,
                const std::vector<core::bf16>& sin);
  void* own(std::size_t bytes);  // device memory owned (and counted) by the layer
  __nv_bfloat16* bf(std::int64_t n) { return static_cast<__nv_bfloat16*>(own(static_cast<std::size_t>(n) * 2)); }
  float* fp(std::int64_t n) { return static_cast<float*>(own(static_cast<std::size_t>(n) * 4)); }
  DecoderLayerDims d_;
  Gemm& gemm_;
  kernels::AttnKernel attn_;
  std::vector<void*> owned_;
  std::int64_t bytes_ = 0;
  // parameters                        // shapes: reference_decoder_layer.hpp
  __nv_bfloat16 *w1_, *wq_, *wk_, *wv_, *wo_, *w2_, *wg_, *wu_, *wd_, *cos_, *sin_;
  // activations kept by the forward
  __nv_bfloat16 *n1_, *q_, *k_, *v_, *o_, *h1_, *n2_, *g_, *u_, *act_;  // [T,h] [T,HD] [T,KD] x2 [T,HD] [T,h] x2 [T,F] x3
  float *r1_, *r2_, *lse_;                                             // [T] [T] [H, T]
  // gradients: parameters, then the backward's temporaries
  __nv_bfloat16 *dwq_, *dwk_, *dwv_, *dwo_, *dwg_, *dwu_, *dwd_;
  float *dw1_, *dw2_;
  __nv_bfloat16 *dact_, *dg_, *du_, *dn_, *tmp_h_, *dh1_, *do_, *dq_, *dk_, *dv_;
  void *norm_ws_ = nullptr, *attn_ws_ = nullptr;
};

}  // namespace ulysses::runtime::cuda
