#include "runtime/reference_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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

template <class T>
void attention_forward(const AttnDims& a, const T* q, const T* k, const T* v, T* o, T* lse) {
  const Strides st(a);
  const std::int64_t G = a.H / a.H_kv, D = a.D, S = a.S;
  const T scale = T(1) / std::sqrt(T(D));
  std::vector<T> s(kRows * S), acc(kRows * D);
  for (std::int64_t b = 0; b < a.B; ++b)
    for (std::int64_t h = 0; h < a.H; ++h) {
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
}

template <class T>
void attention_backward(const AttnDims& a, const T* q, const T* k, const T* v, const T* o, const T* lse,
                        const T* dout, T* dq, T* dk, T* dv) {
  const Strides st(a);
  const std::int64_t G = a.H / a.H_kv, D = a.D, S = a.S;
  const T scale = T(1) / std::sqrt(T(D));
  std::fill_n(dq, a.B * S * a.H * D, T(0));
  std::fill_n(dk, a.B * S * a.H_kv * D, T(0));
  std::fill_n(dv, a.B * S * a.H_kv * D, T(0));
  for (std::int64_t b = 0; b < a.B; ++b)
    for (std::int64_t h = 0; h < a.H; ++h) {
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
}

template void attention_forward<float>(const AttnDims&, const float*, const float*, const float*, float*, float*);
template void attention_forward<double>(const AttnDims&, const double*, const double*, const double*, double*, double*);
template void attention_backward<float>(const AttnDims&, const float*, const float*, const float*, const float*,
                                        const float*, const float*, float*, float*, float*);
template void attention_backward<double>(const AttnDims&, const double*, const double*, const double*, const double*,
                                         const double*, const double*, double*, double*, double*);

}  // namespace ulysses::runtime
