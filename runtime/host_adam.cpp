// runtime/host_adam.hpp: the state from the parameters, then a step: chunks of every tensor spread over
// the threads; pass 1 sums each chunk's squared gradients (fp64), the norm and coefficient follow from the
// chunks in index order; pass 2 applies AdamW per chunk (kernels/optim_ops.cu's arithmetic, element by
// element) and writes the rounded parameters.
#include "runtime/host_adam.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>

namespace ulysses::runtime {
namespace {

constexpr std::int64_t kChunk = std::int64_t{1} << 16;  // elements per unit of work

struct Chunk {
  std::size_t tensor;
  std::int64_t begin, end;
};

std::vector<Chunk> chunks_of(const std::vector<HostTensor>& ts) {
  std::vector<Chunk> out;
  for (std::size_t i = 0; i < ts.size(); ++i)
    for (std::int64_t b = 0; b < ts[i].n; b += kChunk) out.push_back({i, b, std::min(ts[i].n, b + kChunk)});
  return out;
}

float grad_at(const HostTensor& t, std::int64_t k) {
  return t.grad_fp32 ? static_cast<const float*>(t.grad)[k] : core::bf16_to_float(static_cast<const core::bf16*>(t.grad)[k]);
}

// Runs fn(chunk index) for every chunk over `threads` threads (chunk i on thread i % threads).
template <class Fn>
void parallel_chunks(std::size_t count, int threads, Fn fn) {
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(count)));
  std::vector<std::thread> pool;
  for (int w = 1; w < n; ++w)
    pool.emplace_back([&, w] {
      for (std::size_t i = static_cast<std::size_t>(w); i < count; i += static_cast<std::size_t>(n)) fn(i);
    });
  for (std::size_t i = 0; i < count; i += static_cast<std::size_t>(n)) fn(i);
  for (auto& t : pool) t.join();
}

}  // namespace

HostAdamW::HostAdamW(const std::vector<std::vector<core::bf16>>& params, const AdamConfig& c, int threads)
    : c_(c), threads_(std::max(1, threads)) {
  if (params.empty()) throw std::invalid_argument("HostAdamW: no parameters");
  for (const auto& p : params) {
    std::vector<float> w(p.size());
    for (std::size_t k = 0; k < p.size(); ++k) w[k] = core::bf16_to_float(p[k]);
    master_.push_back(std::move(w));
    m_.emplace_back(p.size(), 0.f);
    v_.emplace_back(p.size(), 0.f);
  }
}

std::int64_t HostAdamW::params() const {
  std::int64_t n = 0;
  for (const auto& w : master_) n += static_cast<std::int64_t>(w.size());
  return n;
}

void HostAdamW::step(const std::vector<HostTensor>& ts) {
  if (ts.size() != master_.size()) throw std::invalid_argument("HostAdamW: a step needs every tensor, in order");
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (ts[i].n != static_cast<std::int64_t>(master_[i].size()) || !ts[i].grad || !ts[i].param)
      throw std::invalid_argument("HostAdamW: a tensor's size or buffers differ from its state");
  ++t_;
  const std::vector<Chunk> chunks = chunks_of(ts);
  // pass 1: the global norm (per chunk in fp64, then the chunks in order) and DeepSpeed's coefficient
  std::vector<double> sq(chunks.size(), 0.0);
  parallel_chunks(chunks.size(), threads_, [&](std::size_t i) {
    const Chunk& ch = chunks[i];
    double s = 0;
    for (std::int64_t k = ch.begin; k < ch.end; ++k) {
      const double g = grad_at(ts[ch.tensor], k);
      s += g * g;
    }
    sq[i] = s;
  });
  double total = 0;
  for (double s : sq) total += s;
  clip_.norm = std::sqrt(total);
  const float norm = static_cast<float>(clip_.norm), max_norm = static_cast<float>(c_.max_grad_norm);
  const float clip = max_norm > 0.f ? (norm + 1e-6f) / max_norm : 0.f;  // kernels/optim_ops.cu clip_kernel
  const float coef = clip > 1.f ? 1.f / clip : 1.f;
  clip_.coef = coef;
  // pass 2: AdamW in fp32 (kernels/optim_ops.cu adamw_one), the bf16 parameters rounded from the master
  const float lr = float(c_.lr), b1 = float(c_.beta1), b2 = float(c_.beta2), eps = float(c_.eps), wd = float(c_.weight_decay);
  const float bc1 = float(1 - std::pow(c_.beta1, double(t_))), bc2 = float(1 - std::pow(c_.beta2, double(t_)));
  parallel_chunks(chunks.size(), threads_, [&](std::size_t i) {
    const Chunk& ch = chunks[i];
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
  });
}

}  // namespace ulysses::runtime
