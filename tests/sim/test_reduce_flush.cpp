// ZeRO-3 bucket flushes (sim/reduce_flush.hpp): where they start and what their epilogue holds,
// by hand arithmetic and against a plain layer-by-layer walk (no cycle jump) written here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "sim/memory.hpp"
#include "sim/model.hpp"
#include "sim/predict.hpp"
#include "sim/reduce_flush.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;

namespace {

ModelSpec qwen3_4b(std::int64_t layers) {
  ModelSpec m;
  m.name = "qwen3-4b";
  m.layers = layers; m.hidden = 2560; m.heads = 32; m.kv_heads = 8; m.head_dim = 128;
  m.ffn_hidden = 9728; m.vocab = 151936; m.tied_embeddings = true; m.qk_norm = true;
  return m;
}

Plan offload_plan(bool tiled_logits) {
  Plan p;
  p.zero_stage = 3;
  p.offload_optimizer = true;
  p.tiled_logits = tiled_logits;
  return p;
}

double at(const ReduceFlushes& f, FlushAt a) { return f.epilogue_bytes[static_cast<int>(a)]; }

// The oracle: every layer walked, the gradient arrival order spelled out per role. sp: the fp32 reduction of
// sp > 1 (fp32 copies of the gradients too large for the buffer, the fp32 concatenation, bf16 partitions).
ReduceFlushes plain_walk(const ModelSpec& m, const Plan& pl, double N, bool sp) {
  ReduceFlushes out;
  double elems = 0, big = 0, maxp = 0;
  int count = 0;
  auto epilogue = [&] {
    const double part = std::ceil(elems / N);
    const double cat = count == 1 && std::fmod(elems, N) == 0 ? 0 : elems;  // one tensor N divides: in place
    return sp ? std::max(4 * big + 4 * cat + 2 * part, 2 * part + maxp) : 2 * cat + maxp;
  };
  auto cost = [&](double numel) {
    if (!pl.offload_optimizer) return 0.0;
    const double part = std::ceil(numel / N);
    return 2 * part + std::max(8 * std::min(part, 250e6), 4 * part);
  };
  auto arrive = [&](double numel, FlushAt a) {
    if (elems + numel > pl.reduce_bucket_size && elems > 0) {
      double& e = out.epilogue_bytes[static_cast<int>(a)];
      e = std::max(e, epilogue());
      elems = 0, big = 0, maxp = 0, count = 0;
    }
    if (numel > pl.reduce_bucket_size) big += numel;
    elems += numel, ++count;
    maxp = std::max(maxp, cost(numel));
  };
  const double h = double(m.hidden), F = double(m.ffn_hidden), H = double(m.heads), K = double(m.kv_heads), D = double(m.head_dim);
  const double head = double(m.vocab) * h;
  const bool head_first = !m.tied_embeddings || pl.tiled_logits;
  if (head_first) arrive(head, FlushAt::between);
  arrive(h, FlushAt::between);
  for (std::int64_t l = 0; l < m.layers; ++l) {
    for (int i = 0; i < 3; ++i) arrive(h * F, FlushAt::mlp);
    arrive(h, FlushAt::attn);
    arrive(H * D * h, FlushAt::attn);
    if (m.qk_norm) arrive(D, FlushAt::qkv), arrive(D, FlushAt::qkv);
    if (m.qkv_bias) arrive(K * D, FlushAt::qkv);
    arrive(h * K * D, FlushAt::qkv);
    if (m.qkv_bias) arrive(K * D, FlushAt::qkv);
    arrive(h * K * D, FlushAt::qkv);
    if (m.qkv_bias) arrive(H * D, FlushAt::qkv);
    arrive(h * H * D, FlushAt::qkv);
    arrive(h, FlushAt::between);
  }
  arrive(head, FlushAt::between);  // the embedding (tied and tiled: the head a second time)
  if (elems > 0) {
    double& e = out.epilogue_bytes[static_cast<int>(FlushAt::between)];
    e = std::max(e, epilogue());
  }
  return out;
}

}  // namespace

TEST_CASE("reduce flush: qwen3-4b 2 layers, tied + tiled loss + optimizer offload flushes inside layer 0's MLP backward",
          "[sim][memory][reduce_flush]") {
  // embedding 151936*2560 = 388956160 arrives first (tiled loss), final norm 2560, layer 1:
  // q 10485760 + k, v 2*2621440 + o 10485760 + q/k norms 256 + mlp 3*24903680 + norms 5120 = 100930816:
  // bucket 489889536; layer 0's down projection (24903680) overflows 5e8: flush in the MLP backward.
  // Epilogue: flat bf16 bucket 2*489889536 = 979779072, plus the embedding's offload copy
  // 2*388956160 = 777912320 and the larger of the fp64 norm chunk 8*250e6 = 2e9 and fp32 4*388956160.
  const auto f = reduce_flushes(qwen3_4b(2), offload_plan(true), 1, false);
  CHECK(at(f, FlushAt::mlp) == 979779072.0 + 777912320.0 + 2e9);
  CHECK(at(f, FlushAt::attn) == 0);
  CHECK(at(f, FlushAt::qkv) == 0);
  // untiled loss: the tied weight arrives last, after the layers, and nothing flushes inside a layer
  const auto g = reduce_flushes(qwen3_4b(2), offload_plan(false), 1, false);
  CHECK(at(g, FlushAt::mlp) == 0);
  CHECK(at(g, FlushAt::between) > 0);
}

