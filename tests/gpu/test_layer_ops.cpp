// The layer's elementwise kernels (kernels/layer_ops.hpp) against the fp64 oracle
// (runtime/reference_layer.hpp) at Llama-like shapes. Tolerance: the kernels compute in fp32 and round
// each output to bf16 once, so |kernel - oracle| <= 2^-8 |oracle| (one bf16 rounding, half an ulp is
// 2^-9) + a small absolute floor for values that cancel. RMSNorm's normalized value is rounded to bf16 inside
// the op (HF's semantics), which the fp64 oracle may round the other way: rstd is checked against fp64, out's
// bits and dw's sums against the kernel's own rounding (runtime::rmsnorm_given_rstd), dw's bits the same
// in a second run.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.hpp"
#include "kernels/layer_ops.hpp"
#include "runtime/reference_layer.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using core::bf16;
using gputest::Dev;

namespace {

std::vector<bf16> random_bf16(std::size_t n, std::uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<bf16> v(n);
  for (auto& x : v) x = core::float_to_bf16(d(g));
  return v;
}

// how many of got (bf16 bits) are off the oracle by more than rel * |want| + abs
std::int64_t wrong(const std::vector<bf16>& got, const std::vector<double>& want, double rel, double abs) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = core::bf16_to_float(got[i]);
    if (!(std::fabs(g - want[i]) <= rel * std::fabs(want[i]) + abs)) ++n;
  }
  return n;
}

const __nv_bfloat16* cb(const Dev<bf16>& d) { return reinterpret_cast<const __nv_bfloat16*>(d.p); }
__nv_bfloat16* b(Dev<bf16>& d) { return reinterpret_cast<__nv_bfloat16*>(d.p); }

}  // namespace

