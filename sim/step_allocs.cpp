// The PyTorch runtime's allocations in order (sim/step_allocs.hpp): the generator's state, DeepSpeed's
// engine construction and the run of whole steps. Each block names the source lines (DeepSpeed 0.19.8)
// of the allocations it emits, as the recorded frames show them.
#include "sim/step_allocs.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/bf16.hpp"
#include "sim/model.hpp"
#include "sim/model_terms.hpp"
#include "sim/timing.hpp"

namespace ulysses {

TrainingAllocs::TrainingAllocs(const Scenario& sc, CachingAllocatorSim& a, std::vector<std::int64_t>* log,
                               DeferredFree deferred)
    : sc_(sc), d_(derive_dims(sc)), a_(a), log_(log), policy_(deferred) {
  const std::int64_t T = d_.B * d_.S_l;
  th_ = T * d_.h * kBf16;
  q_ = T * d_.H * d_.D * kBf16;
  kv_ = T * d_.H_kv * d_.D * kBf16;
  mlp_ = T * d_.F * kBf16;
}

bool TrainingAllocs::construction_covered() const {
  const Plan& pl = sc_.plan;
  // one rank: the recordings' runs (more ranks add the collectives' buffers, not generated)
  return pl.zero_stage >= 3 && pl.dp_shard_size * pl.sp_size * pl.dp_replicate_size == 1 && sc_.gpus == 1 &&
         !pl.offload_params;
}

bool TrainingAllocs::step_covered() const {
  const Plan& pl = sc_.plan;
  // what the sequence was taken from: HF's sdpa attention (cuDNN on Hopper: sim/torch_scratch.cpp's
  // workspace, and its reduction buffers for 132 SMs: H100 / H200 SXM), no q/k/v biases (their
  // gradients' reductions are not generated), torch AdamW on the GPU (FusedAdam's temporaries are not)
  const std::string& gpu = sc_.hw.gpu;
  const bool hopper_sxm = gpu.find("H100 SXM") != std::string::npos || gpu.find("H200 SXM") != std::string::npos;
  if (!hopper_sxm || pl.attn_implementation != "sdpa" || sc_.model.qkv_bias || (!pl.offload_optimizer && !pl.torch_adam))
    return false;
  // checkpoint offload: with TiledMLP (the recorded plans; the untiled MLP's own graph is not generated)
  return construction_covered() && pl.activation_checkpointing && (!pl.offload_checkpoints || pl.tiled_mlp) &&
         pl.rmsnorm_implementation == RmsNormImpl::eager && pl.micro_batch_size == 1;
}

TrainingAllocs::Id TrainingAllocs::alloc(std::int64_t bytes, int stream) {
  if (bytes < kStepAllocsMinBytes) return -1;
  // the allocator processes the streams' completed events first (CUDACachingAllocator malloc ->
  // process_events)
  if (policy_ == DeferredFree::next_alloc) release_deferred();
  if (policy_ == DeferredFree::given) {
    if (completions_ == nullptr) throw std::logic_error("TrainingAllocs: DeferredFree::given without set_completions()");
    auto due = [&](Id id) {
      const auto i = static_cast<std::size_t>(id);
      return i >= completions_->size() || (*completions_)[i] < 0 || (*completions_)[i] <= emitted_;
    };
    for (Id id : deferred_)
      if (due(id)) complete(id);
    deferred_.erase(std::remove_if(deferred_.begin(), deferred_.end(), due), deferred_.end());
  }
  if (log_) log_->push_back(bytes);
  ++emitted_;
  return a_.malloc(bytes, stream);
}

void TrainingAllocs::free(Id& id) {
  if (id >= 0) a_.free(id);
  id = -1;
}

void TrainingAllocs::free_later(Id& id) {
  if (id >= 0) deferred_.push_back(id);
  if (id >= 0 && deferred_log_) deferred_log_->push_back({id, emitted_});
  id = -1;
}

bool TrainingAllocs::ckpt_frees_timed() const {
  const Plan& pl = sc_.plan;
  return policy_ == DeferredFree::next_alloc && pl.offload_checkpoints && pl.tiled_logits;
}

std::int64_t TrainingAllocs::ckpt_release_tile() const {
  // not before the first tile after the loss's synchronization: the copy (checkpoint bytes at the busy link's rate,
  // 10-15 ms in the recorded cases) outlasts the final norm that the GPU runs between the last layer and the sync
  const double tile_s = sc_.hw.has_calibration ? sc_.hw.calibrated.pytorch_host_logits_tile_s : -1;
  if (tile_s <= 0) return 1;  // not measured: a host that issues a tile in at least the copy's time
  const double copy_s = static_cast<double>(th_) / (host_d2h_busy_GBps(sc_) * 1e9);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(copy_s / tile_s)));
}

