#pragma once
// What the memory model derives from the model and the plan's ZeRO settings alone, never from
// seq_len: the ZeRO-3 bucket flushes, the largest optimizer sub-group, the largest layer gradient
// kept outside the bucket. Computed once per structure: predict() keeps the last few per thread.
#include <cstdint>
#include <vector>

#include "sim/reduce_flush.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

struct Dims;  // sim/memory.hpp

// Every input of ModelTerms (so model_terms() cannot read anything a cache keyed on it misses).
struct ModelTermsKey {
  std::int64_t L = 0, h = 0, H = 0, H_kv = 0, D = 0, F = 0, V = 0;
  bool tied_embeddings = false, qk_norm = false, qkv_bias = false;
  int zero_stage = 0;
  bool offload_optimizer = false, tiled_logits = false;
  double reduce_bucket_size = 0;
  std::int64_t P = 1, zero_group = 1;  // Dims::P, Dims::zero_group
  bool operator==(const ModelTermsKey&) const = default;
};
// d: derive_dims(sc) (sim/memory.hpp), where P and the ZeRO group are derived once
ModelTermsKey model_terms_key(const Scenario& sc, const Dims& d);

struct ModelTerms {
  double layer_grad = 0;         // the largest layer parameter above reduce_bucket_size (elements); 0: none
  ReduceFlushes flushes;         // ZeRO stage 3: the bucket flushes' epilogues; else none
  double largest_sub_group = 0;  // ZeRO stage 3 without optimizer offload (elements); else 0
};
ModelTerms model_terms(const ModelTermsKey& k);

inline constexpr double kZero3SubGroupElems = 1e9;  // DeepSpeed ZeRO-3 sub_group_size default (zero/config.py)

// ZeRO-3's optimizer sub-groups (stage3.py _create_fp16_sub_groups), in elements of one rank's partition
// (N ranks): the parameters' partitions (ceil(numel / N)) added in model order, a group closed when it
// reaches sub_group_size, the last one at the last parameter. Every group, in order.
std::vector<double> zero3_sub_groups(const ModelSpec& mo, double N);
// The largest of them, without the walk's allocations (predict()'s hot path).
double largest_sub_group(const ModelSpec& mo, double N);

}  // namespace ulysses
