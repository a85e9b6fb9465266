// runtime/host_adam.hpp: the state from the parameters, then a step. Pass 1 sums each chunk's squared
// gradients in fp64 (element by element in index order, kLanes chunks of a tensor side by side on one thread,
// each in its own accumulator); the norm and coefficient follow from the chunks in index order. Pass 2 applies
// AdamW per chunk (kernels/optim_ops.cu's arithmetic, each element's operations in the same order) and writes
// the rounded parameters. The loops are branch-free over restrict pointers, one per gradient type, so the
// compiler vectorizes them; this file builds with -ffp-contract=off and -fno-math-errno (runtime/CMakeLists.txt),
// so every clone (AVX-512, AVX2, the baseline) gives the bits of the scalar arithmetic.
#include "runtime/host_adam.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <thread>

#include <sys/mman.h>

// Copies of the hot loops for wider vector units, chosen once at load time (GCC on x86-64 only; elsewhere the
// one portable build). Without contraction (-ffp-contract=off) the wider units round as the baseline does.
#ifdef ULYSSES_HOST_ADAM_CLONES  // given on the command line (a test of one form)
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define ULYSSES_HOST_ADAM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ULYSSES_HOST_ADAM_CLONES
#endif

namespace ulysses::runtime {
namespace {

constexpr std::int64_t kChunk = std::int64_t{1} << 16;  // elements per unit of work (and per norm partial)
constexpr int kLanes = 8;                               // chunks whose sums of squares run side by side

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

// core/bf16.hpp's conversions without branches (the same bits: exact widening; round to nearest even, a NaN
// quieted with its sign and high payload kept), so that the loops vectorize.
inline float widen(float x) { return x; }
inline float widen(core::bf16 h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }
inline core::bf16 round_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t rne = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16, nan = (u >> 16) | 0x40u;
  return static_cast<core::bf16>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rne);
}

// Pass 1 over kLanes chunks of one tensor (`g[j]`, `n[j]` elements each): s[j] = (((0 + g0^2) + g1^2) + ...)
// in fp64, lane j in index order; lanes whose chunk is shorter than the others finish alone.
template <class G>
inline __attribute__((always_inline)) void sum_squares_lanes(const G* const* g, const std::int64_t* n, double* s) {
  std::int64_t common = n[0];
  for (int j = 1; j < kLanes; ++j) common = std::min(common, n[j]);
  double acc[kLanes] = {};
  for (std::int64_t k = 0; k < common; ++k)
    for (int j = 0; j < kLanes; ++j) {
      const double x = widen(g[j][k]);
      acc[j] += x * x;
    }
  for (int j = 0; j < kLanes; ++j) {
    for (std::int64_t k = common; k < n[j]; ++k) {
      const double x = widen(g[j][k]);
      acc[j] += x * x;
    }
    s[j] = acc[j];
  }
}

ULYSSES_HOST_ADAM_CLONES void sum_squares_bf16(const core::bf16* const* g, const std::int64_t* n, double* s) { sum_squares_lanes(g, n, s); }
ULYSSES_HOST_ADAM_CLONES void sum_squares_fp32(const float* const* g, const std::int64_t* n, double* s) { sum_squares_lanes(g, n, s); }

struct Hyper {
  float coef, lr, b1, b2, eps, wd, bc1, bc2;
};

// Pass 2 over one range: kernels/optim_ops.cu adamw_one on g * coef, the bf16 parameter rounded from the master.
template <class G>
inline __attribute__((always_inline)) void adamw_range(const G* __restrict grad, float* __restrict w, float* __restrict m,
                                                       float* __restrict v, core::bf16* __restrict param, std::int64_t n,
                                                       const Hyper h) {
  for (std::int64_t k = 0; k < n; ++k) {
    const float g = widen(grad[k]) * h.coef;
    const float mk = h.b1 * m[k] + (1.f - h.b1) * g;
    const float vk = h.b2 * v[k] + (1.f - h.b2) * g * g;
    const float denom = std::sqrt(vk / h.bc2) + h.eps;
    const float update = (mk / h.bc1) / denom + h.wd * w[k];
    const float wk = w[k] - h.lr * update;
    m[k] = mk, v[k] = vk, w[k] = wk;
    param[k] = round_bf16(wk);
  }
}