void TrainingAllocs::free_after_copy(Id& id) {
  if (!ckpt_frees_timed()) return free_later(id);
  if (id >= 0) ckpt_held_.push_back(id);
  if (id >= 0 && deferred_log_) deferred_log_->push_back({id, emitted_});
  id = -1;
}

void TrainingAllocs::complete(Id id) {
  a_.free(id);
  if (completed_log_) completed_log_->push_back({id, emitted_});
}

void TrainingAllocs::release_deferred() {
  for (Id id : deferred_) complete(id);
  deferred_.clear();
}

void TrainingAllocs::construction() {
  if (!construction_covered()) return;
  const Plan& pl = sc_.plan;
  const std::vector<std::int64_t> numels = parameter_numels(sc_.model);
  std::int64_t total = 0;
  for (std::int64_t n : numels) total += n;
  // zero.Init: each module's parameter is created on the GPU (partition_parameters.py 269, inside the
  // module's __init__), its partition copied out (1836 _partition_param: at one partition the whole
  // tensor) and the module's tensor freed; with tied embeddings the lm_head's own weight as well
  const std::vector<std::int64_t> created = parameter_numels(sc_.model, true);
  std::vector<Id> parts;
  for (std::int64_t n : created) {
    Id full = alloc(n * kBf16);
    parts.push_back(alloc(n * kBf16));
    free(full);
  }
  // the engine gathers every parameter once (2142 _allgather_params_sequential), one at a time; then
  // a tied lm_head's own partition goes (the weight is the embedding's)
  for (std::int64_t n : created) {
    Id t = alloc(n * kBf16);
    free(t);
  }
  if (created.size() > numels.size()) free(parts.back());
  // _create_fp16_partitions_with_defragmentation (stage3.py 972 -> zero/utils.py defragment): the
  // partitions move to the host, the cache is emptied, one flat bf16 buffer holds them all (utils.py 237)
  for (Id& id : parts) free(id);
  a_.empty_cache();
  alloc(total * kBf16);
  // With offload_optimizer the optimizer's device is the host (stage3.py: self.device): the fp32
  // partitions, the gradient buffer and the gradient partitions below live there.
  const bool on_gpu = !pl.offload_optimizer;
  // _create_fp32_partitions (stage3.py 1170, 1172): per sub-group `converted = ....to(fp32)`, then its
  // `.clone()` kept; the previous `converted` is released when the name is bound to the next one
  const std::vector<double> groups = zero3_sub_groups(sc_.model, 1);
  if (on_gpu) {
    Id converted = -1;
    for (double gd : groups) {
      const auto g = static_cast<std::int64_t>(gd);
      const Id next = alloc(g * kFp32);
      free(converted);
      converted = next;
      alloc(g * kFp32);
    }
    free(converted);
    // initialize_optimizer_states (1306): an fp32 gradient buffer of the largest sub-group, dropped again
    Id buffer = alloc(static_cast<std::int64_t>(*std::max_element(groups.begin(), groups.end())) * kFp32);
    free(buffer);
  }
  // _setup_for_real_optimizer: the contiguous gradients' bucket on the GPU (782, reduce_bucket_size
  // elements) and the flat buffer of the gradient partitions (791, gradient_accumulation_dtype = bf16)
  alloc(static_cast<std::int64_t>(pl.reduce_bucket_size) * kBf16);
  if (on_gpu) alloc(total * kBf16);
  // the second gather pass of every parameter (2142)
  for (std::int64_t n : numels) {
    Id t = alloc(n * kBf16);
    free(t);
  }
}

std::int64_t generated_reserved_peak(const Scenario& sc, int steps) {
  if (!sc.plan.expandable_segments) return -1;
  CachingAllocatorSim a;
  TrainingAllocs gen(sc, a);
  return gen.run(steps) ? a.peak_reserved() : -1;
}

bool TrainingAllocs::run(int steps) {
  if (!step_covered()) return false;
  construction();
  for (int s = 0; s < steps; ++s) {
    forward(s == 0);
    loss(s == 0);
    backward(s == 0);
    optimizer_step(s == 0);
  }
  return true;
}

}  // namespace ulysses
