// The fp64 oracle of the layer's elementwise ops (runtime/reference_layer.hpp): each backward against
// central differences of its forward's formula, RoPE's backward as its forward's transpose, and the
// forwards against HF's definitions at hand-checked points.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/reference_attention.hpp"
#include "runtime/reference_layer.hpp"

using namespace ulysses;
using core::bf16;
using runtime::random_bf16;

namespace {

double f(bf16 v) { return core::bf16_to_float(v); }

// sum_tj dout_tj * F(x)_tj for RMSNorm without the bf16 rounding of the normalized value (autograd
// passes the gradient through .to(bf16) unchanged), x and w given in fp64
double rmsnorm_loss(std::int64_t T, std::int64_t h, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<bf16>& dout, double eps) {
  double L = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (std::int64_t j = 0; j < h; ++j) ss += x[t * h + j] * x[t * h + j];
    const double r = 1 / std::sqrt(ss / double(h) + eps);
    for (std::int64_t j = 0; j < h; ++j) L += f(dout[t * h + j]) * w[j] * x[t * h + j] * r;
  }
  return L;
}

}  // namespace

TEST_CASE("reference layer: RMSNorm's backward is its forward's gradient", "[runtime][layer]") {
  const std::int64_t T = 3, h = 16;
  const double eps = 1e-5;
  const auto x = random_bf16(T * h, 1), w = random_bf16(h, 2), dout = random_bf16(T * h, 3);
  std::vector<double> dx(T * h), dw(h);
  runtime::rmsnorm_backward(T, h, dout.data(), x.data(), w.data(), eps, dx.data(), dw.data());
  std::vector<double> xd(T * h), wd(h);
  for (std::int64_t i = 0; i < T * h; ++i) xd[i] = f(x[i]);
  for (std::int64_t j = 0; j < h; ++j) wd[j] = f(w[j]);
  const double step = 1e-6;
  for (std::int64_t i = 0; i < T * h; ++i) {
    auto p = xd, m = xd;
    p[i] += step, m[i] -= step;
    const double num = (rmsnorm_loss(T, h, p, wd, dout, eps) - rmsnorm_loss(T, h, m, wd, dout, eps)) / (2 * step);
    INFO("dx[" << i << "]");
    CHECK(dx[i] == Approx(num).margin(1e-6).epsilon(1e-6));
  }
  // dw against the rounded normalized value the forward multiplies (bf16(n)): w's own derivative
  std::vector<double> out(T * h), rstd(T);
  runtime::rmsnorm_forward(T, h, x.data(), w.data(), eps, out.data(), rstd.data());
  for (std::int64_t j = 0; j < h; ++j) {
    double s = 0;
    for (std::int64_t t = 0; t < T; ++t) s += f(dout[t * h + j]) * out[t * h + j] / wd[j];
    CHECK(dw[j] == Approx(s).epsilon(1e-12));
  }
}

TEST_CASE("reference layer: RMSNorm's forward at a hand-checked row", "[runtime][layer]") {
  // x = (3, 4): mean square 12.5, rstd = 1/sqrt(12.5); w = (1, 2)
  const std::vector<bf16> x = {core::float_to_bf16(3.f), core::float_to_bf16(4.f)};
  const std::vector<bf16> w = {core::float_to_bf16(1.f), core::float_to_bf16(2.f)};
  double out[2], rstd[1];
  runtime::rmsnorm_forward(1, 2, x.data(), w.data(), 0.0, out, rstd);
  CHECK(rstd[0] == Approx(1 / std::sqrt(12.5)));
  CHECK(out[0] == Approx(3 / std::sqrt(12.5)).epsilon(1e-2));
  CHECK(out[1] == Approx(2 * 4 / std::sqrt(12.5)).epsilon(1e-2));
}

TEST_CASE("reference layer: RoPE's backward is its forward's transpose, and rotates by the position", "[runtime][layer]") {
  const std::int64_t T = 4, H = 3, D = 8;
  const std::vector<std::int64_t> pos = {0, 1, 7, 1000};
  std::vector<bf16> cos, sin;
  runtime::rope_tables(T, D, pos.data(), 10000.0, cos, sin);
  // position 0: the identity
  CHECK(f(cos[0]) == 1.0);
  CHECK(f(sin[0]) == 0.0);
  const auto x = random_bf16(T * H * D, 4), y = random_bf16(T * H * D, 5);
  std::vector<double> rx(T * H * D), ty(T * H * D);
  runtime::rope_apply(T, H, D, x.data(), cos.data(), sin.data(), false, rx.data());
  runtime::rope_apply(T, H, D, y.data(), cos.data(), sin.data(), true, ty.data());
  double a = 0, b = 0;
  for (std::int64_t e = 0; e < T * H * D; ++e) a += rx[e] * f(y[e]), b += f(x[e]) * ty[e];
  CHECK(a == Approx(b).epsilon(1e-12));  // <R x, y> = <x, R^T y>
  for (std::int64_t e = 0; e < H * D; ++e) CHECK(rx[e] == f(x[e]));  // the first token sits at position 0
  // position 1, pair 0: angle 1 rad, rotate_half pairs element 0 with element D/2
  const double c = f(cos[1 * D / 2]), s = f(sin[1 * D / 2]);
  CHECK(c == Approx(std::cos(1.0)).epsilon(4e-3));
  CHECK(s == Approx(std::sin(1.0)).epsilon(4e-3));
  const std::int64_t r = 1 * H * D;  // token 1, head 0
  CHECK(rx[r] == Approx(f(x[r]) * c - f(x[r + D / 2]) * s));
  CHECK(rx[r + D / 2] == Approx(f(x[r + D / 2]) * c + f(x[r]) * s));
}

TEST_CASE("reference layer: SwiGLU's backward is its forward's gradient", "[runtime][layer]") {
  const std::int64_t n = 64;
  const auto gate = random_bf16(n, 6, 3.f), up = random_bf16(n, 7), dact = random_bf16(n, 8);
  std::vector<double> act(n), dgate(n), dup(n);
  runtime::swiglu_forward(n, gate.data(), up.data(), act.data());
  runtime::swiglu_backward(n, dact.data(), gate.data(), up.data(), dgate.data(), dup.data());
  const auto F = [](double g, double u) { return g / (1 + std::exp(-g)) * u; };
  const double step = 1e-6;
  for (std::int64_t e = 0; e < n; ++e) {
    const double g = f(gate[e]), u = f(up[e]), d = f(dact[e]);
    CHECK(act[e] == Approx(F(g, u)).epsilon(1e-14));
    CHECK(dgate[e] == Approx(d * (F(g + step, u) - F(g - step, u)) / (2 * step)).margin(1e-7).epsilon(1e-6));
    CHECK(dup[e] == Approx(d * (F(g, u + step) - F(g, u - step)) / (2 * step)).margin(1e-7).epsilon(1e-6));
  }
}
