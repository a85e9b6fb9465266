#pragma once
// DeepSpeed ZeRO-3's gradient bucket flushes in the backward: where in a layer each one happens and
// what its epilogue allocates on the reduce stream (docs/MODEL.md "Reduce epilogue").
#include <cstdint>

#include "sim/model.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// Where a flush starts, by the parameter whose gradient arrival overflows the bucket:
// mlp: gate/up/down (inside the MLP backward); attn: post-attention norm or o_proj (before the
// attention backward); qkv: q/k/v projections and q/k norms (after it); between: a layer's input
// norm, the final norm, the embedding / lm_head and the end of the backward (no layer working set).
enum class FlushAt { mlp = 0, attn = 1, qkv = 2, between = 3 };
inline constexpr int kFlushPlaces = 4;

struct ReduceFlushes {
  double epilogue_bytes[kFlushPlaces] = {0, 0, 0, 0};  // the largest flush epilogue at each place; 0: none
};

// _constant_buffered_norm2's chunk (stage3.py 1960-1966: buffer_size=250000000 elements)
inline constexpr double kNormChunkElems = 250000000.0;

// A layer's parameters in the order their gradients arrive in the backward: the MLP (down, up, gate),
// the post-attention norm and o_proj, then after the attention the q/k norms and the v, k, q
// projections, last the input norm.
LayerParams layer_params_in_backward_order(const ModelSpec& mo);

// The reduce bucket (plan.reduce_bucket_size elements) filled in the order gradients arrive, for
// ZeRO stage 3 over N = zero_group ranks. seq_parallel (sp > 1): DeepSpeed reduces in fp32 (the fp32
// concatenation and copies, reduce_flush.cpp says which); else in bf16 (the flattened bf16 bucket).
ReduceFlushes reduce_flushes(const ModelSpec& mo, const Plan& pl, std::int64_t zero_group, bool seq_parallel);
// What of the plan the walk reads (the form above takes them from the Plan).
struct BucketPlan {
  double reduce_bucket_size = 5e8;  // elements
  bool offload_optimizer = false, tiled_logits = false;
};
ReduceFlushes reduce_flushes(const ModelSpec& mo, const BucketPlan& pl, std::int64_t zero_group, bool seq_parallel);

}  // namespace ulysses
