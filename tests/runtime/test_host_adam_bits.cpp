// The vectorized host optimizer (runtime/host_adam.cpp) against its element-by-element form before issue 13
// (kept here as the reference, arithmetic unchanged): the same bits of master weights, m, v, the bf16
// parameters, the norm and the coefficient over three steps, for tensors of odd sizes with bf16 and fp32
// gradients, clipping active and off, a non-finite gradient, on 1 to 17 threads. This file builds with
// -ffp-contract=off (tests/CMakeLists.txt), as the previous implementation did on the baseline x86-64.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/host_adam.hpp"

using namespace ulysses;
using runtime::AdamConfig;
using runtime::HostTensor;

namespace {

// The previous runtime/host_adam.cpp step, chunks run one after another (each chunk's result never depended
// on the thread that ran it).
struct OldHostAdamW {
  static constexpr std::int64_t kChunk = std::int64_t{1} << 16;
  AdamConfig c_;
  std::vector<std::vector<float>> master_, m_, v_;
  std::int64_t t_ = 0;
  runtime::ClipResult clip_;

  OldHostAdamW(const std::vector<std::vector<core::bf16>>& params, const AdamConfig& c) : c_(c) {
    for (const auto& p : params) {
      std::vector<float> w(p.size());
      for (std::size_t k = 0; k < p.size(); ++k) w[k] = core::bf16_to_float(p[k]);
      master_.push_back(std::move(w));
      m_.emplace_back(p.size(), 0.f);
      v_.emplace_back(p.size(), 0.f);
    }
  }
  static float grad_at(const HostTensor& t, std::int64_t k) {
    return t.grad_fp32 ? static_cast<const float*>(t.grad)[k] : core::bf16_to_float(static_cast<const core::bf16*>(t.grad)[k]);
  }
  void step(const std::vector<HostTensor>& ts) {
    ++t_;
    struct Chunk {
      std::size_t tensor;
      std::int64_t begin, end;
    };
    std::vector<Chunk> chunks;
    for (std::size_t i = 0; i < ts.size(); ++i)
      for (std::int64_t b = 0; b < ts[i].n; b += kChunk) chunks.push_back({i, b, std::min(ts[i].n, b + kChunk)});
    std::vector<double> sq(chunks.size(), 0.0);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      const Chunk& ch = chunks[i];
      double s = 0;
      for (std::int64_t k = ch.begin; k < ch.end; ++k) {
        const double g = grad_at(ts[ch.tensor], k);
        s += g * g;
      }
      sq[i] = s;
    }
    double total = 0;
    for (double s : sq) total += s;
    clip_.norm = std::sqrt(total);
    const float norm = static_cast<float>(clip_.norm), max_norm = static_cast<float>(c_.max_grad_norm);
    const float clip = max_norm > 0.f ? (norm + 1e-6f) / max_norm : 0.f;
    const float coef = clip > 1.f ? 1.f / clip : 1.f;
    clip_.coef = coef;
    const float lr = float(c_.lr), b1 = float(c_.beta1), b2 = float(c_.beta2), eps = float(c_.eps), wd = float(c_.weight_decay);
    const float bc1 = float(1 - std::pow(c_.beta1, double(t_))), bc2 = float(1 - std::pow(c_.beta2, double(t_)));
    for (const Chunk& ch : chunks) {
      const HostTensor& t = ts[ch.tensor];
      float* w = master_[ch.tensor].data();
      float* m = m_[ch.tensor].data();
      float* v = v_[ch.tensor].data();
      for (std::int64_t k = ch.begin; k < ch.end; ++k) {
        const float g = grad_at(t, k) * coef;
        m[k] = b1 * m[k] + (1.f - b1) * g;
        v[k] = b2 * v[k] + (1.f - b2) * g * g;
        const float denom = std::sqrt(v[k] / bc2) + eps;
        const float update = (m[k] / bc1) / denom + wd * w[k];
        w[k] = w[k] - lr * update;
        t.param[k] = core::float_to_bf16(w[k]);
      }
    }
  }
};

