// The sequence-parallel step (sp = P > 1, runtime/cuda/step_runner.hpp) on P logical ranks of one GPU
// (runtime/cuda/loopback_ranks.hpp: one host thread, stream, arena and Gemm per rank) against the same
// step on one rank and against the fp64 oracle: each rank holds S / P tokens, its labels shifted over the
// whole sequence, the loss divided by every rank's valid tokens; the step's gradients are the sum of the
// ranks' (ZeRO-3's reduce-scatter is not built yet: summed here on the host). Tolerances as the one-rank
// test's (tests/gpu/test_step_runner.cpp): loss within 0.5 %, each gradient's relative L2 error within 5 %
// of fp64, and within 5 % of the one-rank GPU step. Each rank's arena peak equals the mirror
// (sim/step_runtime_memory.hpp) at sp = P byte for byte. P = 2 splits the kv heads, P = 4 replicates them
// (H_kv = 2 < P: the kv gradients summed over replicas in the exchange).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/layout.hpp"
#include "runtime/cuda/loopback_ranks.hpp"
#include "runtime/cuda/step_runner.hpp"
#include "runtime/reference_layer.hpp"
#include "sim/step_runtime_memory.hpp"
#include "tests/gpu/gpu_util.hpp"
#include "tests/gpu/step_arena.hpp"

using namespace ulysses;

namespace {

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  return std::sqrt(num / den);
}

template <class T>
std::vector<T> rows(const std::vector<T>& x, std::int64_t row, std::int64_t n, std::int64_t width) {
  return std::vector<T>(x.begin() + row * width, x.begin() + (row + n) * width);
}

struct Case {
  int P = 2;
  bool checkpoint = true, qk_norm = false, tied = false;
  std::int64_t shards = 1, H = 4;
};

struct RankOut {
  runtime::StepResult g;
  std::int64_t peak = 0, expected_peak = 0;
};

