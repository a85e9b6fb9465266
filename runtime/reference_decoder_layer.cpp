// The fp64 decoder layer (runtime/reference_decoder_layer.hpp): forward, then backward, top to bottom.
#include "runtime/reference_decoder_layer.hpp"

#include <stdexcept>

#include "runtime/reference_attention.hpp"
#include "runtime/reference_layer.hpp"

namespace ulysses::runtime {
namespace {

using Vec = std::vector<double>;

// Y [M, N] = X [M, K] W^T, W [N, K]
Vec linear(const Vec& X, const Vec& W, std::int64_t M, std::int64_t N, std::int64_t K) {
  Vec Y(static_cast<std::size_t>(M * N));
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k) s += X[m * K + k] * W[n * K + k];
      Y[m * N + n] = s;
    }
  return Y;
}
// dX [M, K] += dY [M, N] W
void linear_dx(const Vec& dY, const Vec& W, std::int64_t M, std::int64_t N, std::int64_t K, Vec& dX) {
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      const double g = dY[m * N + n];
      for (std::int64_t k = 0; k < K; ++k) dX[m * K + k] += g * W[n * K + k];
    }
}
// dW [N, K] = dY^T X
Vec linear_dw(const Vec& dY, const Vec& X, std::int64_t M, std::int64_t N, std::int64_t K) {
  Vec dW(static_cast<std::size_t>(N * K), 0.0);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      const double g = dY[m * N + n];
      for (std::int64_t k = 0; k < K; ++k) dW[n * K + k] += g * X[m * K + k];
    }
  return dW;
}
Vec plus(const Vec& a, const Vec& b) {
  Vec c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

// Causal attention over the layer's own T tokens (one rank), fp64.
class LocalAttention : public LayerAttention {
 public:
  explicit LocalAttention(const AttnDims& a) : a_(a) {}
  Vec forward(const Vec& q, const Vec& k, const Vec& v) override {
    q_ = q, k_ = k, v_ = v;
    o_.assign(q.size(), 0.0), lse_.assign(static_cast<std::size_t>(a_.H * a_.S), 0.0);
    attention_forward<double>(a_, q_.data(), k_.data(), v_.data(), o_.data(), lse_.data());
    return o_;
  }
  void backward(const Vec& dout, Vec& dq, Vec& dk, Vec& dv) override {
    dq.assign(q_.size(), 0.0), dk.assign(k_.size(), 0.0), dv.assign(v_.size(), 0.0);
    attention_backward<double>(a_, q_.data(), k_.data(), v_.data(), o_.data(), lse_.data(), dout.data(), dq.data(), dk.data(), dv.data());
  }

 private:
  AttnDims a_;
  Vec q_, k_, v_, o_, lse_;
};

}  // namespace

std::vector<double> widen(const std::vector<core::bf16>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = core::bf16_to_float(v[i]);
  return out;
}

