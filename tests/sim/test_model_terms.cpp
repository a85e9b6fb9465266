// predict()'s per-thread model terms (sim/model_terms.hpp): every field of every prediction equals
// the one computed with terms derived from the scenario itself (not through the cache's key), over
// scenarios visited so that the cache hits, misses and evicts (each key field changed alone, structures revisited); presets and test fixtures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "sim/config.hpp"
#include "sim/memory.hpp"
#include "sim/model.hpp"
#include "sim/model_terms.hpp"
#include "sim/predict.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;
using namespace ulysses::test;

namespace {

// The terms computed from the scenario itself (its model, plan and dims), without ModelTermsKey: what
// the cache must give back. If the key left out an input the terms read, this would differ from it.
ModelTerms direct_terms(const Scenario& sc) {
  const Dims d = derive_dims(sc);
  ModelTerms t;
  const LayerParams lp = layer_params(sc.model);
  for (int i = 0; i < lp.n; ++i)
    if (double(lp.p[i].numel) > sc.plan.reduce_bucket_size) t.layer_grad = std::max(t.layer_grad, double(lp.p[i].numel));
  if (sc.plan.zero_stage >= 3) {
    t.flushes = reduce_flushes(sc.model, BucketPlan{sc.plan.reduce_bucket_size, sc.plan.offload_optimizer, sc.plan.tiled_logits},
                               d.zero_group, d.P > 1);
    if (!sc.plan.offload_optimizer) t.largest_sub_group = largest_sub_group(sc.model, static_cast<double>(d.zero_group));
  }
  return t;
}

// Bit equality of doubles (so -0.0 vs 0.0 or a NaN would count as different).
bool same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Every field of two predictions, exactly; returns the first that differs ("" when none).
std::string first_difference(const Prediction& a, const Prediction& b) {
  if (a.seq_len != b.seq_len || a.padded_seq_len != b.padded_seq_len || a.s_local != b.s_local) return "lengths";
  if (a.gpu.n != b.gpu.n || a.host.n != b.host.n || a.step.n != b.step.n) return "term counts";
  for (int i = 0; i < a.gpu.n; ++i)
    if (std::string(a.gpu.terms[i].name) != b.gpu.terms[i].name || a.gpu.terms[i].bytes != b.gpu.terms[i].bytes)
      return std::string("gpu.") + a.gpu.terms[i].name;
  for (int i = 0; i < a.host.n; ++i)
    if (std::string(a.host.terms[i].name) != b.host.terms[i].name || a.host.terms[i].bytes != b.host.terms[i].bytes)
      return std::string("host.") + a.host.terms[i].name;
  for (int i = 0; i < a.step.n; ++i)
    if (std::string(a.step.phases[i].name) != b.step.phases[i].name || !same(a.step.phases[i].time_s, b.step.phases[i].time_s))
      return std::string("step.") + a.step.phases[i].name;
  for (std::size_t i = 0; i < a.block.size(); ++i)
    if (!same(a.block[i], b.block[i])) return "block " + std::to_string(i);
  if (a.gpu_capacity_bytes != b.gpu_capacity_bytes || a.host_capacity_bytes != b.host_capacity_bytes) return "capacities";
  if (a.fits_gpu != b.fits_gpu || a.fits_host != b.fits_host) return "fits";
  if (a.block_peak_bytes != b.block_peak_bytes || a.block_peak_bytes_freeing != b.block_peak_bytes_freeing) return "block peak";
  if (a.a2a_q_bytes_per_rank != b.a2a_q_bytes_per_rank || a.a2a_kv_bytes_per_rank != b.a2a_kv_bytes_per_rank) return "a2a bytes";
  if (std::string(a.gpu_peak_at) != b.gpu_peak_at) return "gpu_peak_at";
  if (!same(a.step_time_s, b.step_time_s) || !same(a.tokens_per_s, b.tokens_per_s)) return "step time, tokens/s";
  if (!same(a.hw_tflops_per_gpu, b.hw_tflops_per_gpu) || !same(a.megatron_tflops_per_gpu, b.megatron_tflops_per_gpu))
    return "TFLOP/s";
  return "";
}

Scenario preset(const char* model, const char* profile, std::int64_t gpus, std::int64_t sp) {
  Scenario sc;
  set_key(sc, "model", model, "test");
  set_key(sc, "profile", profile, "test");
  set_key(sc, "gpus", std::to_string(gpus), "test");
  set_key(sc, "plan.sp_size", std::to_string(sp), "test");
  set_key(sc, "plan.dp_shard_size", std::to_string(gpus / sp), "test");
  set_key(sc, "plan.seq_len", "131072", "test");
  validate(sc, "test");
  return sc;
}

}  // namespace