void check_sp(const Case& k) {
  runtime::StepDims d;  // the whole sequence; each rank's runner holds T / P of it
  d.layer.T = 512, d.layer.h = 512, d.layer.H = k.H, d.layer.H_kv = 2, d.layer.D = 128, d.layer.F = 1024;
  d.L = 2, d.V = 1000, d.tied = k.tied, d.layer.qk_norm = k.qk_norm;
  const std::int64_t T = d.layer.T, P = k.P, T_l = T / P, half_D = d.layer.D / 2;
  const std::uint64_t seed = 91;
  std::vector<std::int64_t> tokens(T), pos(T);
  for (std::int64_t t = 0; t < T; ++t) tokens[t] = (t * 7919 + 13) % d.V, pos[t] = t;
  std::vector<std::int64_t> labels = runtime::shift_labels(tokens);
  for (std::int64_t t = 5; t < T; t += 37) labels[t] = runtime::kIgnoreLabel;
  std::int64_t valid = 0;
  for (auto l : labels) valid += l != runtime::kIgnoreLabel;
  std::vector<core::bf16> cos, sin;
  runtime::rope_tables(T, d.layer.D, pos.data(), 500000.0, cos, sin);
  const runtime::StepParams p = runtime::cuda::StepRunner::host_params(d, seed);
  const runtime::StepResult ref = runtime::step_reference(d, p, tokens, labels, cos, sin, k.shards);

  runtime::cuda::StepPlan plan;
  plan.checkpoint = k.checkpoint, plan.logits_shards = k.shards, plan.optimizer = false;
  runtime::StepResult one;  // the same step on one rank of this GPU
  {
    runtime::cuda::DeviceArena arena(0);
    runtime::cuda::Gemm gemm;
    runtime::cuda::StepRunner run(d, plan, arena, gemm, seed);
    run.set_batch(tokens, labels, cos, sin);
    run.step(nullptr, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    one = run.grads();
  }

  runtime::StepDims dl = d;
  dl.layer.T = T_l;
  Dims sd;  // the mirror of one rank's buffers at sp = P
  sd.B = 1, sd.S = T, sd.S_l = T_l, sd.P = P, sd.h = d.layer.h, sd.H = d.layer.H, sd.H_kv = d.layer.H_kv, sd.D = d.layer.D;
  sd.H_l = core::heads_per_rank(sd.H, P), sd.kv_local = core::heads_per_rank(sd.H_kv, P);
  sd.F = d.layer.F, sd.V = d.V, sd.L = d.L, sd.ckpt = k.checkpoint, sd.logits_shards = k.shards;
  StepRuntimeFlags f;
  f.tied = k.tied, f.flash = true, f.qk_norm = k.qk_norm, f.optimizer = false;
  const StepRuntimeBytes mirror = ulysses_step_bytes(sd, f);

  runtime::cuda::LoopbackGroup group(static_cast<int>(P));
  std::vector<RankOut> outs(static_cast<std::size_t>(P));
  std::exception_ptr first;
  std::mutex m;
  {
    std::vector<std::jthread> ranks;
    for (int r = 0; r < P; ++r)
      ranks.emplace_back([&, r] {
        try {
          CUDA_CHECK(cudaSetDevice(0));
          runtime::cuda::DeviceArena arena(0);
          runtime::cuda::Gemm gemm;
          cudaStream_t s;
          CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
          runtime::cuda::LoopbackRank ex(group, r);
          {
            runtime::cuda::StepRunner run(dl, plan, arena, gemm, seed, kernels::AttnKernel::flash, &ex);
            run.set_batch(rows(tokens, r * T_l, T_l, 1), rows(labels, r * T_l, T_l, 1), rows(cos, r * T_l, T_l, half_D),
                          rows(sin, r * T_l, T_l, half_D), valid);
            run.step(s, nullptr);
            run.step(s, nullptr);  // a second step gives the same gradients
            CUDA_CHECK(cudaStreamSynchronize(s));
            outs[r].g = run.grads();
            outs[r].peak = arena.peak_bytes();
          }
          CUDA_CHECK(cudaStreamDestroy(s));
        } catch (const runtime::PeerFailed&) {
        } catch (...) {
          const std::lock_guard<std::mutex> lock(m);
          if (!first) first = std::current_exception();
          group.abort();
        }
      });
  }
  if (first) std::rethrow_exception(first);

  // the step's loss and gradients: the ranks' sums
  runtime::StepResult sum = outs[0].g;
  double loss_sum = 0;
  std::int64_t valid_sum = 0;
  for (int r = 0; r < P; ++r) {
    loss_sum += outs[r].g.loss_sum, valid_sum += outs[r].g.valid_tokens;
    if (r == 0) continue;
    auto dst = runtime::grad_tensors(d, sum);
    const auto src = runtime::grad_tensors(d, outs[r].g);
    for (std::size_t i = 0; i < dst.size(); ++i)
      for (std::size_t j = 0; j < dst[i]->size(); ++j) (*dst[i])[j] += (*src[i])[j];
  }
  const double loss = loss_sum / double(valid);
  std::printf("step sp=%lld H=%lld H_kv=%lld checkpoint=%d shards=%lld qk_norm=%d tied=%d: loss %.6f (one rank %.6f, fp64 %.6f), "
              "rank arena peak %lld bytes\n", (long long)P, (long long)k.H, (long long)d.layer.H_kv, k.checkpoint, (long long)k.shards,
              k.qk_norm, k.tied, loss, one.loss, ref.loss, (long long)outs[0].peak);
  CHECK(valid_sum == valid);
  CHECK(std::abs(loss - ref.loss) <= 5e-3 * ref.loss);
  CHECK(std::abs(loss - one.loss) <= 5e-3 * one.loss);
  for (int r = 0; r < P; ++r) CHECK(outs[r].peak == gputest::expected_arena_peak(mirror, dl.layer));
  const runtime::StepResult &total = sum, &single = one;
  const auto got = runtime::grad_tensors(d, total), want = runtime::grad_tensors(d, ref), gpu1 = runtime::grad_tensors(d, single);
  double worst = 0, worst_one = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = rel_l2(*got[i], *want[i]), e1 = rel_l2(*got[i], *gpu1[i]);
    INFO("gradient tensor " << i << " relative L2 error " << e << " against fp64, " << e1 << " against one rank");
    CHECK(e <= 5e-2);
    CHECK(e1 <= 5e-2);
    worst = std::max(worst, e), worst_one = std::max(worst_one, e1);
  }
  std::printf("  worst gradient relative L2 error %.2e against fp64, %.2e against one rank, over %zu tensors\n", worst, worst_one,
              got.size());
  CHECK(rel_l2(sum.d_layers[0].wg, ref.d_layers[0].wu) > 0.5);  // the comparison can tell two gradients apart
  CHECK(rel_l2(outs[0].g.d_layers[0].wq, ref.d_layers[0].wq) > 0.1);  // one rank alone is not the step
}

}  // namespace

TEST_CASE("sp step on logical ranks of one GPU: P=2, kv heads split, checkpointed", "[.gpu][gpu][step][sp]") {
  check_sp(Case{});
}
TEST_CASE("sp step on logical ranks of one GPU: P=4, kv heads replicated, tied, 2 chunks", "[.gpu][gpu][step][sp]") {
  Case k;
  k.P = 4, k.tied = true, k.shards = 2;
  check_sp(k);
}
TEST_CASE("sp step on logical ranks of one GPU: P=2, no checkpointing, Qwen3 head norms", "[.gpu][gpu][step][sp]") {
  Case k;
  k.checkpoint = false, k.qk_norm = true, k.H = 6;
  check_sp(k);
}
