#pragma once
// fp64 CPU reference for attention forward and backward in the kernels/attention.hpp layout
// (q, o, dq, dout [B,S,Hq,D]; k, v, dk, dv [B,S,Hkv,D]; lse [B,Hq,S]), plus bf16 helpers and
// error metrics. Plain C++ (no CUDA): used by bench/attn/attn_check.cu and tests/gpu.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

namespace ulysses::attn_ref {

struct Shape {
  std::int64_t B = 1, S = 1, Hq = 1, Hkv = 1, D = 64;
  bool causal = true;
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(D)); }
  std::int64_t q_elems() const { return B * S * Hq * D; }
  std::int64_t kv_elems() const { return B * S * Hkv * D; }
};

inline std::uint16_t to_bf16(float f) {  // round to nearest even (finite inputs)
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// n standard-normal values rounded to bf16: bits for the device, floats for the reference.
inline void random_bf16(std::int64_t n, std::uint64_t seed, std::vector<std::uint16_t>& bits, std::vector<float>& vals) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  bits.resize(static_cast<std::size_t>(n));
  vals.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    bits[i] = to_bf16(dist(gen));
    vals[i] = from_bf16(bits[i]);
  }
}

struct Result {
  std::vector<double> o, lse, dq, dk, dv;
};

// One (b, h) pair: forward row by row, then backward; dk/dv of this q head go to dk_h, dv_h.
inline void reference_head(const Shape& s, std::int64_t b, std::int64_t h, const std::vector<float>& q,
                           const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& dout,
                           Result& r, std::vector<double>& dk_h, std::vector<double>& dv_h) {
  const std::int64_t S = s.S, D = s.D, hk = h / (s.Hq / s.Hkv);
  const double scale = s.scale();
  auto qi = [&](std::int64_t i) { return ((b * S + i) * s.Hq + h) * D; };
  auto ki = [&](std::int64_t j) { return ((b * S + j) * s.Hkv + hk) * D; };
  std::vector<double> p(static_cast<std::size_t>(S)), dp(static_cast<std::size_t>(S));
  dk_h.assign(static_cast<std::size_t>(S * D), 0.0);
  dv_h.assign(static_cast<std::size_t>(S * D), 0.0);
  for (std::int64_t i = 0; i < S; ++i) {
    const std::int64_t jn = s.causal ? i + 1 : S;
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < jn; ++j) {
      double acc = 0;
      for (std::int64_t d = 0; d < D; ++d) acc += static_cast<double>(q[qi(i) + d]) * k[ki(j) + d];
      p[j] = acc * scale;
      mx = std::max(mx, p[j]);
    }
    double l = 0;
    for (std::int64_t j = 0; j < jn; ++j) l += (p[j] = std::exp(p[j] - mx));
    const double lse = mx + std::log(l);
    r.lse[(b * s.Hq + h) * S + i] = lse;
    double* o = &r.o[qi(i)];
    for (std::int64_t d = 0; d < D; ++d) o[d] = 0;
    for (std::int64_t j = 0; j < jn; ++j) {
      p[j] /= l;
      for (std::int64_t d = 0; d < D; ++d) o[d] += p[j] * v[ki(j) + d];
    }
    // backward of row i: dP = dO v^T, delta = sum P dP, dS = P (dP - delta)
    double delta = 0;
    for (std::int64_t j = 0; j < jn; ++j) {
      double acc = 0;
      for (std::int64_t d = 0; d < D; ++d) acc += static_cast<double>(dout[qi(i) + d]) * v[ki(j) + d];
      dp[j] = acc;
      delta += p[j] * acc;
    }
    double* dq = &r.dq[qi(i)];
    for (std::int64_t d = 0; d < D; ++d) dq[d] = 0;
    for (std::int64_t j = 0; j < jn; ++j) {
      const double ds = p[j] * (dp[j] - delta) * scale;
      for (std::int64_t d = 0; d < D; ++d) {
        dq[d] += ds * k[ki(j) + d];
        dk_h[j * D + d] += ds * q[qi(i) + d];
        dv_h[j * D + d] += p[j] * dout[qi(i) + d];
      }
    }
  }
}

inline Result reference(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                        const std::vector<float>& v, const std::vector<float>& dout) {
  Result r;
  r.o.assign(static_cast<std::size_t>(s.q_elems()), 0.0);
  r.dq.assign(r.o.size(), 0.0);
  r.lse.assign(static_cast<std::size_t>(s.B * s.Hq * s.S), 0.0);
  r.dk.assign(static_cast<std::size_t>(s.kv_elems()), 0.0);
  r.dv.assign(r.dk.size(), 0.0);
  const std::int64_t tasks = s.B * s.Hq;
  std::vector<std::vector<double>> dk_h(static_cast<std::size_t>(tasks)), dv_h(static_cast<std::size_t>(tasks));
  const std::int64_t nthreads = std::max<std::int64_t>(1, std::min<std::int64_t>(tasks, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (std::int64_t w = 0; w < nthreads; ++w) {
    pool.emplace_back([&, w] {
      for (std::int64_t task = w; task < tasks; task += nthreads) {
        reference_head(s, task / s.Hq, task % s.Hq, q, k, v, dout, r, dk_h[task], dv_h[task]);
      }
    });
  }
  for (auto& th : pool) th.join();
  for (std::int64_t task = 0; task < tasks; ++task) {  // sum each group's q heads into its kv head
    const std::int64_t b = task / s.Hq, hk = (task % s.Hq) / (s.Hq / s.Hkv);
    for (std::int64_t j = 0; j < s.S; ++j)
      for (std::int64_t d = 0; d < s.D; ++d) {
        const std::int64_t at = ((b * s.S + j) * s.Hkv + hk) * s.D + d;
        r.dk[at] += dk_h[task][j * s.D + d];
        r.dv[at] += dv_h[task][j * s.D + d];
      }
  }
  return r;
}

// max |got - want|; a NaN or inf in got (poison left behind) gives +inf
template <class T, class Conv>
double max_abs_err(const std::vector<T>& got, const std::vector<double>& want, Conv conv) {
  double e = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = conv(got[i]);
    if (!std::isfinite(g)) return std::numeric_limits<double>::infinity();
    e = std::max(e, std::abs(g - want[i]));
  }
  return e;
}

}  // namespace ulysses::attn_ref