TEST_CASE("predict(): the per-thread model terms give every field the fresh terms give", "[sim][model_terms]") {
  std::vector<Scenario> bases = {
      make_scenario(llama31_8b(), h100_sxm(), 8, 8, 1 << 20),
      all_features(make_scenario(llama31_70b(), h200_sxm(), 32, 32, 1 << 20)),
      make_scenario(llama31_70b(), h100_sxm(), 64, 8, 131072),
      preset("qwen3-4b", "h200-sxm-141gb", 8, 8),   // tied embeddings, q/k norms; the calibrated profile
      preset("qwen3-32b", "a100-sxm-80gb", 16, 8),
      preset("llama-3.1-405b", "h200-sxm-141gb", 64, 8),
      [] {  // ZeRO-3 sharded over dp x sp (zero_group 16 != P 8), optimizer on the GPU, q/k/v biases
        Scenario s = make_scenario(llama31_8b(), h100_sxm(), 16, 8, 131072);
        s.plan.offload_optimizer = false, s.plan.torch_adam = true, s.model.qkv_bias = true;
        return s;
      }(),
  };
  // One change at a time, each applied on top of the previous ones: every ModelTermsKey field (the
  // model's shape, ZeRO stage, optimizer offload, tiled logits, bucket size, sp and dp sizes) and
  // fields outside the key (seq_len, batch, features that only the per-length terms read).
  const std::vector<std::function<void(Scenario&)>> changes = {
      [](Scenario& s) { s.plan.seq_len += 4096; },
      [](Scenario& s) { s.plan.reduce_bucket_size = 1e8; },
      [](Scenario& s) { s.plan.offload_optimizer = !s.plan.offload_optimizer; },
      [](Scenario& s) { s.plan.tiled_logits = !s.plan.tiled_logits; },
      [](Scenario& s) { s.plan.seq_len *= 2; },
      [](Scenario& s) { s.plan.zero_stage = 2; },
      [](Scenario& s) { s.plan.zero_stage = 3; },
      [](Scenario& s) { s.plan.dp_shard_size = 1, s.gpus = s.plan.sp_size; },
      [](Scenario& s) { s.plan.sp_size = 1, s.gpus = s.plan.dp_shard_size; },
      [](Scenario& s) { s.plan.reduce_bucket_size = 2e9; },
      [](Scenario& s) { s.model.layers += 1; },
      [](Scenario& s) { s.model.ffn_hidden += 256; },
      [](Scenario& s) { s.model.vocab += 64; },
      [](Scenario& s) { s.model.hidden += 128; },
      [](Scenario& s) { s.model.tied_embeddings = !s.model.tied_embeddings; },
      [](Scenario& s) { s.model.qk_norm = !s.model.qk_norm; },
      [](Scenario& s) { s.model.qkv_bias = !s.model.qkv_bias; },
      [](Scenario& s) { s.model.heads *= 2, s.model.kv_heads *= 2; },
      [](Scenario& s) { s.model.head_dim = 64; },
      [](Scenario& s) { s.plan.micro_batch_size = 2, s.plan.tiled_mlp = !s.plan.tiled_mlp; },
      [](Scenario& s) { s.plan.reduce_bucket_size = 3e7, s.plan.offload_optimizer = false, s.plan.torch_adam = true; },
  };
  int compared = 0, hit_same_key = 0;
  for (int pass = 0; pass < 2; ++pass) {  // the second pass revisits structures evicted since
    for (const Scenario& base : bases) {
      Scenario s = base;
      std::vector<Scenario> seen = {s};
      for (const auto& change : changes) {
        change(s);
        if (check(s).empty()) seen.push_back(s);
      }
      // forwards, then backwards (the cache holds the last few structures), then interleaved
      std::vector<const Scenario*> order;
      for (const Scenario& x : seen) order.push_back(&x);
      for (std::size_t i = seen.size(); i-- > 0;) order.push_back(&seen[i]);
      for (std::size_t i = 0; i < seen.size(); ++i) order.push_back(&seen[(i * 7) % seen.size()]);
      for (std::size_t i = 0; i < order.size(); ++i) {
        const Scenario& x = *order[i];
        if (i > 0 && model_terms_key(x, derive_dims(x)) == model_terms_key(*order[i - 1], derive_dims(*order[i - 1])))
          ++hit_same_key;
        INFO(x.model.name << " on " << x.hw.name << ", step " << i);
        // the terms through the key equal the terms from the scenario itself (a key missing an input differs)
        const ModelTerms direct = direct_terms(x), keyed = model_terms(model_terms_key(x, derive_dims(x)));
        REQUIRE(same(keyed.layer_grad, direct.layer_grad));
        REQUIRE(same(keyed.largest_sub_group, direct.largest_sub_group));
        for (int f = 0; f < kFlushPlaces; ++f) REQUIRE(keyed.flushes.epilogue_bytes[f] == direct.flushes.epilogue_bytes[f]);
        // and the cached prediction is the one with those terms
        REQUIRE(first_difference(predict(x), predict(x, direct)) == "");
        ++compared;
      }
    }
  }
  CHECK(compared > 400);
  CHECK(hit_same_key > 20);  // consecutive scenarios that share their terms (the cache's hits)
}

