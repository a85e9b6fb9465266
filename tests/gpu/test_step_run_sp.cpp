// `run --backend cuda --scope step` at sp = 2 (runtime/cuda/step_run.hpp run_step_sp): a tiny scenario's step on two
// logical ranks of one GPU (--ranks-on-one-gpu) next to the same scenario at sp 1, and over two GPUs (NCCL) where
// the host has them. Checked:
// - the measurement's ranks, layers and tokens; every step's loss finite and within 2e-3 of sp 1's, relative (the
//   same seeded parameters and tokens, AdamW after each step: the same trajectory up to bf16 rounding). At random
//   initialisation the loss is near ln V whatever the weights, so this checks the wiring (the batch's split, the
//   divisor over every rank's valid labels, the merge), not the layers: tests/gpu/test_step_sp.cpp checks those;
// - the phases include the exchange (a2a.qkv.*, a2a.out.*) and ZeRO-3's collectives;
// - the peak equals the mirror at sp 2 (sim/step_runtime_memory.hpp) byte for byte: without the exchange's staging
//   on one GPU, with it over GPUs;
// - without --ranks-on-one-gpu on a host with fewer GPUs: one line naming plan.sp_size;
// - the optimizer on the host at sp 2 (eleventh session): the same losses, its copies' phases; with the parameter
//   parts on the host (offload_params), their fetch's phase and no copy back; offload_params at sp 1 (OneRank).
// Written 2026-12-07 (tenth session); the one-GPU cases passed on an H100 on 2026-12-07 (records/gpu-runs/h100-2026-12-07b),
// the two-GPU cases have not run (no two GPUs lent).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include <cuda_runtime.h>

#include "core/errors.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/gemm.hpp"
#include "runtime/cuda/step_run.hpp"
#include "runtime/step_plan.hpp"
#include "sim/step_runtime_memory.hpp"
#include "tests/gpu/gpu_util.hpp"
#include "tests/gpu/step_arena.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;

namespace {

Scenario tiny(std::int64_t P) {
  Scenario sc;
  sc.name = "tiny-sp";
  sc.model = test::llama31_8b();
  sc.model.name = "tiny", sc.model.layers = 2, sc.model.hidden = 512, sc.model.heads = 4, sc.model.kv_heads = 2;
  sc.model.head_dim = 128, sc.model.ffn_hidden = 1024, sc.model.vocab = 1000;
  sc.hw = test::h100_sxm();
  sc.plan.seq_len = 1024, sc.plan.sp_size = P, sc.gpus = P, sc.plan.zero_stage = 3;
  sc.plan.tiled_logits = true;
  return sc;
}

runtime::StepRunOptions options(bool one_gpu) {
  runtime::StepRunOptions o;
  o.warmup = 1, o.iters = 2, o.seed = 77, o.ranks_on_one_gpu = one_gpu;
  return o;
}

void check_against_sp1(const runtime::StepMeasurement& m, const runtime::StepMeasurement& one, const Scenario& sc, bool staging) {
  CHECK(m.ranks == 2);
  CHECK(m.layers == 2);
  CHECK(m.seq_len == 1024);
  CHECK(m.correct());
  REQUIRE(m.losses.size() == one.losses.size());
  for (std::size_t i = 0; i < m.losses.size(); ++i) {
    INFO("step " << i << " loss " << m.losses[i] << " at sp 2, " << one.losses[i] << " at sp 1");
    CHECK(std::isfinite(m.losses[i]));
    CHECK(std::abs(m.losses[i] - one.losses[i]) <= 2e-3 * std::abs(one.losses[i]));
  }
  std::string names;
  for (const auto& p : m.phases) names += p.name + " ";
  INFO("phases: " << names);
  for (const char* want : {"a2a.qkv.fwd", "a2a.out.fwd", "a2a.qkv.bwd", "a2a.out.bwd", "a2a.qkv.recompute", "zero.allgather",
                           "zero.reduce_scatter", "optimizer.step"})
    CHECK(names.find(std::string(want) + " ") != std::string::npos);
  StepRuntimeFlags f = step_runtime_flags(sc);
  f.transport_staging = staging;
  const StepRuntimeBytes mirror = ulysses_step_bytes(derive_dims(sc), f);
  const runtime::StepShape shape = runtime::step_shape_of(sc, "tiny");
  const std::int64_t want = gputest::expected_arena_peak(mirror, shape.dims.layer) +
                            static_cast<std::int64_t>(runtime::cuda::Gemm::kWorkspaceBytes);
  std::fprintf(stderr, "step sp=2 (%s): %.3f ms, losses %.5f .. %.5f (sp 1: %.5f .. %.5f), peak %lld bytes (mirror %lld)\n",
               m.device.c_str(), m.step_median_s * 1e3, m.losses.front(), m.losses.back(), one.losses.front(), one.losses.back(),
               (long long)m.max_memory_allocated, (long long)want);
  CHECK(m.max_memory_allocated == want);
}

}  // namespace

