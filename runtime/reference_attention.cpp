// The fp64 / fp32 reference attention of runtime/reference_attention.hpp, its inputs and its error metric.
#include "runtime/reference_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

namespace ulysses::runtime {

namespace {

// x . y over D elements with 8 independent partial sums (vectorizes without -ffast-math).
template <class T>
T dot(const T* x, const T* y, std::int64_t D) {
  T acc[8] = {};
  std::int64_t d = 0;
  for (; d + 8 <= D; d += 8)
    for (int l = 0; l < 8; ++l) acc[l] += x[d + l] * y[d + l];
  for (; d < D; ++d) acc[0] += x[d] * y[d];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <class T>
void axpy(T a, const T* x, T* y, std::int64_t D) {  // y += a * x
  for (std::int64_t d = 0; d < D; ++d) y[d] += a * x[d];
}

struct Strides {
  std::int64_t q_row, kv_row;  // elements between consecutive positions s of one head
  explicit Strides(const AttnDims& a) : q_row(a.H * a.D), kv_row(a.H_kv * a.D) {}
};

}  // namespace

// Both passes walk the query rows of one head in blocks of kRows, so each key / value row is
// loaded once per block instead of once per row. Per row the arithmetic and its order are those
// of the formulas above (masked keys contribute p = 0).
constexpr std::int64_t kRows = 4;

namespace {

// Runs work(first, stride) on `threads` threads (first = 0 .. threads-1, stride = threads), or
// work(0, 1) on the caller's thread; each call handles tasks first, first + stride, ... < n.
template <class Work>
void spread(std::int64_t n, int threads, const Work& work) {
  const std::int64_t t = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n));
  if (t == 1) return work(0, 1);
  std::vector<std::thread> pool;
  for (std::int64_t w = 0; w < t; ++w) pool.emplace_back([&work, w, t] { work(w, t); });
  for (auto& th : pool) th.join();
}

// Forward of query head h of batch b; s: kRows * S scratch, acc: kRows * D scratch.
template <class T>
void forward_head(const AttnDims& a, const T* q, const T* k, const T* v, T* o, T* lse, std::int64_t b, std::int64_t h,
                  std::vector<T>& s, std::vector<T>& acc) {
  const Strides st(a);
  const std::int64_t G = a.H / a.H_kv, D = a.D, S = a.S;
  const T scale = T(1) / std::sqrt(T(D));
  const std::int64_t g = h / G;
  const T* qh = q + (b * S * a.H + h) * D;       // q[b][0][h][0]
  const T* kh = k + (b * S * a.H_kv + g) * D;    // k[b][0][g][0]
  const T* vh = v + (b * S * a.H_kv + g) * D;
  T* oh = o + (b * S * a.H + h) * D;
  T* lse_h = lse + (b * a.H + h) * S;            // lse[b][h][0]
  for (std::int64_t i0 = 0; i0 < S; i0 += kRows) {
    const std::int64_t rows = std::min(kRows, S - i0);
    const std::int64_t n = a.causal ? i0 + rows : S;  // keys j < n for some row of the block
    auto keys = [&](std::int64_t r) { return a.causal ? i0 + r + 1 : S; };
    T m[kRows], sum[kRows];
    for (std::int64_t r = 0; r < rows; ++r) m[r] = -std::numeric_limits<T>::infinity(), sum[r] = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const T* kj = kh + j * st.kv_row;
      for (std::int64_t r = 0; r < rows; ++r) {
        T& x = s[r * S + j];
        x = j < keys(r) ? scale * dot(qh + (i0 + r) * st.q_row, kj, D) : -std::numeric_limits<T>::infinity();
        m[r] = std::max(m[r], x);
      }
    }
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < keys(r); ++j) sum[r] += (s[r * S + j] = std::exp(s[r * S + j] - m[r]));
    std::fill(acc.begin(), acc.end(), T(0));
    for (std::int64_t j = 0; j < n; ++j) {
      const T* vj = vh + j * st.kv_row;
      for (std::int64_t r = 0; r < rows; ++r)
        if (j < keys(r)) axpy(s[r * S + j], vj, acc.data() + r * D, D);
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      const T inv = T(1) / sum[r];
      for (std::int64_t d = 0; d < D; ++d) oh[(i0 + r) * st.q_row + d] = acc[r * D + d] * inv;
      lse_h[i0 + r] = m[r] + std::log(sum[r]);
    }
  }
}