TEST_CASE("layer kernels: RMSNorm forward and backward against the fp64 oracle", "[.gpu][gpu][layer]") {
  const double eps = 1e-5;
  // h % 8 == 0 takes the 16-byte path, 1030 the 4-byte one, 16384 the 4-units-per-thread one; T = 2001
  // gives each block of the backward several rows (uneven ranges) and wraps its ring of rows; the forward
  // runs h = 32, 64, 128 and 256 (head norms) with h / 8 lanes per row, ending mid-block at T = 2001
  for (const std::int64_t h : {4096, 2560, 128, 64, 256, 32, 8192, 1030, 16384}) {
    const std::int64_t T = 2001;
    const auto x = random_bf16(T * h, 1, 2.f), w = random_bf16(h, 2), dout = random_bf16(T * h, 3);
    std::vector<double> out(T * h), rstd(T), dx(T * h), dw(h);
    runtime::rmsnorm_forward(T, h, x.data(), w.data(), eps, out.data(), rstd.data());
    runtime::rmsnorm_backward(T, h, dout.data(), x.data(), w.data(), eps, dx.data(), dw.data());
    Dev<bf16> dx_in(x), dw_in(w), d_out(T * h), d_dout(dout), d_dx(T * h);
    Dev<float> d_rstd(T), d_dw(h);
    const std::size_t ws_bytes = kernels::rmsnorm_bwd_workspace_bytes(T, h);
    INFO("h = " << h << ", workspace " << ws_bytes << " bytes");
    REQUIRE(ws_bytes >= std::size_t(h) * 4);
    Dev<char> ws(static_cast<std::int64_t>(ws_bytes));
    REQUIRE(kernels::rmsnorm_fwd(cb(dx_in), cb(dw_in), b(d_out), d_rstd.p, T, h, float(eps), nullptr) == cudaSuccess);
    REQUIRE(kernels::rmsnorm_bwd(cb(d_dout), cb(dx_in), cb(dw_in), d_rstd.p, b(d_dx), d_dw.p, ws.p, T, h, nullptr) == cudaSuccess);
    CUDA_CHECK(cudaDeviceSynchronize());
    // rstd against fp64; out's bits and dw's sums against the kernel's own rounding of the normalized value
    // (runtime::rmsnorm_given_rstd says why), and out against fp64 within one flipped rounding of n (an ulp
    // of bf16: up to 2^-7 relative) plus the product's (2^-8)
    const auto gr = d_rstd.download();
    std::int64_t bad_rstd = 0;
    for (std::int64_t t = 0; t < T; ++t) bad_rstd += !(std::fabs(gr[t] - rstd[t]) <= 1e-5 * rstd[t]);
    CHECK(bad_rstd == 0);
    std::vector<bf16> out_k(T * h);
    std::vector<double> dw_k(h), dw_abs(h);
    runtime::rmsnorm_given_rstd(T, h, x.data(), w.data(), dout.data(), gr.data(), out_k.data(), dw_k.data(), dw_abs.data());
    const auto gout = d_out.download();
    CHECK(std::memcmp(gout.data(), out_k.data(), gout.size() * sizeof(bf16)) == 0);
    CHECK(wrong(gout, out, 3.0 / 256, 1e-3) == 0);
    const auto gdx = d_dx.download();
    CHECK(wrong(gdx, dx, 1.0 / 128, 1e-3) == 0);
    const auto gw = d_dw.download();
    std::int64_t bad = 0;  // fp32 sums over at most T rows in a fixed order: 1e-5 of the terms' magnitude
    for (std::int64_t j = 0; j < h; ++j) bad += !(std::fabs(gw[j] - dw_k[j]) <= 1e-5 * dw_abs[j] + 1e-6);
    CHECK(bad == 0);
    // a second run over a poisoned dx and dw: the same bits (dw's summation order is fixed)
    d_dx.fill_bytes(0xff), d_dw.fill_bytes(0xff);
    REQUIRE(kernels::rmsnorm_bwd(cb(d_dout), cb(dx_in), cb(dw_in), d_rstd.p, b(d_dx), d_dw.p, ws.p, T, h, nullptr) == cudaSuccess);
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(std::memcmp(d_dw.download().data(), gw.data(), gw.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(d_dx.download().data(), gdx.data(), gdx.size() * sizeof(bf16)) == 0);
  }
}

TEST_CASE("layer kernels: RMSNorm backward on tensors only 4-byte aligned", "[.gpu][gpu][layer]") {
  // h % 8 == 0 but x, dout, dx two elements past an allocation's start: the 4-byte path
  const double eps = 1e-5;
  const std::int64_t T = 1500, h = 4096, off = 2;
  auto x = random_bf16(T * h + off, 1, 2.f), dout = random_bf16(T * h + off, 3);
  const auto w = random_bf16(h, 2);
  std::vector<double> rstd(T), out(T * h), dx(T * h), dw(h);
  runtime::rmsnorm_forward(T, h, x.data() + off, w.data(), eps, out.data(), rstd.data());
  runtime::rmsnorm_backward(T, h, dout.data() + off, x.data() + off, w.data(), eps, dx.data(), dw.data());
  Dev<bf16> d_x(x), d_w(w), d_out(T * h + off), d_dout(dout), d_dx(T * h + off);
  Dev<float> d_rstd(T), d_dw(h);
  Dev<char> ws(static_cast<std::int64_t>(kernels::rmsnorm_bwd_workspace_bytes(T, h)));
  REQUIRE(kernels::rmsnorm_fwd(cb(d_x) + off, cb(d_w), b(d_out) + off, d_rstd.p, T, h, float(eps), nullptr) == cudaSuccess);
  REQUIRE(kernels::rmsnorm_bwd(cb(d_dout) + off, cb(d_x) + off, cb(d_w), d_rstd.p, b(d_dx) + off, d_dw.p, ws.p, T, h, nullptr) ==
          cudaSuccess);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto gdx = d_dx.download();
  CHECK(wrong(std::vector<bf16>(gdx.begin() + off, gdx.end()), dx, 1.0 / 128, 1e-3) == 0);
  const auto gw = d_dw.download();
  const auto gr = d_rstd.download();
  std::vector<bf16> out_k(T * h);
  std::vector<double> dw_k(h), dw_abs(h);
  runtime::rmsnorm_given_rstd(T, h, x.data() + off, w.data(), dout.data() + off, gr.data(), out_k.data(), dw_k.data(), dw_abs.data());
  std::int64_t bad = 0;  // as in the test above: dw's sums against the kernel's own rounding of n
  for (std::int64_t j = 0; j < h; ++j) bad += !(std::fabs(gw[j] - dw_k[j]) <= 1e-5 * dw_abs[j] + 1e-6);
  CHECK(bad == 0);
  for (std::int64_t t = 0; t < T; ++t) CHECK(std::fabs(gr[t] - rstd[t]) <= 1e-5 * rstd[t]);
}

TEST_CASE("layer kernels: RoPE forward and backward against the fp64 oracle", "[.gpu][gpu][layer]") {
  // D % 16 == 0 (128, 64) in 16-byte words, D = 72 in bf16 pairs
  for (const std::int64_t D : {128, 64, 72}) {
    INFO("D = " << D);
    const std::int64_t T = 512, H = 8;
    std::vector<std::int64_t> pos(T);
    for (std::int64_t t = 0; t < T; ++t) pos[t] = 65536 + 97 * t;  // late positions: large angles
    std::vector<bf16> cos, sin;
    runtime::rope_tables(T, D, pos.data(), 500000.0, cos, sin);
    const auto x = random_bf16(T * H * D, 4);
    for (const bool backward : {false, true}) {
      std::vector<double> want(T * H * D);
      runtime::rope_apply(T, H, D, x.data(), cos.data(), sin.data(), backward, want.data());
      Dev<bf16> d_x(x), d_cos(cos), d_sin(sin);
      REQUIRE(kernels::rope(b(d_x), cb(d_cos), cb(d_sin), T, H, D, backward, nullptr) == cudaSuccess);
      CUDA_CHECK(cudaDeviceSynchronize());
      INFO("backward = " << backward);
      CHECK(wrong(d_x.download(), want, 1.0 / 256, 1e-6) == 0);
    }
  }
}

TEST_CASE("layer kernels: SwiGLU and add against the fp64 oracle", "[.gpu][gpu][layer]") {
  // n % 8 == 0 in 16-byte words, n % 8 == 2 in bf16 pairs
  for (const std::int64_t n : {std::int64_t{14336} * 64, std::int64_t{14336} * 64 + 2}) {
    INFO("n = " << n);
    const auto gate = random_bf16(n, 6, 3.f), up = random_bf16(n, 7), dact = random_bf16(n, 8);
    std::vector<double> act(n), dgate(n), dup(n), sum(n);
    runtime::swiglu_forward(n, gate.data(), up.data(), act.data());
    runtime::swiglu_backward(n, dact.data(), gate.data(), up.data(), dgate.data(), dup.data());
    for (std::int64_t e = 0; e < n; ++e) sum[e] = double(core::bf16_to_float(gate[e])) + core::bf16_to_float(up[e]);
    Dev<bf16> d_gate(gate), d_up(up), d_dact(dact), d_act(n), d_dgate(n), d_dup(n), d_sum(n);
    REQUIRE(kernels::swiglu_fwd(cb(d_gate), cb(d_up), b(d_act), n, nullptr) == cudaSuccess);
    REQUIRE(kernels::swiglu_bwd(cb(d_dact), cb(d_gate), cb(d_up), b(d_dgate), b(d_dup), n, nullptr) == cudaSuccess);
    REQUIRE(kernels::add(cb(d_gate), cb(d_up), b(d_sum), n, nullptr) == cudaSuccess);
    CUDA_CHECK(cudaDeviceSynchronize());
    // __expf's error (2 ulp of fp32) is far below bf16's rounding
    CHECK(wrong(d_act.download(), act, 1.0 / 256, 1e-6) == 0);
    CHECK(wrong(d_dgate.download(), dgate, 1.0 / 256, 1e-6) == 0);
    CHECK(wrong(d_dup.download(), dup, 1.0 / 256, 1e-6) == 0);
    CHECK(wrong(d_sum.download(), sum, 1.0 / 256, 0) == 0);
  }
}

TEST_CASE("layer kernels: shapes they do not take are refused", "[.gpu][gpu][layer]") {
  Dev<bf16> a(16), c(16);
  Dev<float> r(4);
  CHECK(kernels::rmsnorm_fwd(cb(a), cb(a), b(c), r.p, 4, 3, 1e-5f, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::rope(b(a), cb(a), cb(a), 2, 1, 7, false, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::swiglu_fwd(cb(a), cb(a), b(c), 15, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::rmsnorm_bwd(cb(a), cb(a), cb(a), r.p, b(c), r.p, r.p, 1, 16384 + 2, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::rmsnorm_bwd(cb(a), cb(a), cb(a), r.p, b(c), r.p, nullptr, 1, 8, nullptr) == cudaErrorInvalidValue);  // no workspace
}
