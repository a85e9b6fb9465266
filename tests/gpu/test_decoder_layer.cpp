// One decoder layer on the GPU (runtime/cuda/decoder_layer.hpp) against its fp64 oracle
// (runtime/reference_decoder_layer.hpp) at a small Llama-like shape (GQA 4/2, D = 128): the output,
// the input's gradient and every parameter's gradient. The GPU keeps every intermediate in bf16
// (2^-9 relative rounding each, about ten in a row from input to gradient), the oracle none, so the
// comparison is the relative L2 error of each tensor: <= 1 % for y, <= 3 % for the gradients; and a
// swapped pair (dWg against the oracle's dWu) must be far off, so the tolerance can fail.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/bf16.hpp"
#include "runtime/cuda/decoder_layer.hpp"
#include "runtime/reference_layer.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using gputest::rel_l2;
using core::bf16;
using gputest::Dev;

namespace {

std::vector<bf16> random_bf16(std::size_t n, std::uint32_t seed, double scale) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0.0, scale);
  std::vector<bf16> v(n);
  for (auto& x : v) x = core::float_to_bf16(static_cast<float>(d(g)));
  return v;
}

std::vector<double> widen(const std::vector<bf16>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = core::bf16_to_float(v[i]);
  return out;
}
__nv_bfloat16* b16(Dev<bf16>& d) { return reinterpret_cast<__nv_bfloat16*>(d.p); }

}  // namespace

TEST_CASE("decoder layer on the GPU equals its fp64 oracle", "[.gpu][gpu][layer]") {
  runtime::DecoderLayerDims d;
  d.T = 512, d.h = 512, d.H = 4, d.H_kv = 2, d.D = 128, d.F = 1024;
  const std::int64_t T = d.T, h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  runtime::DecoderLayerParams<std::vector<bf16>> p;
  const double sh = 1 / std::sqrt(double(h)), shd = 1 / std::sqrt(double(HD)), sf = 1 / std::sqrt(double(F));
  p.w1 = random_bf16(h, 1, 0.2), p.w2 = random_bf16(h, 2, 0.2);
  for (auto& v : p.w1) v = core::float_to_bf16(1.f + core::bf16_to_float(v));
  for (auto& v : p.w2) v = core::float_to_bf16(1.f + core::bf16_to_float(v));
  p.wq = random_bf16(HD * h, 3, sh), p.wk = random_bf16(KD * h, 4, sh), p.wv = random_bf16(KD * h, 5, sh);
  p.wo = random_bf16(h * HD, 6, shd), p.wg = random_bf16(F * h, 7, sh), p.wu = random_bf16(F * h, 8, sh);
  p.wd = random_bf16(h * F, 9, sf);
  std::vector<std::int64_t> pos(T);
  for (std::int64_t t = 0; t < T; ++t) pos[t] = t;
  std::vector<bf16> cos, sin;
  runtime::rope_tables(T, d.D, pos.data(), 500000.0, cos, sin);
  const auto x = random_bf16(T * h, 10, 1.0), dy = random_bf16(T * h, 11, 1.0);
  const runtime::DecoderLayerResult ref = runtime::decoder_layer_reference(d, p, widen(x), widen(dy), cos, sin);

  runtime::cuda::Gemm gemm;
  runtime::cuda::DecoderLayer layer(d, p, cos, sin, gemm);
  Dev<bf16> dx_in(x), ddy(dy), y(T * h), dx(T * h);
  layer.forward(b16(dx_in), b16(y), nullptr);
  layer.backward(b16(dx_in), b16(ddy), b16(dx), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto g = layer.grads();
  const double e_y = rel_l2(widen(y.download()), ref.y), e_dx = rel_l2(widen(dx.download()), ref.dx);
  std::printf("decoder layer T=%lld h=%lld H=%lld/%lld D=%lld F=%lld: relative L2 error y %.2e dx %.2e\n", (long long)T,
              (long long)h, (long long)d.H, (long long)d.H_kv, (long long)d.D, (long long)F, e_y, e_dx);
  CHECK(e_y <= 1e-2);
  CHECK(e_dx <= 3e-2);
  const std::pair<const char*, std::pair<const std::vector<double>*, const std::vector<double>*>> each[] = {
      {"w1", {&g.w1, &ref.dparams.w1}}, {"wq", {&g.wq, &ref.dparams.wq}}, {"wk", {&g.wk, &ref.dparams.wk}},
      {"wv", {&g.wv, &ref.dparams.wv}}, {"wo", {&g.wo, &ref.dparams.wo}}, {"w2", {&g.w2, &ref.dparams.w2}},
      {"wg", {&g.wg, &ref.dparams.wg}}, {"wu", {&g.wu, &ref.dparams.wu}}, {"wd", {&g.wd, &ref.dparams.wd}}};
  for (const auto& [name, pr] : each) {
    const double e = rel_l2(*pr.first, *pr.second);
    std::printf("  d%s relative L2 error %.2e\n", name, e);
    INFO("d" << name);
    CHECK(e <= 3e-2);
  }
  CHECK(rel_l2(g.wg, ref.dparams.wu) > 0.5);  // the comparison can tell two gradients apart
}