// Backward of query head h of batch b: its dq rows, and its share of dk, dv of kv head h / G
// (added on top of what the group's lower heads left there).
template <class T>
void backward_head(const AttnDims& a, const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout, T* dq,
                   T* dk, T* dv, std::int64_t b, std::int64_t h) {
  const Strides st(a);
  const std::int64_t G = a.H / a.H_kv, D = a.D, S = a.S;
  const T scale = T(1) / std::sqrt(T(D));
  const std::int64_t g = h / G;
  const std::int64_t qoff = (b * S * a.H + h) * D, kvoff = (b * S * a.H_kv + g) * D;
  const T* lse_h = lse + (b * a.H + h) * S;
  for (std::int64_t i0 = 0; i0 < S; i0 += kRows) {
    const std::int64_t rows = std::min(kRows, S - i0);
    const std::int64_t n = a.causal ? i0 + rows : S;
    const T *qi[kRows], *doi[kRows];
    T* dqi[kRows];
    T dsum[kRows];
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t off = qoff + (i0 + r) * st.q_row;
      qi[r] = q + off, doi[r] = dout + off, dqi[r] = dq + off;
      dsum[r] = dot(doi[r], o + off, D);
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const T* kj = k + kvoff + j * st.kv_row;
      const T* vj = v + kvoff + j * st.kv_row;
      T* dkj = dk + kvoff + j * st.kv_row;
      T* dvj = dv + kvoff + j * st.kv_row;
      for (std::int64_t r = 0; r < rows; ++r) {
        if (a.causal && j > i0 + r) continue;
        const T p = std::exp(scale * dot(qi[r], kj, D) - lse_h[i0 + r]);
        const T ds = p * (dot(doi[r], vj, D) - dsum[r]);
        axpy(scale * ds, kj, dqi[r], D);
        axpy(scale * ds, qi[r], dkj, D);
        axpy(p, doi[r], dvj, D);
      }
    }
  }
}

}  // namespace

template <class T>
void attention_forward(const AttnDims& a, const T* q, const T* k, const T* v, T* o, T* lse, int threads) {
  spread(a.B * a.H, threads, [&](std::int64_t first, std::int64_t stride) {
    std::vector<T> s(kRows * a.S), acc(kRows * a.D);
    for (std::int64_t bh = first; bh < a.B * a.H; bh += stride) forward_head(a, q, k, v, o, lse, bh / a.H, bh % a.H, s, acc);
  });
}

// One task per (b, kv head g): the group's query heads in ascending order, as one thread would.
template <class T>
void attention_backward(const AttnDims& a, const T* q, const T* k, const T* v, const T* o, const T* lse,
                        const T* dout, T* dq, T* dk, T* dv, int threads) {
  std::fill_n(dq, a.B * a.S * a.H * a.D, T(0));
  std::fill_n(dk, a.B * a.S * a.H_kv * a.D, T(0));
  std::fill_n(dv, a.B * a.S * a.H_kv * a.D, T(0));
  const std::int64_t G = a.H / a.H_kv;
  spread(a.B * a.H_kv, threads, [&](std::int64_t first, std::int64_t stride) {
    for (std::int64_t bg = first; bg < a.B * a.H_kv; bg += stride)
      for (std::int64_t h = (bg % a.H_kv) * G; h < (bg % a.H_kv + 1) * G; ++h)
        backward_head(a, q, k, v, o, lse, dout, dq, dk, dv, bg / a.H_kv, h);
  });
}

std::vector<core::bf16> random_bf16(std::int64_t n, std::uint64_t seed, float scale) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<core::bf16> x(static_cast<std::size_t>(n));
  for (auto& e : x) e = core::float_to_bf16(scale * dist(gen));
  return x;
}

AttnReference attention_reference(const AttnDims& a, const std::vector<core::bf16>& q, const std::vector<core::bf16>& k,
                                  const std::vector<core::bf16>& v, const std::vector<core::bf16>& dout) {
  auto widen = [](const std::vector<core::bf16>& x) {
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = core::bf16_to_float(x[i]);
    return y;
  };
  const std::vector<double> qd = widen(q), kd = widen(k), vd = widen(v), dd = widen(dout);
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  AttnReference r;
  r.o.resize(qd.size()), r.dq.resize(qd.size()), r.dk.resize(kd.size()), r.dv.resize(vd.size());
  r.lse.resize(static_cast<std::size_t>(a.B * a.H * a.S));
  attention_forward<double>(a, qd.data(), kd.data(), vd.data(), r.o.data(), r.lse.data(), threads);
  attention_backward<double>(a, qd.data(), kd.data(), vd.data(), r.o.data(), r.lse.data(), dd.data(), r.dq.data(),
                             r.dk.data(), r.dv.data(), threads);
  return r;
}

namespace {
template <class G, class Widen>
double max_abs_err_of(const std::vector<G>& got, const std::vector<double>& want, Widen widen) {
  double e = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = widen(got[i]);
    if (!std::isfinite(g)) return std::numeric_limits<double>::infinity();
    e = std::max(e, std::abs(g - want[i]));
  }
  return e;
}
}  // namespace

double max_abs_err(const std::vector<core::bf16>& got, const std::vector<double>& want) {
  return max_abs_err_of(got, want, [](core::bf16 h) { return static_cast<double>(core::bf16_to_float(h)); });
}
double max_abs_err(const std::vector<float>& got, const std::vector<double>& want) {
  return max_abs_err_of(got, want, [](float x) { return static_cast<double>(x); });
}

template void attention_forward<float>(const AttnDims&, const float*, const float*, const float*, float*, float*, int);
template void attention_forward<double>(const AttnDims&, const double*, const double*, const double*, double*, double*,
                                        int);
template void attention_backward<float>(const AttnDims&, const float*, const float*, const float*, const float*,
                                        const float*, const float*, float*, float*, float*, int);
template void attention_backward<double>(const AttnDims&, const double*, const double*, const double*, const double*,
                                         const double*, const double*, double*, double*, double*, int);

}  // namespace ulysses::runtime