// sizes: below a vector, around a chunk (65536), a full unit of 8 chunks plus a tail, one unit short of full
const std::vector<std::int64_t> kSizes = {1, 7, 65535, 65537, 8 * 65536 + 3, 13, 3 * 65536 + 5, 4099};
bool fp32_grad(std::size_t i) { return i % 3 == 1; }

struct Grads {
  std::vector<std::vector<core::bf16>> b;
  std::vector<std::vector<float>> f;
};

// Gradients of step t: normal values at several scales, with bf16/fp32 subnormals, zeros and signs mixed in;
// `poison` puts an infinity in tensor 4 and a NaN in tensor 5.
Grads make_grads(std::uint64_t seed, bool poison) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  Grads g;
  for (std::size_t i = 0; i < kSizes.size(); ++i) {
    const float scale = std::pow(10.f, -1.f - float(i % 4));
    std::vector<float> x(static_cast<std::size_t>(kSizes[i]));
    for (std::size_t k = 0; k < x.size(); ++k) {
      x[k] = scale * n(rng);
      if (k % 997 == 5) x[k] = 1e-40f * n(rng);  // subnormal
      if (k % 1009 == 3) x[k] = (k % 2 ? -0.f : 0.f);
    }
    if (poison && i == 4) x[x.size() / 2] = std::numeric_limits<float>::infinity();
    if (poison && i == 5) x[x.size() - 1] = std::numeric_limits<float>::quiet_NaN();
    std::vector<core::bf16> b(x.size());
    for (std::size_t k = 0; k < x.size(); ++k) b[k] = core::float_to_bf16(x[k]);
    g.b.push_back(std::move(b));
    g.f.push_back(std::move(x));
  }
  return g;
}

std::vector<HostTensor> tensors(const Grads& g, std::vector<std::vector<core::bf16>>& out) {
  std::vector<HostTensor> ts;
  for (std::size_t i = 0; i < kSizes.size(); ++i)
    ts.push_back({fp32_grad(i) ? static_cast<const void*>(g.f[i].data()) : static_cast<const void*>(g.b[i].data()), fp32_grad(i),
                  out[i].data(), kSizes[i]});
  return ts;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("host AdamW gives the bits of its element-by-element form: odd sizes, bf16 and fp32 gradients, clipped or not, 1-17 threads",
          "[runtime][adam][host_adam]") {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<std::vector<core::bf16>> params;
  for (std::int64_t s : kSizes) {
    std::vector<core::bf16> p(static_cast<std::size_t>(s));
    for (auto& x : p) x = core::float_to_bf16(0.02f * n(rng));
    params.push_back(p);
  }
  const double max_norm = GENERATE(1e-3, 0.0, 1e6);  // clipping active; off; on but not reached
  const bool poison = GENERATE(false, true);
  const int threads = GENERATE(1, 2, 3, 8, 17);
  const bool dynamic = GENERATE(true, false);  // HostAdamOptions: who runs which chunk changes no bit
  AdamConfig cfg;
  cfg.lr = 1e-3, cfg.weight_decay = 0.01, cfg.max_grad_norm = max_norm;
  INFO("max_grad_norm " << max_norm << ", non-finite gradient " << poison << ", threads " << threads << ", dynamic " << dynamic);
  runtime::HostAdamW now(params, cfg, threads, runtime::HostAdamOptions{dynamic, true});
  OldHostAdamW old(params, cfg);
  std::vector<std::vector<core::bf16>> out_now = params, out_old = params;
  for (int t = 1; t <= 3; ++t) {
    const Grads g = make_grads(100 + std::uint64_t(t), poison && t == 2);
    now.step(tensors(g, out_now));
    old.step(tensors(g, out_old));
    INFO("step " << t);
    CHECK(same_bits(now.last_clip().norm, old.clip_.norm));
    CHECK(same_bits(now.last_clip().coef, old.clip_.coef));
    if (!poison) CHECK(std::isfinite(now.last_clip().norm));
    if (max_norm == 1e-3 && !poison) CHECK(now.last_clip().coef < 0.5f);  // clipping is active
    if (max_norm != 1e-3) CHECK(now.last_clip().coef == 1.f);
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      INFO("tensor " << i << " of " << kSizes[i] << (fp32_grad(i) ? " (fp32 gradients)" : " (bf16 gradients)"));
      CHECK(same_bits(now.master(i), old.master_[i]));
      CHECK(same_bits(now.m(i), old.m_[i]));
      CHECK(same_bits(now.v(i), old.v_[i]));
      CHECK(same_bits(out_now[i], out_old[i]));
    }
  }
  if (poison) {  // the non-finite gradients went through both forms: NaN where they were, in the same bits
    const auto nan_f = [](float x) { return std::isnan(x); };
    const auto nan_b = [](core::bf16 x) { return std::isnan(core::bf16_to_float(x)); };
    CHECK(std::any_of(now.master(4).begin(), now.master(4).end(), nan_f));
    CHECK(std::any_of(out_now[5].begin(), out_now[5].end(), nan_b));
  }
}

