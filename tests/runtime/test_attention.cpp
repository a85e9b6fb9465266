// The reference attention: gradients against central finite differences in fp64, and the fp32
// path against the fp64 one; threads; the kernel checks' oracle (random_bf16, attention_reference, max_abs_err).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/reference_attention.hpp"

using namespace ulysses::runtime;

namespace {

std::vector<double> randn(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(0, 1);
  std::vector<double> x(n);
  for (auto& e : x) e = d(g);
  return x;
}

// L = sum(o * w): its gradient wrt o is w, so the backward with dout = w gives dL/dq, dk, dv.
double loss(const AttnDims& a, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
            const std::vector<double>& w) {
  std::vector<double> o(q.size()), lse(a.B * a.H * a.S);
  attention_forward<double>(a, q.data(), k.data(), v.data(), o.data(), lse.data());
  double l = 0;
  for (std::size_t i = 0; i < o.size(); ++i) l += o[i] * w[i];
  return l;
}

}  // namespace

TEST_CASE("attention backward matches finite differences (fp64)", "[runtime]") {
  for (bool causal : {true, false})
    for (std::int64_t H_kv : {4, 2, 1}) {
      const AttnDims a{2, 5, 4, H_kv, 3, causal};
      auto q = randn(a.B * a.S * a.H * a.D, 1), k = randn(a.B * a.S * a.H_kv * a.D, 2),
           v = randn(a.B * a.S * a.H_kv * a.D, 3), w = randn(q.size(), 4);
      std::vector<double> o(q.size()), lse(a.B * a.H * a.S), dq(q.size()), dk(k.size()), dv(v.size());
      attention_forward<double>(a, q.data(), k.data(), v.data(), o.data(), lse.data());
      attention_backward<double>(a, q.data(), k.data(), v.data(), o.data(), lse.data(), w.data(), dq.data(), dk.data(), dv.data());
      const double h = 1e-6;
      double worst = 0;
      auto probe = [&](std::vector<double>& x, const std::vector<double>& grad) {
        for (std::size_t i = 0; i < x.size(); ++i) {
          const double x0 = x[i];
          x[i] = x0 + h;
          const double lp = loss(a, q, k, v, w);
          x[i] = x0 - h;
          const double lm = loss(a, q, k, v, w);
          x[i] = x0;
          worst = std::max(worst, std::abs((lp - lm) / (2 * h) - grad[i]) / (1 + std::abs(grad[i])));
        }
      };
      probe(q, dq);
      probe(k, dk);
      probe(v, dv);
      INFO("causal=" << causal << " H_kv=" << H_kv);
      CHECK(worst < 1e-7);
    }
}

TEST_CASE("causal attention of row 0 is v_0 and lse is a log-sum-exp", "[runtime]") {
  const AttnDims a{1, 4, 1, 1, 2, true};
  const std::vector<double> q = randn(8, 5), k = randn(8, 6), v = randn(8, 7);
  std::vector<double> o(8), lse(4);
  attention_forward<double>(a, q.data(), k.data(), v.data(), o.data(), lse.data());
  CHECK(o[0] == Approx(v[0]).epsilon(1e-14));
  CHECK(o[1] == Approx(v[1]).epsilon(1e-14));
  const double s = 1 / std::sqrt(2.0);
  CHECK(lse[0] == Approx(s * (q[0] * k[0] + q[1] * k[1])).epsilon(1e-14));
}

TEST_CASE("fp32 attention agrees with fp64 to fp32 accuracy", "[runtime]") {
  const AttnDims a{1, 64, 4, 2, 16, true};
  const auto q = randn(a.S * a.H * a.D, 11), k = randn(a.S * a.H_kv * a.D, 12), v = randn(a.S * a.H_kv * a.D, 13),
             w = randn(q.size(), 14);
  auto f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  std::vector<double> o(q.size()), lse(a.H * a.S), dq(q.size()), dk(k.size()), dv(v.size());
  attention_forward<double>(a, q.data(), k.data(), v.data(), o.data(), lse.data());
  attention_backward<double>(a, q.data(), k.data(), v.data(), o.data(), lse.data(), w.data(), dq.data(), dk.data(), dv.data());
  const auto qf = f(q), kf = f(k), vf = f(v), wf = f(w);
  std::vector<float> of(q.size()), lsef(a.H * a.S), dqf(q.size()), dkf(k.size()), dvf(v.size());
  attention_forward<float>(a, qf.data(), kf.data(), vf.data(), of.data(), lsef.data());
  attention_backward<float>(a, qf.data(), kf.data(), vf.data(), of.data(), lsef.data(), wf.data(), dqf.data(), dkf.data(), dvf.data());
  auto maxdiff = [](const std::vector<float>& x, const std::vector<double>& y) {
    double m = 0;
    for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]) / (1 + std::abs(y[i])));
    return m;
  };
  CHECK(maxdiff(of, o) < 1e-5);
  CHECK(maxdiff(dqf, dq) < 1e-4);
  CHECK(maxdiff(dkf, dk) < 1e-4);
  CHECK(maxdiff(dvf, dv) < 1e-4);
}

