// One decoder layer on the GPU (runtime/cuda/decoder_layer.hpp): buffers, forward, backward, top to
// bottom in the order the oracle (runtime/reference_decoder_layer.cpp) computes them.
#include "runtime/cuda/decoder_layer.hpp"

#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "kernels/layer_ops.hpp"
#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {
namespace {

void upload(__nv_bfloat16* dst, const std::vector<core::bf16>& src) {
  CUDA_CHECK(cudaMemcpy(dst, src.data(), src.size() * 2, cudaMemcpyHostToDevice));
}
template <class T>
std::vector<double> download(const T* src, std::int64_t n) {
  std::vector<T> h(static_cast<std::size_t>(n));
  CUDA_CHECK(cudaMemcpy(h.data(), src, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<double> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    if constexpr (std::is_same_v<T, float>) out[i] = h[i];
    else out[i] = core::bf16_to_float(reinterpret_cast<const core::bf16&>(h[i]));
  }
  return out;
}

}  // namespace

void* DecoderLayer::own(std::size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 1));
  owned_.push_back(p);
  bytes_ += static_cast<std::int64_t>(bytes);
  return p;
}

DecoderLayer::DecoderLayer(const DecoderLayerDims& d, const DecoderLayerParams<std::vector<core::bf16>>& p,
                           const std::vector<core::bf16>& cos, const std::vector<core::bf16>& sin, Gemm& gemm,
                           kernels::AttnKernel attn)
    : d_(d), gemm_(gemm), attn_(attn) {
  try {
    allocate(p, cos, sin);
  } catch (...) {  // the destructor does not run for a constructor that throws
    for (void* q : owned_) cudaFree(q);
    throw;
  }
}

void DecoderLayer::allocate(const DecoderLayerParams<std::vector<core::bf16>>& p, const std::vector<core::bf16>& cos,
                            const std::vector<core::bf16>& sin) {
  const DecoderLayerDims& d = d_;
  const std::int64_t T = d.T, h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  const auto param = [&](const std::vector<core::bf16>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) != n) throw std::invalid_argument("decoder layer: a parameter has the wrong size");
    __nv_bfloat16* b = bf(n);
    upload(b, v);
    return b;
  };
  w1_ = param(p.w1, h), wq_ = param(p.wq, HD * h), wk_ = param(p.wk, KD * h), wv_ = param(p.wv, KD * h);
  wo_ = param(p.wo, h * HD), w2_ = param(p.w2, h), wg_ = param(p.wg, F * h), wu_ = param(p.wu, F * h);
  wd_ = param(p.wd, h * F), cos_ = param(cos, T * d.D / 2), sin_ = param(sin, T * d.D / 2);
  n1_ = bf(T * h), q_ = bf(T * HD), k_ = bf(T * KD), v_ = bf(T * KD), o_ = bf(T * HD), h1_ = bf(T * h);
  n2_ = bf(T * h), g_ = bf(T * F), u_ = bf(T * F), act_ = bf(T * F);
  r1_ = fp(T), r2_ = fp(T), lse_ = fp(d.H * T);
  dwq_ = bf(HD * h), dwk_ = bf(KD * h), dwv_ = bf(KD * h), dwo_ = bf(h * HD), dwg_ = bf(F * h), dwu_ = bf(F * h);
  dwd_ = bf(h * F), dw1_ = fp(h), dw2_ = fp(h);
  dact_ = bf(T * F), dg_ = bf(T * F), du_ = bf(T * F), dn_ = bf(T * h), tmp_h_ = bf(T * h), dh1_ = bf(T * h);
  do_ = bf(T * HD), dq_ = bf(T * HD), dk_ = bf(T * KD), dv_ = bf(T * KD);
  norm_ws_ = own(kernels::rmsnorm_bwd_workspace_bytes(T, h));
  attn_ws_ = own(kernels::attn_bwd_workspace_bytes(attn_, 1, T, d.H, d.H_kv, d.D));
}

DecoderLayer::~DecoderLayer() {
  for (void* p : owned_) cudaFree(p);
}

