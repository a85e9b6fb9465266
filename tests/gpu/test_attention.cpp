// Attention kernels (kernels/attention.hpp) against the fp64 oracle (runtime/reference_attention.hpp):
// reference and flash kinds, causal and not, MHA and GQA, head dims 64 and 128, S not a tile multiple.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/bf16.hpp"
#include "kernels/attention.hpp"
#include "kernels/testdata.cuh"
#include "runtime/checks.hpp"
#include "runtime/reference_attention.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using gputest::Dev;
using u16 = std::uint16_t;

namespace {

std::vector<u16> gen(std::int64_t n, std::uint32_t t) {
  std::vector<u16> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = core::float_to_bf16(kernels::seeded_value(77, t, static_cast<std::uint64_t>(i)));
  return v;
}
std::vector<double> widen(const std::vector<u16>& x) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = core::bf16_to_float(x[i]);
  return y;
}
std::vector<float> widen_f(const std::vector<u16>& x) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = core::bf16_to_float(x[i]);
  return y;
}

// Returns false when the kernel kind refuses the shape (flash not built yet).
bool check_shape(kernels::AttnKernel kind, std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t H_kv, std::int64_t D,
                 bool causal) {
  INFO(fmt::format("{} B={} S={} H={} H_kv={} D={} causal={}", kind == kernels::AttnKernel::flash ? "flash" : "reference", B, S,
                   H, H_kv, D, causal));
  const auto q = gen(B * S * H * D, 0), k = gen(B * S * H_kv * D, 1), v = gen(B * S * H_kv * D, 2), g = gen(B * S * H * D, 3);
  Dev<u16> dq_(q), dk_(k), dv_(v), dg(g), o(B * S * H * D), gq(B * S * H * D), gk(B * S * H_kv * D), gv(B * S * H_kv * D);
  Dev<float> lse(B * H * S);
  Dev<std::uint8_t> ws(static_cast<std::int64_t>(kernels::attn_bwd_workspace_bytes(kind, B, S, H, H_kv, D)) + 1);
  for (auto* x : {&o, &gq, &gk, &gv}) x->fill_bytes(0xFF);  // poison
  kernels::AttnFwdParams f;
  f.q = reinterpret_cast<const __nv_bfloat16*>(dq_.p), f.k = reinterpret_cast<const __nv_bfloat16*>(dk_.p);
  f.v = reinterpret_cast<const __nv_bfloat16*>(dv_.p), f.o = reinterpret_cast<__nv_bfloat16*>(o.p), f.lse = lse.p;
  f.B = B, f.S = S, f.H = H, f.H_kv = H_kv, f.D = D, f.causal = causal, f.scale = 1.0f / std::sqrt(static_cast<float>(D));
  cudaError_t e = kernels::attn_fwd(kind, f, nullptr);
  if (kind == kernels::AttnKernel::flash && (e == cudaErrorNotSupported || e == cudaErrorInvalidValue)) {
    cudaGetLastError();
    return false;
  }
  REQUIRE(e == cudaSuccess);
  kernels::AttnBwdParams b;
  b.q = f.q, b.k = f.k, b.v = f.v, b.o = f.o, b.lse = f.lse, b.dout = reinterpret_cast<const __nv_bfloat16*>(dg.p);
  b.dq = reinterpret_cast<__nv_bfloat16*>(gq.p), b.dk = reinterpret_cast<__nv_bfloat16*>(gk.p), b.dv = reinterpret_cast<__nv_bfloat16*>(gv.p);
  b.workspace = ws.p;
  b.B = B, b.S = S, b.H = H, b.H_kv = H_kv, b.D = D, b.causal = causal, b.scale = f.scale;
  REQUIRE(kernels::attn_bwd(kind, b, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  const runtime::AttnDims a{B, S, H, H_kv, D, causal};
  const auto qd = widen(q), kd = widen(k), vd = widen(v), gd = widen(g);
  std::vector<double> ro(qd.size()), rl(static_cast<std::size_t>(B * H * S)), rdq(qd.size()), rdk(kd.size()), rdv(vd.size());
  runtime::attention_forward<double>(a, qd.data(), kd.data(), vd.data(), ro.data(), rl.data());
  // backward oracle from the kernel's own (bf16-rounded) o, as a training step would use it:
  // delta = dout . o cancels against dout . v, so the fp64 o would charge o's rounding to dq/dk
  const auto o_gpu = widen(o.download());
  runtime::attention_backward<double>(a, qd.data(), kd.data(), vd.data(), o_gpu.data(), rl.data(), gd.data(), rdq.data(),
                                      rdk.data(), rdv.data());
  for (auto [got, ref, name] : {std::tuple{&o, &ro, "o"}, {&gq, &rdq, "dq"}, {&gk, &rdk, "dk"}, {&gv, &rdv, "dv"}}) {
    const auto gf = widen_f(got->download());
    // The flash kernels, like FlashAttention-2, round P and dS to bf16 before the tensor-core
    // MMAs of the backward, so their gradients carry about twice the reference kernel's error
    // (fp32 P). Their accuracy against PyTorch's own flash backend on the same inputs (<= 2x its
    // error, issue 5) is checked by tests/gpu/test_attention_flash.cpp; here the bound is 2x.
    const bool flash_grad = kind == kernels::AttnKernel::flash && std::string(name) != "o";
    const double tol = flash_grad ? 2 * runtime::kBf16AttentionTol : runtime::kBf16AttentionTol;
    const runtime::Check c = runtime::check_close(name, gf.data(), ref->data(), static_cast<std::int64_t>(gf.size()), tol);
    INFO(fmt::format("{}: #wrong {} of {}, max err {:.3g} (units of the tolerance rule)", name, c.wrong, gf.size(), c.max_abs_err));
    CHECK(c.passed);
  }
  const auto lf = lse.download();
  double worst = 0;
  for (std::size_t i = 0; i < lf.size(); ++i) worst = std::max(worst, std::abs(lf[i] - rl[i]));
  INFO("lse max abs err " << worst);
  CHECK(worst < 1e-3);
  return true;
}

void all_shapes(kernels::AttnKernel kind) {
  int ran = 0, total = 0;
  for (auto [B, S, H, H_kv, D] : {std::tuple<int, int, int, int, int>{1, 100, 2, 2, 64}, {2, 77, 4, 2, 128}, {1, 129, 4, 1, 128},
                                  {1, 256, 8, 2, 64}})
    for (bool causal : {true, false}) {
      ++total;
      ran += check_shape(kind, B, S, H, H_kv, D, causal);
    }
  if (kind == kernels::AttnKernel::flash && ran == 0) WARN("flash kernel not available in this build: skipped");
  else CHECK(ran == total);
}

}  // namespace

TEST_CASE("reference attention equals the fp64 oracle", "[.gpu][gpu][attention]") {
  if (gputest::device_count() < 1) FAIL("no CUDA device");
  all_shapes(kernels::AttnKernel::reference);
}

TEST_CASE("flash attention equals the fp64 oracle", "[.gpu][gpu][attention]") {
  if (gputest::device_count() < 1) FAIL("no CUDA device");
  all_shapes(kernels::AttnKernel::flash);
}