ULYSSES_HOST_ADAM_CLONES void adamw_bf16(const core::bf16* __restrict g, float* __restrict w, float* __restrict m, float* __restrict v,
                                         core::bf16* __restrict p, std::int64_t n, const Hyper h) {
  adamw_range(g, w, m, v, p, n, h);
}
ULYSSES_HOST_ADAM_CLONES void adamw_fp32(const float* __restrict g, float* __restrict w, float* __restrict m, float* __restrict v,
                                         core::bf16* __restrict p, std::int64_t n, const Hyper h) {
  adamw_range(g, w, m, v, p, n, h);
}

// Runs fn(unit index) for every unit over `threads` threads: each takes the next unit not yet taken (dynamic), so a
// thread the host delays holds up one unit, not its share; or unit i on thread i % threads (static). Each unit
// writes only its own outputs, so the result is the same either way.
template <class Fn>
void parallel_units(std::size_t count, int threads, bool dynamic, Fn fn) {
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(count)));
  std::atomic<std::size_t> next{0};
  auto work = [&](int w) {
    if (dynamic)
      for (std::size_t i = next++; i < count; i = next++) fn(i);
    else
      for (std::size_t i = static_cast<std::size_t>(w); i < count; i += static_cast<std::size_t>(n)) fn(i);
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < n; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
}

// n zeros, their memory asked for transparent huge pages before it is first touched (huge_pages: madvise over the
// 2 MiB-aligned part; the kernel's setting may refuse, and the values are the same either way)
std::vector<float> state_buffer(std::size_t n, bool huge_pages) {
  std::vector<float> b;
  b.reserve(n);
#ifdef MADV_HUGEPAGE
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto lo = (reinterpret_cast<std::uintptr_t>(b.data()) + kHuge - 1) & ~(kHuge - 1);
  const auto hi = (reinterpret_cast<std::uintptr_t>(b.data() + n)) & ~(kHuge - 1);
  if (huge_pages && hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)huge_pages;
#endif
  b.resize(n);
  return b;
}

}  // namespace

HostAdamW::HostAdamW(const std::vector<std::vector<core::bf16>>& params, const AdamConfig& c, int threads, HostAdamOptions o)
    : c_(c), threads_(std::max(1, threads)), o_(o) {
  if (params.empty()) throw std::invalid_argument("HostAdamW: no parameters");
  for (const auto& p : params) {
    std::vector<float> w = state_buffer(p.size(), o.huge_pages);
    for (std::size_t k = 0; k < p.size(); ++k) w[k] = core::bf16_to_float(p[k]);
    master_.push_back(std::move(w));
    m_.push_back(state_buffer(p.size(), o.huge_pages));
    v_.push_back(state_buffer(p.size(), o.huge_pages));
  }
}

std::int64_t HostAdamW::params() const {
  std::int64_t n = 0;
  for (const auto& w : master_) n += static_cast<std::int64_t>(w.size());
  return n;
}