void DecoderLayer::forward(const __nv_bfloat16* x, __nv_bfloat16* y, cudaStream_t s) {
  const std::int64_t T = d_.T, h = d_.h, F = d_.F, HD = d_.H * d_.D, KD = d_.H_kv * d_.D;
  CUDA_CHECK(kernels::rmsnorm_fwd(x, w1_, n1_, r1_, T, h, float(d_.eps), s));
  gemm_.forward(n1_, wq_, q_, T, HD, h, s);
  gemm_.forward(n1_, wk_, k_, T, KD, h, s);
  gemm_.forward(n1_, wv_, v_, T, KD, h, s);
  CUDA_CHECK(kernels::rope(q_, cos_, sin_, T, d_.H, d_.D, false, s));
  CUDA_CHECK(kernels::rope(k_, cos_, sin_, T, d_.H_kv, d_.D, false, s));
  kernels::AttnFwdParams a;
  a.q = q_, a.k = k_, a.v = v_, a.o = o_, a.lse = lse_;
  a.B = 1, a.S = T, a.H = d_.H, a.H_kv = d_.H_kv, a.D = d_.D, a.causal = true;
  a.scale = float(1.0 / std::sqrt(double(d_.D)));
  CUDA_CHECK(kernels::attn_fwd(attn_, a, s));
  gemm_.forward(o_, wo_, tmp_h_, T, h, HD, s);
  CUDA_CHECK(kernels::add(x, tmp_h_, h1_, T * h, s));
  CUDA_CHECK(kernels::rmsnorm_fwd(h1_, w2_, n2_, r2_, T, h, float(d_.eps), s));
  gemm_.forward(n2_, wg_, g_, T, F, h, s);
  gemm_.forward(n2_, wu_, u_, T, F, h, s);
  CUDA_CHECK(kernels::swiglu_fwd(g_, u_, act_, T * F, s));
  gemm_.forward(act_, wd_, tmp_h_, T, h, F, s);
  CUDA_CHECK(kernels::add(h1_, tmp_h_, y, T * h, s));
}

void DecoderLayer::backward(const __nv_bfloat16* x, const __nv_bfloat16* dy, __nv_bfloat16* dx, cudaStream_t s) {
  const std::int64_t T = d_.T, h = d_.h, F = d_.F, HD = d_.H * d_.D, KD = d_.H_kv * d_.D;
  // the MLP
  gemm_.input_grad(dy, wd_, dact_, T, h, F, s);
  gemm_.weight_grad(dy, act_, dwd_, T, h, F, 0.f, s);
  CUDA_CHECK(kernels::swiglu_bwd(dact_, g_, u_, dg_, du_, T * F, s));
  gemm_.input_grad(dg_, wg_, dn_, T, F, h, s);
  gemm_.input_grad(du_, wu_, tmp_h_, T, F, h, s);
  CUDA_CHECK(kernels::add(dn_, tmp_h_, dn_, T * h, s));
  gemm_.weight_grad(dg_, n2_, dwg_, T, F, h, 0.f, s);
  gemm_.weight_grad(du_, n2_, dwu_, T, F, h, 0.f, s);
  // the post-attention norm and the residual
  CUDA_CHECK(kernels::rmsnorm_bwd(dn_, h1_, w2_, r2_, tmp_h_, dw2_, norm_ws_, T, h, s));
  CUDA_CHECK(kernels::add(dy, tmp_h_, dh1_, T * h, s));
  // o_proj, attention, RoPE
  gemm_.input_grad(dh1_, wo_, do_, T, h, HD, s);
  gemm_.weight_grad(dh1_, o_, dwo_, T, h, HD, 0.f, s);
  kernels::AttnBwdParams b;
  b.q = q_, b.k = k_, b.v = v_, b.o = o_, b.dout = do_, b.lse = lse_, b.dq = dq_, b.dk = dk_, b.dv = dv_;
  b.workspace = attn_ws_;
  b.B = 1, b.S = T, b.H = d_.H, b.H_kv = d_.H_kv, b.D = d_.D, b.causal = true;
  b.scale = float(1.0 / std::sqrt(double(d_.D)));
  CUDA_CHECK(kernels::attn_bwd(attn_, b, s));
  CUDA_CHECK(kernels::rope(dq_, cos_, sin_, T, d_.H, d_.D, true, s));
  CUDA_CHECK(kernels::rope(dk_, cos_, sin_, T, d_.H_kv, d_.D, true, s));
  // q, k, v projections and the input norm
  gemm_.input_grad(dq_, wq_, dn_, T, HD, h, s);
  gemm_.input_grad(dk_, wk_, tmp_h_, T, KD, h, s);
  CUDA_CHECK(kernels::add(dn_, tmp_h_, dn_, T * h, s));
  gemm_.input_grad(dv_, wv_, tmp_h_, T, KD, h, s);
  CUDA_CHECK(kernels::add(dn_, tmp_h_, dn_, T * h, s));
  gemm_.weight_grad(dq_, n1_, dwq_, T, HD, h, 0.f, s);
  gemm_.weight_grad(dk_, n1_, dwk_, T, KD, h, 0.f, s);
  gemm_.weight_grad(dv_, n1_, dwv_, T, KD, h, 0.f, s);
  CUDA_CHECK(kernels::rmsnorm_bwd(dn_, x, w1_, r1_, tmp_h_, dw1_, norm_ws_, T, h, s));
  CUDA_CHECK(kernels::add(dh1_, tmp_h_, dx, T * h, s));
}

DecoderLayerParams<std::vector<double>> DecoderLayer::grads() const {
  const std::int64_t h = d_.h, F = d_.F, HD = d_.H * d_.D, KD = d_.H_kv * d_.D;
  return {download(dw1_, h),      download(dwq_, HD * h), download(dwk_, KD * h), download(dwv_, KD * h),
          download(dwo_, h * HD), download(dw2_, h),      download(dwg_, F * h),  download(dwu_, F * h),
          download(dwd_, h * F)};
}

}  // namespace ulysses::runtime::cuda
