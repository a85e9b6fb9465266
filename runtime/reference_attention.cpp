#include "runtime/reference_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ulysses::runtime {

double attention_fwd_flops(const AttnDims& a) {
  const double f = 4.0 * a.B * double(a.S) * double(a.S) * a.H * a.D;
  return a.causal ? 0.5 * f : f;
}

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

template <class T>
void attention_forward(const AttnDims& a, const T* q, const T* k, const T* v, T* o, T* lse) {
  const Strides st(a);
  const std::int64_t G = a.H / a.H_kv, D = a.D, S = a.S;
  const T scale = T(1) / std::sqrt(T(D));
  std::vector<T> s(S), acc(D);
  for (std::int64_t b = 0; b < a.B; ++b)
    for (std::int64_t h = 0; h < a.H; ++h) {
      const std::int64_t g = h / G;
      const T* qh = q + (b * S * a.H + h) * D;       // q[b][0][h][0]
      const T* kh = k + (b * S * a.H_kv + g) * D;    // k[b][0][g][0]
      const T* vh = v + (b * S * a.H_kv + g) * D;
      T* oh = o + (b * S * a.H + h) * D;
      T* lse_h = lse + (b * a.H + h) * S;            // lse[b][h][0]
      for (std::int64_t i = 0; i < S; ++i) {
        const std::int64_t n = a.causal ? i + 1 : S;  // keys j < n
        const T* qi = qh + i * st.q_row;
        T m = -std::numeric_limits<T>::infinity();
        for (std::int64_t j = 0; j < n; ++j) {
          s[j] = scale * dot(qi, kh + j * st.kv_row, D);
          m = std::max(m, s[j]);
        }
        T sum = 0;
        for (std::int64_t j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - m));
        std::fill(acc.begin(), acc.end(), T(0));
        for (std::int64_t j = 0; j < n; ++j) axpy(s[j], vh + j * st.kv_row, acc.data(), D);
        const T inv = T(1) / sum;
        for (std::int64_t d = 0; d < D; ++d) oh[i * st.q_row + d] = acc[d] * inv;
        lse_h[i] = m + std::log(sum);
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
      for (std::int64_t i = 0; i < S; ++i) {
        const std::int64_t n = a.causal ? i + 1 : S;
        const T* qi = q + qoff + i * st.q_row;
        const T* doi = dout + qoff + i * st.q_row;
        T* dqi = dq + qoff + i * st.q_row;
        const T dsum = dot(doi, o + qoff + i * st.q_row, D);
        for (std::int64_t j = 0; j < n; ++j) {
          const T* kj = k + kvoff + j * st.kv_row;
          const T* vj = v + kvoff + j * st.kv_row;
          const T p = std::exp(scale * dot(qi, kj, D) - lse_h[i]);
          const T ds = p * (dot(doi, vj, D) - dsum);
          axpy(scale * ds, kj, dqi, D);
          axpy(scale * ds, qi, dk + kvoff + j * st.kv_row, D);
          axpy(p, doi, dv + kvoff + j * st.kv_row, D);
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