TEST_CASE("attention on several threads gives the same bits as on one", "[runtime]") {
  for (bool causal : {true, false}) {
    const AttnDims a{2, 37, 8, 2, 16, causal};
    const auto q = randn(a.B * a.S * a.H * a.D, 21), k = randn(a.B * a.S * a.H_kv * a.D, 22),
               v = randn(a.B * a.S * a.H_kv * a.D, 23), w = randn(q.size(), 24);
    std::vector<std::vector<double>> o(2, std::vector<double>(q.size())), lse(2, std::vector<double>(a.B * a.H * a.S)),
        dq(2, std::vector<double>(q.size())), dk(2, std::vector<double>(k.size())), dv(2, std::vector<double>(v.size()));
    for (int t : {0, 1}) {
      const int threads = t == 0 ? 1 : 3;
      attention_forward<double>(a, q.data(), k.data(), v.data(), o[t].data(), lse[t].data(), threads);
      attention_backward<double>(a, q.data(), k.data(), v.data(), o[t].data(), lse[t].data(), w.data(), dq[t].data(),
                                 dk[t].data(), dv[t].data(), threads);
    }
    INFO("causal=" << causal);
    CHECK(o[0] == o[1]);
    CHECK(lse[0] == lse[1]);
    CHECK(dq[0] == dq[1]);
    CHECK(dk[0] == dk[1]);
    CHECK(dv[0] == dv[1]);
  }
}

TEST_CASE("the kernel checks' oracle: seeded bf16 inputs, fp64 results, errors with poison as inf", "[runtime]") {
  const auto x = random_bf16(1000, 5);
  CHECK(x == random_bf16(1000, 5));
  CHECK(x != random_bf16(1000, 6));
  double sum = 0, sq = 0;
  for (auto h : x) sum += ulysses::core::bf16_to_float(h), sq += std::pow(ulysses::core::bf16_to_float(h), 2);
  CHECK(std::abs(sum / 1000) < 0.15);  // N(0, 1): mean 0 +- 3 sigma/sqrt(n), variance 1
  CHECK(sq / 1000 == Approx(1).margin(0.15));

  const AttnDims a{1, 9, 2, 1, 8, true};
  const auto q = random_bf16(a.S * a.H * a.D, 1), k = random_bf16(a.S * a.D, 2), v = random_bf16(a.S * a.D, 3),
             dout = random_bf16(a.S * a.H * a.D, 4);
  const AttnReference r = attention_reference(a, q, k, v, dout);
  auto widen = [](const std::vector<ulysses::core::bf16>& h) {
    std::vector<double> y(h.size());
    for (std::size_t i = 0; i < h.size(); ++i) y[i] = ulysses::core::bf16_to_float(h[i]);
    return y;
  };
  const auto qd = widen(q), kd = widen(k), vd = widen(v), dd = widen(dout);
  std::vector<double> o(qd.size()), lse(a.H * a.S), dq(qd.size()), dk(kd.size()), dv(vd.size());
  attention_forward<double>(a, qd.data(), kd.data(), vd.data(), o.data(), lse.data());
  attention_backward<double>(a, qd.data(), kd.data(), vd.data(), o.data(), lse.data(), dd.data(), dq.data(), dk.data(),
                             dv.data());
  CHECK(r.o == o);  // the unrounded o feeds the backward
  CHECK(r.lse == lse);
  CHECK(r.dq == dq);
  CHECK(r.dk == dk);
  CHECK(r.dv == dv);

  CHECK(max_abs_err(std::vector<float>{1.0f, 2.5f}, {1.0, 2.0}) == 0.5);
  CHECK(max_abs_err(std::vector<float>{1.0f, NAN}, {1.0, 2.0}) == INFINITY);
  CHECK(max_abs_err(std::vector<ulysses::core::bf16>{0x3F80, 0x4000}, {1.0, 1.75}) == 0.25);  // 1.0, 2.0
  CHECK(max_abs_err(std::vector<ulysses::core::bf16>{ulysses::core::kBf16NaN}, {0.0}) == INFINITY);
}