TEST_CASE("model terms: a change of each key field alone changes some term", "[sim][model_terms]") {
  // So that the key is no larger than the inputs: each field changes at least one term.
  // sp 1: the flushes count the flattened bucket; no optimizer offload: the sub-groups count
  Scenario s = make_scenario(llama31_8b(), h100_sxm(), 8, 1, 65536);
  s.plan.offload_optimizer = false;
  s.plan.reduce_bucket_size = 1e8;
  const ModelTermsKey k = model_terms_key(s, derive_dims(s));
  ModelTermsKey tied = k;
  tied.tied_embeddings = true, tied.reduce_bucket_size = 2e9;  // a bucket the head fills only in part
  auto differs = [&](const std::function<void(ModelTermsKey&)>& change, const ModelTermsKey* from = nullptr) {
    const ModelTermsKey base = from ? *from : k;
    ModelTermsKey c = base;
    change(c);
    const ModelTerms a = model_terms(base), b = model_terms(c);
    bool d = a.layer_grad != b.layer_grad || a.largest_sub_group != b.largest_sub_group;
    for (int i = 0; i < kFlushPlaces; ++i) d = d || a.flushes.epilogue_bytes[i] != b.flushes.epilogue_bytes[i];
    return d;
  };
  CHECK(differs([](ModelTermsKey& c) { c.L = 31; }));
  CHECK(differs([](ModelTermsKey& c) { c.h = 5120; }));
  CHECK(differs([](ModelTermsKey& c) { c.H = 40; }));
  CHECK(differs([](ModelTermsKey& c) { c.H_kv = 4; }));
  CHECK(differs([](ModelTermsKey& c) { c.D = 64; }));
  CHECK(differs([](ModelTermsKey& c) { c.F = 10240; }));
  CHECK(differs([](ModelTermsKey& c) { c.V = 32000; }));
  CHECK(differs([](ModelTermsKey& c) { c.tied_embeddings = true; }));
  CHECK(differs([](ModelTermsKey& c) { c.qk_norm = true; }));
  CHECK(differs([](ModelTermsKey& c) { c.qkv_bias = true; }));
  CHECK(differs([](ModelTermsKey& c) { c.zero_stage = 2; }));
  CHECK(differs([](ModelTermsKey& c) { c.offload_optimizer = true; }));
  CHECK(differs([](ModelTermsKey& c) { c.tiled_logits = true; }, &tied));  // the tied head's place in the walk
  CHECK(differs([](ModelTermsKey& c) { c.reduce_bucket_size = 5e8; }));
  CHECK(differs([](ModelTermsKey& c) { c.P = 8; }));
  CHECK(differs([](ModelTermsKey& c) { c.zero_group = 64; }));
}

TEST_CASE("largest_sub_group is the largest of zero3_sub_groups' walk", "[sim][model_terms]") {
  for (const char* name : {"llama-3.1-8b", "llama-3.1-70b", "qwen3-4b", "qwen3-8b"}) {
    ModelSpec mo = load_model(name);
    for (std::int64_t layers : {2, 3, 32}) {
      mo.layers = layers;
      for (double N : {1.0, 8.0, 32.0}) {
        const std::vector<double> g = zero3_sub_groups(mo, N);
        INFO(name << " L=" << layers << " N=" << N);
        REQUIRE(!g.empty());
        double total = 0;
        for (double x : g) total += x;
        double parts = 0;
        for (std::int64_t n : parameter_numels(mo)) parts += std::ceil(double(n) / N);
        CHECK(total == parts);
        CHECK(*std::max_element(g.begin(), g.end()) == largest_sub_group(mo, N));
      }
    }
  }
}