TEST_CASE("host AdamW's schedules and page sizes give the same bits on a tensor of huge pages", "[runtime][adam][host_adam]") {
  // 2^21 floats per state buffer (8 MiB: the madvise branch covers whole 2 MiB pages of it) and a small tensor
  // after it; dynamic or static units, huge pages asked for or not, 1, 4 and 7 threads: two steps, every bit equal
  // to the first variant's
  std::mt19937_64 rng(5);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<std::vector<core::bf16>> params(2);
  params[0].resize(std::size_t{1} << 21), params[1].resize(1000);
  for (auto& p : params)
    for (auto& x : p) x = core::float_to_bf16(0.02f * n(rng));
  std::vector<std::vector<core::bf16>> grads = params;
  for (auto& g : grads)
    for (auto& x : g) x = core::float_to_bf16(1e-3f * n(rng));
  AdamConfig cfg;
  cfg.lr = 1e-3, cfg.max_grad_norm = 1e-2;  // clipping active
  struct Variant { bool dynamic, huge; int threads; };
  const std::vector<Variant> variants = {{true, true, 4}, {false, false, 1}, {true, false, 7}, {false, true, 4}, {true, true, 1}};
  std::vector<std::vector<std::vector<core::bf16>>> outs;
  std::vector<std::vector<float>> masters, ms, vs;
  for (const Variant& v : variants) {
    runtime::HostAdamW opt(params, cfg, v.threads, runtime::HostAdamOptions{v.dynamic, v.huge});
    std::vector<std::vector<core::bf16>> out = params;
    for (int t = 0; t < 2; ++t)
      opt.step({{grads[0].data(), false, out[0].data(), std::int64_t{1} << 21}, {grads[1].data(), false, out[1].data(), 1000}});
    CHECK(opt.last_clip().coef < 1.f);
    outs.push_back(out);
    masters.push_back(opt.master(0)), ms.push_back(opt.m(0)), vs.push_back(opt.v(1));
  }
  for (std::size_t k = 1; k < variants.size(); ++k) {
    INFO("variant " << k << ": dynamic " << variants[k].dynamic << ", huge pages " << variants[k].huge << ", threads " << variants[k].threads);
    CHECK(same_bits(outs[k][0], outs[0][0]));
    CHECK(same_bits(outs[k][1], outs[0][1]));
    CHECK(same_bits(masters[k], masters[0]));
    CHECK(same_bits(ms[k], ms[0]));
    CHECK(same_bits(vs[k], vs[0]));
  }
  CHECK_FALSE(same_bits(outs[0][0], params[0]));  // the steps changed the parameters
}
