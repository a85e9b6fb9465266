// Capacity search: the result fits and the next multiple does not; the longest sequence grows
// with GPU count and with each ALST feature; binding and degenerate cases.
#include <catch2/catch.hpp>
#include <string>

#include "sim/capacity.hpp"
#include "sim/memory.hpp"
#include "sim/predict.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;
using test::h100_sxm;
using test::llama31_8b;
using test::make_scenario;

namespace {

bool fits_at(Scenario sc, std::int64_t S) {
  sc.plan.seq_len = S;
  const Prediction p = predict(sc);
  return p.fits_gpu && p.fits_host;
}

// ALST ablation order: baseline (ZeRO-3, checkpointing, optimizer offload, sp = 1),
// + tiled logits/loss, + Ulysses sp = gpus, + TiledMLP, + checkpoint offload.
Scenario ablation(std::int64_t gpus, int features) {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), gpus, features >= 2 ? gpus : 1, 0);
  if (gpus == 1) sc.plan.offload_params = true;  // the single-GPU recipe offloads parameters too
  sc.plan.tiled_logits = features >= 1;
  sc.plan.tiled_mlp = features >= 3;
  sc.plan.offload_checkpoints = features >= 4;
  return sc;
}

}  // namespace

TEST_CASE("capacity: the result fits and the next multiple does not", "[sim][capacity]") {
  for (int f = 0; f <= 4; ++f) {
    const Scenario sc = ablation(8, f);
    const CapacityResult r = find_max_seq_len(sc, 1024);
    INFO("features " << f << " max " << r.max_seq_len);
    REQUIRE(r.max_seq_len > 0);
    CHECK(r.step == lcm64(sc.plan.sp_size, 1024));
    CHECK(r.max_seq_len % r.step == 0);
    CHECK(fits_at(sc, r.max_seq_len));
    CHECK_FALSE(fits_at(sc, r.max_seq_len + r.step));
    CHECK(r.at_max.seq_len == r.max_seq_len);
    CHECK(r.binding != Binding::none);
    CHECK(r.evaluations > 0);
    CHECK(r.evaluations < 100);  // ~2 log2(max / step)
  }
}

TEST_CASE("capacity: longest sequence grows with each ALST feature (Llama-3.1-8B, 8 H100)", "[sim][capacity][monotone]") {
  std::int64_t prev = 0;
  const char* names[] = {"baseline", "+tiled logits/loss", "+ulysses sp", "+TiledMLP", "+checkpoint offload"};
  for (int f = 0; f <= 4; ++f) {
    const CapacityResult r = find_max_seq_len(ablation(8, f), 1024);
    INFO(names[f] << ": " << r.max_seq_len << " binding " << to_string(r.binding));
    CHECK(r.max_seq_len > prev);
    prev = r.max_seq_len;
  }
}

TEST_CASE("capacity: longest sequence grows with GPU count (sp = gpus)", "[sim][capacity][monotone]") {
  for (int f : {2, 4}) {
    std::int64_t prev = 0;
    for (std::int64_t gpus : {1, 2, 4, 8, 16, 32}) {
      const CapacityResult r = find_max_seq_len(ablation(gpus, f), 1024);
      INFO("gpus " << gpus << " features " << f << ": " << r.max_seq_len);
      CHECK(r.max_seq_len > prev);
      prev = r.max_seq_len;
    }
  }
}

TEST_CASE("capacity: more HBM fits longer sequences", "[sim][capacity][monotone]") {
  const Scenario h100 = ablation(8, 4);
  Scenario h200 = h100;
  h200.hw = test::h200_sxm();
  CHECK(find_max_seq_len(h200, 1024).max_seq_len > find_max_seq_len(h100, 1024).max_seq_len);
}

TEST_CASE("capacity: host RAM binds when checkpoints go to a small host", "[sim][capacity]") {
  Scenario sc = ablation(8, 4);
  sc.host_ram_bytes = 400LL << 30;  // 400 GiB per node
  const CapacityResult r = find_max_seq_len(sc, 1024);
  CHECK(r.binding == Binding::host_ram);
  CHECK(r.at_max.fits_host);
  CHECK(r.at_max.host.total() <= (400LL << 30));
  // on a 2 TiB host the GPU binds for the same plan... or the host does further out
  const CapacityResult big = find_max_seq_len(ablation(8, 4), 1024);
  CHECK(big.max_seq_len > r.max_seq_len);
}

TEST_CASE("capacity: nothing fits", "[sim][capacity]") {
  Scenario sc = ablation(8, 4);
  sc.hw.hbm_bytes = 1LL << 30;  // 1 GiB: the model states alone do not fit
  const CapacityResult r = find_max_seq_len(sc, 1024);
  CHECK(r.max_seq_len == 0);
  CHECK(r.binding == Binding::gpu_hbm);
  CHECK(r.at_max.seq_len == r.step);
  CHECK(r.evaluations == 1);
}

TEST_CASE("capacity: search step is lcm(P, granularity)", "[sim][capacity]") {
  const Scenario sc = ablation(8, 2);  // P = 8
  CHECK(find_max_seq_len(sc, 1000).step == 1000);
  CHECK(find_max_seq_len(sc, 3).step == 24);
  CHECK(find_max_seq_len(sc, 1).step == 8);
  const CapacityResult r = find_max_seq_len(sc, 3);
  CHECK(r.max_seq_len % 24 == 0);
  CHECK(fits_at(sc, r.max_seq_len));
  CHECK_FALSE(fits_at(sc, r.max_seq_len + 24));
}