void HostAdamW::step(const std::vector<HostTensor>& ts, const SumSquares& global_sum_squares) {
  if (ts.size() != master_.size()) throw std::invalid_argument("HostAdamW: a step needs every tensor, in order");
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (ts[i].n != static_cast<std::int64_t>(master_[i].size()) || !ts[i].grad || !ts[i].param)
      throw std::invalid_argument("HostAdamW: a tensor's size or buffers differ from its state");
  for (const HostTensor& t : ts) {  // the loops read the gradient and write the parameters through restrict pointers
    const auto g = reinterpret_cast<std::uintptr_t>(t.grad), p = reinterpret_cast<std::uintptr_t>(t.param);
    const auto g_bytes = static_cast<std::uintptr_t>(t.n) * (t.grad_fp32 ? 4u : 2u), p_bytes = static_cast<std::uintptr_t>(t.n) * 2u;
    if (t.n > 0 && g < p + p_bytes && p < g + g_bytes) throw std::invalid_argument("HostAdamW: a tensor's gradient and parameters overlap");
  }
  const std::vector<Chunk> chunks = chunks_of(ts);
  // pass 1: the global norm (per chunk in fp64, then the chunks in order) and DeepSpeed's coefficient; a unit
  // is up to kLanes consecutive chunks of one tensor (a short unit repeats its first chunk in the spare lanes)
  std::vector<std::size_t> units;  // index of each unit's first chunk
  for (std::size_t i = 0; i < chunks.size(); ++i)
    if (units.empty() || chunks[i].tensor != chunks[units.back()].tensor || i - units.back() == kLanes) units.push_back(i);
  std::vector<double> sq(chunks.size(), 0.0);
  parallel_units(units.size(), threads_, o_.dynamic_units, [&](std::size_t u) {
    const std::size_t first = units[u], last = u + 1 < units.size() ? units[u + 1] : chunks.size();
    const HostTensor& t = ts[chunks[first].tensor];
    const float* gf[kLanes] = {};  // the lanes' gradients as the tensor's type (one of the two arrays is used)
    const core::bf16* gb[kLanes] = {};
    std::int64_t n[kLanes];
    double s[kLanes];
    for (std::size_t j = 0; j < kLanes; ++j) {
      const Chunk& ch = chunks[first + j < last ? first + j : first];
      if (t.grad_fp32)
        gf[j] = static_cast<const float*>(t.grad) + ch.begin;
      else
        gb[j] = static_cast<const core::bf16*>(t.grad) + ch.begin;
      n[j] = ch.end - ch.begin;
    }
    if (t.grad_fp32)
      sum_squares_fp32(gf, n, s);
    else
      sum_squares_bf16(gb, n, s);
    for (std::size_t j = 0; first + j < last; ++j) sq[first + j] = s[j];
  });
  double total = 0;
  for (double s : sq) total += s;
  if (global_sum_squares) total = global_sum_squares(total);  // ZeRO: every rank's parts (may throw: no step taken)
  ++t_;
  clip_.norm = std::sqrt(total);
  const float norm = static_cast<float>(clip_.norm), max_norm = static_cast<float>(c_.max_grad_norm);
  const float clip = max_norm > 0.f ? (norm + 1e-6f) / max_norm : 0.f;  // kernels/optim_ops.cu clip_kernel
  const float coef = clip > 1.f ? 1.f / clip : 1.f;
  clip_.coef = coef;
  // pass 2: AdamW in fp32 (kernels/optim_ops.cu adamw_one), the bf16 parameters rounded from the master
  const Hyper h{coef,
                float(c_.lr),
                float(c_.beta1),
                float(c_.beta2),
                float(c_.eps),
                float(c_.weight_decay),
                float(1 - std::pow(c_.beta1, double(t_))),
                float(1 - std::pow(c_.beta2, double(t_)))};
  parallel_units(chunks.size(), threads_, o_.dynamic_units, [&](std::size_t i) {
    const Chunk& ch = chunks[i];
    const HostTensor& t = ts[ch.tensor];
    float* w = master_[ch.tensor].data() + ch.begin;
    float* m = m_[ch.tensor].data() + ch.begin;
    float* v = v_[ch.tensor].data() + ch.begin;
    if (t.grad_fp32)
      adamw_fp32(static_cast<const float*>(t.grad) + ch.begin, w, m, v, t.param + ch.begin, ch.end - ch.begin, h);
    else
      adamw_bf16(static_cast<const core::bf16*>(t.grad) + ch.begin, w, m, v, t.param + ch.begin, ch.end - ch.begin, h);
  });
}

}  // namespace ulysses::runtime