TEST_CASE("reduce flush: llama-3.1-8b 2 layers flushes only between layers (the lm_head alone fills the bucket)",
          "[sim][memory][reduce_flush]") {
  ModelSpec m = test::llama31_8b();
  m.layers = 2;
  const auto f = reduce_flushes(m, offload_plan(true), 1, false);
  CHECK(at(f, FlushAt::mlp) == 0);
  CHECK(at(f, FlushAt::attn) == 0);
  CHECK(at(f, FlushAt::qkv) == 0);
  // lm_head 128256*4096 = 525336576 flushed alone at the final norm (and the embedding, as large, alone at the
  // end): one tensor is reduced in place (coalesced_collectives.py 102-104, no flat copy); the offload copy
  // 2*525336576 and the fp32 copy 4*525336576 (larger than the fp64 chunk 8*250e6)
  CHECK(at(f, FlushAt::between) == 6 * 525336576.0);
  // without offload: the one flush of several tensors, the final norm 4096 and both layers' 2*218112000 when the
  // embedding arrives, flattened in bf16
  Plan p = offload_plan(true);
  p.offload_optimizer = false;
  CHECK(at(reduce_flushes(m, p, 1, false), FlushAt::between) == 2 * (4096 + 2 * 218112000.0));
}

TEST_CASE("reduce flush: at sp > 1 the bucket is reduced in fp32 (DeepSpeed's seq-parallel communication dtype)",
          "[sim][memory][reduce_flush]") {
  ModelSpec m = test::llama31_8b();
  m.layers = 2;
  Plan p = offload_plan(true);
  p.offload_optimizer = false;
  // N = 8: the lm_head (525336576 > 5e8, divisible by 8) flushed alone at the final norm: its fp32 copy
  // (stage3.py 1920, 4 B per element), reduced in place (one tensor: no concatenation), and its bf16 partition
  // 2 * ceil(525336576 / 8) = 131334144; larger than the layers' flush (fp32 concatenation of 436228096 elements
  // and their partitions: 4 * 436228096 + 2 * 54528512)
  CHECK(at(reduce_flushes(m, p, 8, true), FlushAt::between) == 4 * 525336576.0 + 131334144.0);
  // with optimizer offload the partition_grads epilogue follows once the fp32 tensors are gone: the larger wins
  p.offload_optimizer = true;
  const double part = 65667072;  // ceil(525336576 / 8)
  const double offload = 2 * part + std::max(8 * std::min(part, 250e6), 4 * part);
  CHECK(at(reduce_flushes(m, p, 8, true), FlushAt::between) == std::max(4 * 525336576.0 + 2 * part, 2 * part + offload));
  // a tensor N does not divide is concatenated with its padding (counted without it)
  CHECK(at(reduce_flushes(m, p, 7, true), FlushAt::between) ==
        std::max(8 * 525336576.0 + 2 * std::ceil(525336576.0 / 7),
                 2 * std::ceil(525336576.0 / 7) + 2 * std::ceil(525336576.0 / 7) +
                     std::max(8 * std::min(std::ceil(525336576.0 / 7), 250e6), 4 * std::ceil(525336576.0 / 7))));
  // a bucket of layer gradients that fit the buffer: no fp32 copies, the concatenation only
  ModelSpec small = m;
  small.vocab = 1000;  // the head fits the bucket
  p.offload_optimizer = false;
  const auto f = reduce_flushes(small, p, 8, true);
  const auto g = plain_walk(small, p, 8, true);
  for (int i = 0; i < kFlushPlaces; ++i) CHECK(f.epilogue_bytes[i] == g.epilogue_bytes[i]);
}

TEST_CASE("reduce flush: the cycle jump equals walking every layer", "[sim][memory][reduce_flush]") {
  for (ModelSpec m : {test::llama31_8b(), test::llama31_70b(), qwen3_4b(36)}) {
    for (std::int64_t layers : {1, 2, 3, 7, 32, 80, 126}) {
      m.layers = layers;
      for (double N : {1.0, 8.0, 64.0})
        for (bool tiled : {false, true})
          for (double bucket : {5e8, 2e8, 1.3e9}) {
            Plan p = offload_plan(tiled);
            p.reduce_bucket_size = bucket;
            for (bool sp : {false, true}) {
              const auto a = reduce_flushes(m, p, std::int64_t(N), sp);
              const auto b = plain_walk(m, p, N, sp);
              for (int i = 0; i < kFlushPlaces; ++i) {
                INFO(m.name << " L=" << layers << " N=" << N << " tiled=" << tiled << " bucket=" << bucket << " sp=" << sp
                            << " place " << i);
                CHECK(a.epilogue_bytes[i] == b.epilogue_bytes[i]);
              }
            }
          }
    }
  }
}

TEST_CASE("reduce flush: the epilogue binds where the flush moment exceeds every other moment", "[sim][memory][reduce_flush]") {
  // qwen3-4b 2 layers, every ALST feature, one GPU: at 76800 tokens the MLP-backward flush
  // (backward.mlp + 3.76e9 B) exceeds backward.norm; the breakdown puts it in grad_reduce_buffers
  Scenario sc = test::make_scenario(qwen3_4b(2), test::h200_sxm(), 1, 1, 76800);
  sc.plan.tiled_logits = sc.plan.tiled_mlp = sc.plan.offload_checkpoints = true;
  const Prediction p = predict(sc);
  CHECK(std::string(p.gpu_peak_at) == "backward.mlp+reduce");
  core::bytes_t reduce = 0;
  for (int i = 0; i < p.gpu.n; ++i)
    if (std::string(p.gpu.terms[i].name) == "grad_reduce_buffers") reduce = p.gpu.terms[i].bytes;
  CHECK(reduce == core::bytes_t(1000000000) + core::bytes_t(979779072) + core::bytes_t(777912320) + core::bytes_t(2000000000));
  // without optimizer offload the epilogue is the flat buffer only and the norm backward binds again
  sc.plan.offload_optimizer = false;
  CHECK(std::string(predict(sc).gpu_peak_at) != "backward.mlp+reduce");
}
