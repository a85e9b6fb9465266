// The fp64 oracle of a decoder layer's elementwise ops (runtime/reference_layer.hpp), read top to
// bottom: RMSNorm, RoPE, SwiGLU.
#include "runtime/reference_layer.hpp"

#include <cmath>

namespace ulysses::runtime {
namespace {
double f(core::bf16 v) { return core::bf16_to_float(v); }
double f(double v) { return v; }
double round_bf16(double v) { return core::bf16_to_float(core::float_to_bf16(static_cast<float>(v))); }
double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }
}  // namespace

// ---- RMSNorm ----

template <class In>
void rmsnorm_forward(std::int64_t T, std::int64_t h, const In* x, const In* w, double eps, double* out, double* rstd,
                     bool round_n) {
  for (std::int64_t t = 0; t < T; ++t) {
    const In* xt = x + t * h;  // [h]
    double ss = 0;
    for (std::int64_t j = 0; j < h; ++j) ss += f(xt[j]) * f(xt[j]);
    const double r = 1.0 / std::sqrt(ss / double(h) + eps);
    rstd[t] = r;
    for (std::int64_t j = 0; j < h; ++j) {
      const double n = f(xt[j]) * r;
      out[t * h + j] = f(w[j]) * (round_n ? round_bf16(n) : n);
    }
  }
}

template <class In>
void rmsnorm_backward(std::int64_t T, std::int64_t h, const In* dout, const In* x, const In* w, double eps, double* dx,
                      double* dw, bool round_n) {
  std::vector<double> n(static_cast<std::size_t>(h)), g(static_cast<std::size_t>(h));  // [h] each
  for (std::int64_t j = 0; j < h; ++j) dw[j] = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    const In* xt = x + t * h;     // [h]
    const In* dt = dout + t * h;  // [h]
    double ss = 0;
    for (std::int64_t j = 0; j < h; ++j) ss += f(xt[j]) * f(xt[j]);
    const double r = 1.0 / std::sqrt(ss / double(h) + eps);
    double dot = 0;
    for (std::int64_t j = 0; j < h; ++j) {
      n[j] = f(xt[j]) * r;
      g[j] = f(dt[j]) * f(w[j]);
      dw[j] += f(dt[j]) * (round_n ? round_bf16(n[j]) : n[j]);
      dot += g[j] * n[j];
    }
    dot /= double(h);
    for (std::int64_t j = 0; j < h; ++j) dx[t * h + j] = r * (g[j] - n[j] * dot);
  }
}

void rmsnorm_given_rstd(std::int64_t T, std::int64_t h, const core::bf16* x, const core::bf16* w,
                        const core::bf16* dout, const float* rstd, core::bf16* out, double* dw, double* dw_abs) {
  for (std::int64_t j = 0; j < h; ++j) dw[j] = 0, dw_abs[j] = 0;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < h; ++j) {
      const float n = core::bf16_to_float(core::float_to_bf16(core::bf16_to_float(x[t * h + j]) * rstd[t]));
      out[t * h + j] = core::float_to_bf16(core::bf16_to_float(w[j]) * n);
      const double term = double(core::bf16_to_float(dout[t * h + j])) * n;
      dw[j] += term, dw_abs[j] += std::fabs(term);
    }
}

// ---- RoPE ----

void rope_tables(std::int64_t T, std::int64_t D, const std::int64_t* positions, double theta,
                 std::vector<core::bf16>& cos, std::vector<core::bf16>& sin) {
  const std::int64_t half = D / 2;
  cos.assign(static_cast<std::size_t>(T * half), 0);
  sin.assign(static_cast<std::size_t>(T * half), 0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      // HF: inv_freq in fp32, the angle a fp32 product, cos/sin in fp32, then cast to the model's dtype
      const float inv_freq = static_cast<float>(1.0 / std::pow(theta, double(2 * i) / double(D)));
      const float angle = static_cast<float>(positions[t]) * inv_freq;
      cos[static_cast<std::size_t>(t * half + i)] = core::float_to_bf16(std::cos(angle));
      sin[static_cast<std::size_t>(t * half + i)] = core::float_to_bf16(std::sin(angle));
    }
}

template <class In>
void rope_apply(std::int64_t T, std::int64_t H, std::int64_t D, const In* x, const core::bf16* cos,
                const core::bf16* sin, bool backward, double* out) {
  const std::int64_t half = D / 2;
  const double sign = backward ? -1.0 : 1.0;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t hh = 0; hh < H; ++hh) {
      const In* xr = x + (t * H + hh) * D;  // [D]
      double* o = out + (t * H + hh) * D;           // [D]
      for (std::int64_t i = 0; i < half; ++i) {
        const double c = f(cos[t * half + i]), s = sign * f(sin[t * half + i]);
        o[i] = f(xr[i]) * c - f(xr[i + half]) * s;
        o[i + half] = f(xr[i + half]) * c + f(xr[i]) * s;
      }
    }
}

// ---- SwiGLU ----

template <class In>
void swiglu_forward(std::int64_t n, const In* gate, const In* up, double* act) {
  for (std::int64_t e = 0; e < n; ++e) act[e] = f(gate[e]) * sigmoid(f(gate[e])) * f(up[e]);
}

template <class In>
void swiglu_backward(std::int64_t n, const In* dact, const In* gate, const In* up, double* dgate, double* dup) {
  for (std::int64_t e = 0; e < n; ++e) {
    const double g = f(gate[e]), sg = sigmoid(g), d = f(dact[e]);
    dup[e] = d * g * sg;
    dgate[e] = d * f(up[e]) * sg * (1 + g * (1 - sg));
  }
}

// ---- the two input types ----
#define ULYSSES_REFERENCE_LAYER(In)                                                                                      \
  template void rmsnorm_forward<In>(std::int64_t, std::int64_t, const In*, const In*, double, double*, double*, bool);  \
  template void rmsnorm_backward<In>(std::int64_t, std::int64_t, const In*, const In*, const In*, double, double*,      \
                                     double*, bool);                                                                    \
  template void rope_apply<In>(std::int64_t, std::int64_t, std::int64_t, const In*, const core::bf16*,                 \
                               const core::bf16*, bool, double*);                                                       \
  template void swiglu_forward<In>(std::int64_t, const In*, const In*, double*);                                        \
  template void swiglu_backward<In>(std::int64_t, const In*, const In*, const In*, double*, double*);
ULYSSES_REFERENCE_LAYER(core::bf16)
ULYSSES_REFERENCE_LAYER(double)
#undef ULYSSES_REFERENCE_LAYER

}  // namespace ulysses::runtime