TEST_CASE("run step at sp 2 on logical ranks of one GPU", "[.gpu][gpu][step][sp][step_run]") {
  const runtime::StepMeasurement one = runtime::cuda::run_step(tiny(1), options(false), "tiny");
  REQUIRE(one.correct());
  const runtime::StepMeasurement m = runtime::cuda::run_step(tiny(2), options(true), "tiny");
  check_against_sp1(m, one, tiny(2), false);
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  if (n >= 2) return;  // the next case runs it over GPUs
  try {
    (void)runtime::cuda::run_step(tiny(2), options(false), "tiny");
    FAIL("sp 2 on one GPU without --ranks-on-one-gpu did not refuse");
  } catch (const core::InputError& e) {
    const std::string why = e.what();
    INFO(why);
    CHECK(why.find("plan.sp_size") != std::string::npos);
    CHECK(why.find("--ranks-on-one-gpu") != std::string::npos);
    CHECK(why.find('\n') == std::string::npos);
  }
}

// The optimizer on the host at sp 2 (on logical ranks of one GPU, or over two) against it at sp 1 (params: the
// parameter parts on the host too); returns the measurement's phase names, each followed by a space.
static std::string host_optimizer_phases(bool params, bool one_gpu = true) {
  Scenario one_sc = tiny(1), sc = tiny(2);
  one_sc.plan.offload_optimizer = sc.plan.offload_optimizer = true;
  sc.plan.offload_params = params;
  const runtime::StepMeasurement one = runtime::cuda::run_step(one_sc, options(false), "tiny");
  REQUIRE(one.correct());
  const runtime::StepMeasurement m = runtime::cuda::run_step(sc, options(one_gpu), "tiny");
  check_against_sp1(m, one, sc, !one_gpu);
  std::string names;
  for (const auto& p : m.phases) names += p.name + " ";
  return names;
}

TEST_CASE("run step at sp 2 on logical ranks with the optimizer on the host", "[.gpu][gpu][step][sp][step_run]") {
  const std::string names = host_optimizer_phases(false);
  CHECK(names.find("offload.grads ") != std::string::npos);
  CHECK(names.find("offload.optimizer ") != std::string::npos);
  CHECK(names.find("offload.params ") == std::string::npos);
}

TEST_CASE("run step at sp 2 on logical ranks with the parameters on the host", "[.gpu][gpu][step][sp][step_run]") {
  const std::string names = host_optimizer_phases(true);
  CHECK(names.find("offload.params ") != std::string::npos);
  CHECK(names.find("offload.optimizer ") == std::string::npos);  // the parts are updated where they live
}

// offload_params at sp 1 (ZeRO-3's machinery over OneRank): the same losses as with the parameters on the device,
// the fetch's phase, and the peak equal to the mirror's (the outer tensors and two of the four layers on the device)
TEST_CASE("run step at sp 1 with the parameters on the host", "[.gpu][gpu][step][step_run]") {
  Scenario dev = tiny(1), host = tiny(1);
  dev.model.layers = host.model.layers = 4;
  dev.plan.offload_optimizer = host.plan.offload_optimizer = host.plan.offload_params = true;
  const runtime::StepMeasurement a = runtime::cuda::run_step(dev, options(false), "tiny");
  const runtime::StepMeasurement b = runtime::cuda::run_step(host, options(false), "tiny");
  REQUIRE(a.correct());
  REQUIRE(b.correct());
  REQUIRE(a.losses.size() == b.losses.size());
  for (std::size_t i = 0; i < a.losses.size(); ++i) {
    INFO("step " << i << " loss " << b.losses[i] << " with the parameters on the host, " << a.losses[i] << " on the device");
    CHECK(std::abs(b.losses[i] - a.losses[i]) <= 2e-3 * std::abs(a.losses[i]));
  }
  std::string names;
  for (const auto& p : b.phases) names += p.name + " ";
  INFO("phases: " << names);
  CHECK(names.find("offload.params ") != std::string::npos);
  CHECK(names.find("offload.optimizer ") == std::string::npos);
  const StepRuntimeBytes mirror = ulysses_step_bytes(derive_dims(host), step_runtime_flags(host));
  const std::int64_t want = gputest::expected_arena_peak(mirror, runtime::step_shape_of(host, "tiny").dims.layer) +
                            static_cast<std::int64_t>(runtime::cuda::Gemm::kWorkspaceBytes);
  std::fprintf(stderr, "step sp=1 offload_params: %.3f ms (parameters on the device %.3f ms), peak %lld bytes (mirror %lld; on "
               "the device %lld)\n", b.step_median_s * 1e3, a.step_median_s * 1e3, (long long)b.max_memory_allocated,
               (long long)want, (long long)a.max_memory_allocated);
  CHECK(b.max_memory_allocated == want);
  CHECK(b.pinned_bytes == mirror.host_pinned);
}

TEST_CASE("run step at sp 2 over two GPUs", "[.gpu][gpu][step][sp][step_run]") {
  GPUTEST_SKIP_UNLESS_DEVICES(2);
  const runtime::StepMeasurement one = runtime::cuda::run_step(tiny(1), options(false), "tiny");
  REQUIRE(one.correct());
  const runtime::StepMeasurement m = runtime::cuda::run_step(tiny(2), options(false), "tiny");
  check_against_sp1(m, one, tiny(2), true);
}

TEST_CASE("run step at sp 2 over two GPUs with the parameters on the host", "[.gpu][gpu][step][sp][step_run]") {
  GPUTEST_SKIP_UNLESS_DEVICES(2);
  CHECK(host_optimizer_phases(false, false).find("offload.optimizer ") != std::string::npos);
  CHECK(host_optimizer_phases(true, false).find("offload.params ") != std::string::npos);
}
