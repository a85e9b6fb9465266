// The bucket walk of DeepSpeed 0.19.8 ZeRO-3 (docs/MODEL.md "Reduce epilogue"): stage3.py
// reduce_independent_p_g_buckets_and_remove_grads (1569-1590) flushes the bucket when the arriving
// gradient would overflow it and the bucket is not empty; the flush's epilogue is the flattened bucket
// of reduce_scatter_coalesced and, with offload_optimizer, per parameter partition_grads' GPU copy
// (2028) plus the larger of the fp64 norm chunk (_constant_buffered_norm2, 1960-1966, at most 250M
// elements) and the fp32 copy for the host (_offload_grad_partition_at_boundary, 1451). At sp > 1 the
// bucket is reduced in fp32 (constants.py 236): __avg_scatter_grads (1915-1941) makes the gradients too
// large for the bucket's buffer fp32 (1920), reduce_scatter_coalesced concatenates the bucket in fp32
// (coalesced_collectives.py 122) and the partitions are made bf16 (1940) while those live; the fp32
// ones are gone before partition_grads.
#include "sim/reduce_flush.hpp"

#include <algorithm>
#include <cmath>

#include "sim/model.hpp"

namespace ulysses {
namespace {


struct Walk {
  double bucket_limit = 0;
  double zero_group = 1;
  bool comm_fp32 = false, offload = false;
  double elems = 0;      // gradients in the bucket
  int count = 0;         // how many
  double big = 0;        // of them, those too large for the bucket's buffer (their own bf16 tensors)
  double max_param = 0;  // the largest offload epilogue of one parameter in the bucket (bytes)
  ReduceFlushes out;

  double param_epilogue(double numel) const {
    if (!offload) return 0;
    const double part = std::ceil(numel / zero_group);
    return 2 * part + std::max(8 * std::min(part, kNormChunkElems), 4 * part);
  }
  void flush(FlushAt at) {
    // bf16 (sp = 1): the flat bf16 bucket, which the partitions view, through partition_grads; fp32 (sp > 1):
    // the fp32 copies of the large gradients, the fp32 concatenation and the bf16 partitions, then the
    // partitions through partition_grads
    // one tensor that N divides is reduced in place, not concatenated (coalesced_collectives.py 102-104): a
    // gradient too large for the buffer always flushes alone
    const double part = std::ceil(elems / zero_group);
    const double cat = count == 1 && std::fmod(elems, zero_group) == 0 ? 0 : elems;
    const double bytes = comm_fp32 ? std::max(4 * big + 4 * cat + 2 * part, 2 * part + max_param) : 2 * cat + max_param;
    double& e = out.epilogue_bytes[static_cast<int>(at)];
    e = std::max(e, bytes);
    elems = 0, count = 0, big = 0, max_param = 0;
  }
  void arrive(double numel, FlushAt at) {
    if (elems + numel > bucket_limit && elems > 0) flush(at);
    if (numel > bucket_limit) big += numel;  // __add_grad_to_ipg_bucket (1625): not copied into the buffer
    elems += numel, ++count;
    max_param = std::max(max_param, param_epilogue(numel));
  }
};

FlushAt place(LayerParamRole r) {
  using R = LayerParamRole;
  switch (r) {
    case R::down: case R::up: case R::gate: return FlushAt::mlp;
    case R::post_norm: case R::o: return FlushAt::attn;
    case R::input_norm: return FlushAt::between;
    default: return FlushAt::qkv;
  }
}
int rank(LayerParamRole r) {
  using R = LayerParamRole;
  constexpr R order[] = {R::down, R::up, R::gate, R::post_norm, R::o, R::k_norm, R::q_norm,
                         R::v_bias, R::v, R::k_bias, R::k, R::q_bias, R::q, R::input_norm};
  for (int i = 0; i < kMaxLayerParams; ++i)
    if (order[i] == r) return i;
  return kMaxLayerParams;
}

}  // namespace

LayerParams layer_params_in_backward_order(const ModelSpec& mo) {
  LayerParams lp = layer_params(mo);
  std::sort(lp.p, lp.p + lp.n, [](const LayerParam& a, const LayerParam& b) { return rank(a.role) < rank(b.role); });  // ranks are unique; no heap (predict() allocates nothing)
  return lp;
}

ReduceFlushes reduce_flushes(const ModelSpec& mo, const Plan& pl, std::int64_t zero_group, bool seq_parallel) {
  return reduce_flushes(mo, BucketPlan{pl.reduce_bucket_size, pl.offload_optimizer, pl.tiled_logits}, zero_group, seq_parallel);
}

ReduceFlushes reduce_flushes(const ModelSpec& mo, const BucketPlan& pl, std::int64_t zero_group, bool seq_parallel) {
  Walk w;
  w.bucket_limit = pl.reduce_bucket_size;
  w.zero_group = static_cast<double>(std::max<std::int64_t>(zero_group, 1));
  w.comm_fp32 = seq_parallel;
  w.offload = pl.offload_optimizer;
  const LayerParams lp = layer_params_in_backward_order(mo);
  const double head = double(mo.vocab) * double(mo.hidden);
  // The lm_head's gradient arrives first, in the logits backward; a tied one (the embedding) only
  // once all its uses are accumulated, at the end, unless the tiled loss accumulates it in its own
  // inner backward (DeepSpeed's TiledFusedLogitsLoss marks it ready at its last tile): then the
  // embedding's backward brings the same parameter a second time (the allocator recordings show both
  // flushes, docs/MODEL.md "Reserved memory").
  const bool head_first = !mo.tied_embeddings || pl.tiled_logits;
  if (head_first) w.arrive(head, FlushAt::between);
  w.arrive(double(mo.hidden), FlushAt::between);  // final norm
  // Layers repeat: the walk's state at a layer boundary determines the rest, so once a state
  // recurs the remaining layers retrace a cycle already walked; jump to the state after the last.
  // (A fixed table: predict() allocates nothing; past it the walk simply goes on layer by layer.)
  constexpr int kSeen = 64;
  double seen_elems[kSeen], seen_big[kSeen], seen_max[kSeen];
  int seen_count[kSeen];
  int n_seen = 0;
  for (std::int64_t l = 0; l < mo.layers; ++l) {
    int k = 0;
    while (k < n_seen && !(seen_elems[k] == w.elems && seen_count[k] == w.count && seen_big[k] == w.big &&
                           seen_max[k] == w.max_param))
      ++k;
    if (k < n_seen) {
      const std::int64_t cycle = l - k, end = k + (mo.layers - l) % cycle;
      if (end < n_seen) {
        w.elems = seen_elems[end], w.count = seen_count[end], w.big = seen_big[end], w.max_param = seen_max[end];
        break;
      }
    }
    if (n_seen < kSeen && n_seen == l) {
      seen_elems[n_seen] = w.elems, seen_count[n_seen] = w.count, seen_big[n_seen] = w.big, seen_max[n_seen] = w.max_param;
      ++n_seen;
    }
    for (int i = 0; i < lp.n; ++i) w.arrive(double(lp.p[i].numel), place(lp.p[i].role));
  }
  w.arrive(head, FlushAt::between);  // the embedding
  if (w.elems > 0) w.flush(FlushAt::between);  // the backward's epilogue
  return w.out;
}

}  // namespace ulysses