DecoderLayerResult decoder_layer_reference(const DecoderLayerDims& d, const DecoderLayerParams<std::vector<core::bf16>>& pb,
                                           const std::vector<double>& x, const std::vector<double>& dy,
                                           const std::vector<core::bf16>& cos, const std::vector<core::bf16>& sin,
                                           const LayerAttentionFactory& attention) {
  const std::int64_t T = d.T, h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  const DecoderLayerParams<Vec> p{widen(pb.w1), widen(pb.wq), widen(pb.wk), widen(pb.wv), widen(pb.wo), widen(pb.w2),
                                  widen(pb.wg), widen(pb.wu), widen(pb.wd), widen(pb.wqn), widen(pb.wkn)};
  if (d.qk_norm && (static_cast<std::int64_t>(p.wqn.size()) != d.D || static_cast<std::int64_t>(p.wkn.size()) != d.D))
    throw std::invalid_argument("decoder_layer_reference: qk_norm needs wqn and wkn of D entries");
  const AttnDims ad{1, T, d.H, d.H_kv, d.D, true};
  // ---- forward ----
  Vec n1(T * h), r1(T), n2(T * h), r2(T);
  rmsnorm_forward(T, h, x.data(), p.w1.data(), d.eps, n1.data(), r1.data(), d.round_normalized);
  const Vec qp = linear(n1, p.wq, T, HD, h), kp = linear(n1, p.wk, T, KD, h), v = linear(n1, p.wv, T, KD, h);
  // Qwen3's head norms: rows of D values, one per (token, head)
  Vec q0 = qp, k0 = kp, rq(T * d.H), rk(T * d.H_kv);
  if (d.qk_norm) {
    rmsnorm_forward(T * d.H, d.D, qp.data(), p.wqn.data(), d.eps, q0.data(), rq.data(), d.round_normalized);
    rmsnorm_forward(T * d.H_kv, d.D, kp.data(), p.wkn.data(), d.eps, k0.data(), rk.data(), d.round_normalized);
  }
  Vec q(T * HD), k(T * KD);
  rope_apply(T, d.H, d.D, q0.data(), cos.data(), sin.data(), false, q.data());
  rope_apply(T, d.H_kv, d.D, k0.data(), cos.data(), sin.data(), false, k.data());
  const std::unique_ptr<LayerAttention> attn = attention ? attention() : std::make_unique<LocalAttention>(ad);
  const Vec o = attn->forward(q, k, v);
  const Vec h1 = plus(x, linear(o, p.wo, T, h, HD));
  rmsnorm_forward(T, h, h1.data(), p.w2.data(), d.eps, n2.data(), r2.data(), d.round_normalized);
  const Vec g = linear(n2, p.wg, T, F, h), u = linear(n2, p.wu, T, F, h);
  Vec act(T * F);
  swiglu_forward(T * F, g.data(), u.data(), act.data());
  DecoderLayerResult res;
  res.y = plus(h1, linear(act, p.wd, T, h, F));
  if (dy.empty()) return res;  // the forward alone
  // ---- backward ----
  auto& dp = res.dparams;
  Vec dact(T * F, 0.0), dg(T * F), du(T * F), dn2(T * h, 0.0), dh1n(T * h), dw2(h);
  linear_dx(dy, p.wd, T, h, F, dact);
  dp.wd = linear_dw(dy, act, T, h, F);
  swiglu_backward(T * F, dact.data(), g.data(), u.data(), dg.data(), du.data());
  linear_dx(dg, p.wg, T, F, h, dn2);
  linear_dx(du, p.wu, T, F, h, dn2);
  dp.wg = linear_dw(dg, n2, T, F, h);
  dp.wu = linear_dw(du, n2, T, F, h);
  rmsnorm_backward(T, h, dn2.data(), h1.data(), p.w2.data(), d.eps, dh1n.data(), dw2.data(), d.round_normalized);
  dp.w2 = dw2;
  const Vec dh1 = plus(dy, dh1n);
  Vec dob(T * HD, 0.0);
  linear_dx(dh1, p.wo, T, h, HD, dob);
  dp.wo = linear_dw(dh1, o, T, h, HD);
  Vec dq, dk, dv;
  attn->backward(dob, dq, dk, dv);
  Vec dq0(T * HD), dk0(T * KD);
  rope_apply(T, d.H, d.D, dq.data(), cos.data(), sin.data(), true, dq0.data());
  rope_apply(T, d.H_kv, d.D, dk.data(), cos.data(), sin.data(), true, dk0.data());
  if (d.qk_norm) {  // through the head norms: dq0, dk0 become the projections' output gradients
    Vec dqp(T * HD), dkp(T * KD);
    dp.wqn.assign(static_cast<std::size_t>(d.D), 0.0), dp.wkn.assign(static_cast<std::size_t>(d.D), 0.0);
    rmsnorm_backward(T * d.H, d.D, dq0.data(), qp.data(), p.wqn.data(), d.eps, dqp.data(), dp.wqn.data(), d.round_normalized);
    rmsnorm_backward(T * d.H_kv, d.D, dk0.data(), kp.data(), p.wkn.data(), d.eps, dkp.data(), dp.wkn.data(), d.round_normalized);
    dq0 = std::move(dqp), dk0 = std::move(dkp);
  }
  Vec dn1(T * h, 0.0), dxn(T * h), dw1(h);
  linear_dx(dq0, p.wq, T, HD, h, dn1);
  linear_dx(dk0, p.wk, T, KD, h, dn1);
  linear_dx(dv, p.wv, T, KD, h, dn1);
  dp.wq = linear_dw(dq0, n1, T, HD, h);
  dp.wk = linear_dw(dk0, n1, T, KD, h);
  dp.wv = linear_dw(dv, n1, T, KD, h);
  rmsnorm_backward(T, h, dn1.data(), x.data(), p.w1.data(), d.eps, dxn.data(), dw1.data(), d.round_normalized);
  dp.w1 = dw1;
  res.dx = plus(dh1, dxn);
  return res;
}

}  // namespace ulysses::runtime
