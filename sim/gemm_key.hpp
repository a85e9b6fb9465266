#pragma once
// Our runtime's GEMMs as the calibration keys them (calibrated.ulysses_gemm_eff, docs/INPUTS.md): one curve of
// efficiency (fraction of the bf16 dense peak) over M, the tokens of the call, per pass and weight shape.
// A layer's GEMM is Y[M, N] = X[M, K] W[N, K]^T (forward); its backward runs dX[M, K] = dY[M, N] W[N, K]
// (dgrad) and dW[N, K] = dY^T X (wgrad, M the reduction; wgrad_acc: added to dW, beta = 1, what every shard
// after the first of TiledMLP and tiled logits runs); every pass is 2 M N K FLOPs (runtime/cuda/gemm.hpp
// forward / input_grad / weight_grad). Key: "<fwd|dgrad|wgrad|wgrad_acc>.<N>x<K>", N and K those of the
// forward, e.g. "fwd.4096x4096" (Llama-3.1-8B's q projection).
#include <array>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ulysses {

enum class GemmPass { fwd, dgrad, wgrad, wgrad_acc };
inline constexpr std::array<std::string_view, 4> kGemmPassNames = {"fwd", "dgrad", "wgrad", "wgrad_acc"};

namespace gemm_key_detail {
inline char* copy_chars(char* out, std::string_view s) {
  for (char c : s) *out++ = c;
  return out;
}
}  // namespace gemm_key_detail

// The key written into buf (no allocation: the model's hot path looks curves up with it).
struct GemmKeyBuf {
  char buf[64];
  std::size_t n = 0;
  std::string_view view() const { return {buf, n}; }
};
inline GemmKeyBuf gemm_key_buf(GemmPass p, std::int64_t N, std::int64_t K) {
  GemmKeyBuf k;
  const std::string_view pass = kGemmPassNames[static_cast<std::size_t>(p)];
  char* out = gemm_key_detail::copy_chars(k.buf, pass);
  *out++ = '.';
  out = std::to_chars(out, k.buf + sizeof k.buf, N).ptr;
  *out++ = 'x';
  out = std::to_chars(out, k.buf + sizeof k.buf, K).ptr;
  k.n = static_cast<std::size_t>(out - k.buf);
  return k;
}
inline std::string gemm_curve_key(GemmPass p, std::int64_t N, std::int64_t K) { return std::string(gemm_key_buf(p, N, K).view()); }

// false when `key` is not "<pass>.<N>x<K>" with N, K >= 1 written as gemm_curve_key writes them (no leading
// zeros or signs: a key the model would never look up)
inline bool parse_gemm_curve_key(std::string_view key, GemmPass& p, std::int64_t& N, std::int64_t& K) {
  const auto dot = key.find('.'), x = key.find('x', dot == std::string_view::npos ? 0 : dot);
  if (dot == std::string_view::npos || x == std::string_view::npos) return false;
  bool known = false;
  for (std::size_t i = 0; i < kGemmPassNames.size(); ++i)
    if (key.substr(0, dot) == kGemmPassNames[i]) p = static_cast<GemmPass>(i), known = true;
  const auto num = [](std::string_view s, std::int64_t& v) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size() && v >= 1;
  };
  return known && num(key.substr(dot + 1, x - dot - 1), N) && num(key.substr(x + 1), K) && gemm_key_buf(p, N, K).view() == key;
}

// The weight shapes of one decoder layer and the loss head, as our runtime runs them (runtime/cuda/
// decoder_layer.cpp: q, then k and v as two calls of one shape; gate and up two calls of one shape).
struct GemmShape {
  std::string_view role;  // q | kv | o | gate_up | down | logits
  std::int64_t N, K;
};
enum GemmRole { kGemmQ, kGemmKv, kGemmO, kGemmGateUp, kGemmDown, kGemmLogits };
inline std::array<GemmShape, 6> layer_gemm_shapes(std::int64_t h, std::int64_t H, std::int64_t H_kv, std::int64_t D,
                                                  std::int64_t F, std::int64_t V) {
  return {{{"q", H * D, h}, {"kv", H_kv * D, h}, {"o", h, H * D}, {"gate_up", F, h}, {"down", h, F}, {"logits", V, h}}};
}

}  // namespace ulysses
