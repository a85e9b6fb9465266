// The PyTorch runtime's allocations in order (sim/step_allocs.hpp). Each block names the source lines
// (DeepSpeed 0.19.8) of the allocations it emits, as the recorded frames show them.
#include "sim/step_allocs.hpp"

#include <algorithm>
#include <vector>

#include "sim/model.hpp"

namespace ulysses {
namespace {

constexpr std::int64_t kBf16 = 2, kFp32 = 4;
constexpr double kSubGroupElems = 1e9;  // ZeRO-3 sub_group_size default (zero/config.py)

// The model's parameter tensors in registration order (model.parameters()): the embedding, per layer
// layer_params(), the final norm, the lm_head unless tied. Elements.
std::vector<std::int64_t> parameter_numels(const ModelSpec& m) {
  std::vector<std::int64_t> v;
  v.push_back(m.vocab * m.hidden);
  const LayerParams lp = layer_params(m);
  for (std::int64_t l = 0; l < m.layers; ++l)
    for (int i = 0; i < lp.n; ++i) v.push_back(lp.p[i].numel);
  v.push_back(m.hidden);
  if (!m.tied_embeddings) v.push_back(m.vocab * m.hidden);
  return v;
}

// ZeRO-3's optimizer sub-groups (stage3.py _create_fp16_sub_groups): partitions added in model order,
// a group closed when it reaches sub_group_size, the last one at the last parameter. Elements.
std::vector<std::int64_t> sub_groups(const std::vector<std::int64_t>& numels) {
  std::vector<std::int64_t> g;
  std::int64_t cur = 0;
  for (std::int64_t n : numels) {
    cur += n;
    if (static_cast<double>(cur) >= kSubGroupElems) g.push_back(cur), cur = 0;
  }
  if (cur > 0) g.push_back(cur);
  return g;
}

// An allocation the sequence keeps (or frees later) when it is large enough to matter.
struct Emit {
  CachingAllocatorSim& a;
  CachingAllocatorSim::Id alloc(std::int64_t bytes) { return bytes >= kStepAllocsMinBytes ? a.malloc(bytes, 0) : -1; }
  void free(CachingAllocatorSim::Id id) {
    if (id >= 0) a.free(id);
  }
  void transient(std::int64_t bytes) { free(alloc(bytes)); }
};

}  // namespace

bool deepspeed_construction(const Scenario& sc, CachingAllocatorSim& a) {
  const Plan& pl = sc.plan;
  if (pl.zero_stage < 3 || pl.dp_shard_size * pl.sp_size != 1 || pl.offload_params) return false;
  Emit e{a};
  const std::vector<std::int64_t> numels = parameter_numels(sc.model);
  std::int64_t total = 0;
  for (std::int64_t n : numels) total += n;
  // zero.Init: each module's parameter is created on the GPU (partition_parameters.py 269, inside the
  // module's __init__), its partition copied out (1836 _partition_param: at one partition the whole
  // tensor) and the module's tensor freed
  std::vector<CachingAllocatorSim::Id> parts;
  for (std::int64_t n : numels) {
    const auto full = e.alloc(n * kBf16);
    parts.push_back(e.alloc(n * kBf16));
    e.free(full);
  }
  // the engine gathers every parameter once (2142 _allgather_params_sequential), one at a time
  for (std::int64_t n : numels) e.transient(n * kBf16);
  // _create_fp16_partitions_with_defragmentation (stage3.py 972 -> zero/utils.py defragment): the
  // partitions move to the host, the cache is emptied, one flat bf16 buffer holds them all (utils.py 237)
  for (auto id : parts) e.free(id);
  a.empty_cache();
  e.alloc(total * kBf16);
  // With offload_optimizer the optimizer's device is the host (stage3.py: self.device): the fp32
  // partitions, the gradient buffer and the gradient partitions below live there.
  const bool on_gpu = !pl.offload_optimizer;
  // _create_fp32_partitions (stage3.py 1170, 1172): per sub-group `converted = ....to(fp32)`, then its
  // `.clone()` kept; the previous `converted` is released when the name is bound to the next one
  const std::vector<std::int64_t> groups = sub_groups(numels);
  if (on_gpu) {
    CachingAllocatorSim::Id converted = -1;
    for (std::int64_t g : groups) {
      const auto next = e.alloc(g * kFp32);
      e.free(converted);
      converted = next;
      e.alloc(g * kFp32);
    }
    e.free(converted);
    // initialize_optimizer_states (1306): an fp32 gradient buffer of the largest sub-group, dropped again
    e.transient(*std::max_element(groups.begin(), groups.end()) * kFp32);
  }
  // _setup_for_real_optimizer: the contiguous gradients' bucket on the GPU (782, reduce_bucket_size
  // elements) and the flat buffer of the gradient partitions (791, gradient_accumulation_dtype = bf16)
  e.alloc(static_cast<std::int64_t>(pl.reduce_bucket_size) * kBf16);
  if (on_gpu) e.alloc(total * kBf16);
  // the second gather pass of every parameter (2142)
  for (std::int64_t n : numels) e.transient(n * kBf16);
  return true;
}

}  // namespace ulysses
