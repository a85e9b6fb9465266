// The loss head's cross-entropy kernel (kernels/loss_ops.hpp cross_entropy_fwd_bwd) against an fp64
// oracle written here: per row loss = logsumexp(x) - x[label] (0 for an ignored label) and the logits
// overwritten by (softmax(x) - onehot(label)) / divisor, in bf16. Both of the kernel's paths: 16-byte
// words (V % 8 == 0 in an aligned chunk: Llama's and Qwen3's vocabularies) and one bf16 at a time (an odd
// V, or a chunk that starts 4 bytes off). Tolerance: the loss is an fp32 sum of V exponentials (__expf:
// 2 ulp each), 2e-5 of it plus 1e-4; a gradient element is one bf16 rounding of an fp32 value, 2^-8 of
// it plus 1e-7 / divisor for the probabilities that underflow differently.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/bf16.hpp"
#include "kernels/loss_ops.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using core::bf16;
using gputest::Dev;

namespace {

struct Case {
  std::int64_t rows, V, offset;  // offset: the chunk's first element after the buffer's start
};

void check_case(const Case& c) {
  INFO("rows " << c.rows << ", V " << c.V << ", offset " << c.offset);
  std::mt19937 gen(static_cast<std::uint32_t>(c.V + c.offset));
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<bf16> x(static_cast<std::size_t>(c.offset + c.rows * c.V));
  for (auto& e : x) e = core::float_to_bf16(d(gen));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(c.rows));
  for (std::int64_t t = 0; t < c.rows; ++t)  // every third ignored; the first and the last class among them
    labels[t] = t % 3 == 2 ? -100 : t % 7 == 0 ? 0 : t % 7 == 1 ? static_cast<std::int32_t>(c.V - 1)
                                                              : static_cast<std::int32_t>(gen() % c.V);
  const double divisor = 37.0;
  Dev<bf16> d_x(x);
  Dev<std::int32_t> d_labels(labels);
  Dev<float> d_loss(c.rows);
  d_loss.fill_bytes(0xff);
  auto* chunk = reinterpret_cast<__nv_bfloat16*>(d_x.p) + c.offset;
  REQUIRE(kernels::cross_entropy_fwd_bwd(chunk, d_labels.p, d_loss.p, c.rows, c.V, float(divisor), nullptr) == cudaSuccess);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto loss = d_loss.download();
  const auto g = d_x.download();
  std::int64_t bad_loss = 0, bad_grad = 0, bad_prefix = 0;
  for (std::int64_t i = 0; i < c.offset; ++i) bad_prefix += g[i] != x[i];
  for (std::int64_t t = 0; t < c.rows; ++t) {
    const bf16* row = x.data() + c.offset + t * c.V;
    const bf16* grow = g.data() + c.offset + t * c.V;
    const std::int32_t label = labels[t];
    if (label < 0) {
      bad_loss += loss[t] != 0.f;
      for (std::int64_t v = 0; v < c.V; ++v) bad_grad += core::bf16_to_float(grow[v]) != 0.f;
      continue;
    }
    double m = -INFINITY, s = 0;
    for (std::int64_t v = 0; v < c.V; ++v) m = std::max(m, double(core::bf16_to_float(row[v])));
    for (std::int64_t v = 0; v < c.V; ++v) s += std::exp(double(core::bf16_to_float(row[v])) - m);
    const double want = m + std::log(s) - double(core::bf16_to_float(row[label]));
    bad_loss += !(std::fabs(loss[t] - want) <= 2e-5 * std::fabs(want) + 1e-4);
    for (std::int64_t v = 0; v < c.V; ++v) {
      const double p = std::exp(double(core::bf16_to_float(row[v])) - m) / s;
      const double wg = (p - (v == label ? 1.0 : 0.0)) / divisor;
      bad_grad += !(std::fabs(core::bf16_to_float(grow[v]) - wg) <= std::fabs(wg) / 256 + 1e-7 / divisor);
    }
  }
  CHECK(bad_prefix == 0);
  CHECK(bad_loss == 0);
  CHECK(bad_grad == 0);
}

}  // namespace

TEST_CASE("loss kernels: cross-entropy against the fp64 oracle, 16-byte words", "[.gpu][gpu][loss]") {
  check_case({24, 128256, 0});  // Llama 3's vocabulary
  check_case({12, 151936, 0});  // Qwen3's
  check_case({40, 1000, 0});    // V / 8 = 125 words: rows shorter than a block's threads
  check_case({1000, 4096, 0});  // more rows than SMs: each block walks several rows (its shared sums reused)
  check_case({300, 2056, 0});   // and V / 8 = 257 words: a last unrolled group only partly in the row
}

TEST_CASE("loss kernels: cross-entropy against the fp64 oracle, one bf16 at a time", "[.gpu][gpu][loss]") {
  check_case({24, 1030, 0});    // V % 8 != 0
  check_case({16, 4096, 2});    // a chunk 2 elements (4 bytes) off 16-byte alignment
  check_case({9, 50257, 0});    // GPT-2's odd vocabulary
}
