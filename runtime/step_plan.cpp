// runtime/step_plan.hpp: a scenario to the step runtime's shapes, refusing what it does not run yet.
#include "runtime/step_plan.hpp"

#include <string>

#include <fmt/format.h>

#include "core/attn_impls.hpp"
#include "core/errors.hpp"
#include "sim/memory.hpp"
#include "sim/model.hpp"

namespace ulysses::runtime {
namespace {

void refuse_if(bool cond, const std::string& origin, const std::string& key, const std::string& why) {
  if (cond) throw core::InputError(origin, key, why + " (--backend cuda --scope step does not run it yet; docs/STEP_RUNTIME.md)");
}

}  // namespace

StepShape step_shape_of(const Scenario& sc, const std::string& origin) {
  const Plan& pl = sc.plan;
  const std::int64_t P = pl.sp_size;
  refuse_if(pl.dp_replicate_size != 1 || pl.dp_shard_size != 1, origin,
            pl.dp_replicate_size != 1 ? "plan.dp_replicate_size" : "plan.dp_shard_size",
            "must be 1: the step runs one sequence-parallel group (its ZeRO-3 shards over the sp ranks)");
  refuse_if(sc.gpus != P, origin, "gpus", "must equal plan.sp_size (" + std::to_string(P) + ") with dp 1");
  refuse_if(P > 1 && pl.zero_stage != 3, origin, "plan.zero_stage", "must be 3 at sp > 1 (the step partitions as ZeRO-3)");
  refuse_if(pl.micro_batch_size != 1, origin, "plan.micro_batch_size", "must be 1");
  refuse_if(pl.offload_checkpoints && !pl.activation_checkpointing, origin, "plan.offload_checkpoints",
            "needs plan.activation_checkpointing: true (what is offloaded is the checkpoint)");
  refuse_if(pl.offload_params && pl.zero_stage != 3, origin, "plan.zero_stage", "must be 3 with plan.offload_params");
  refuse_if(pl.offload_params && !pl.offload_optimizer, origin, "plan.offload_params",
            "needs plan.offload_optimizer: true (the host optimizer updates the parameter parts where they live)");
  refuse_if(pl.kv_strategy == KvStrategy::send_once, origin, "plan.kv_strategy", "must be replicate");
  refuse_if(sc.model.qkv_bias, origin, "model.qkv_bias", "q/k/v biases are not in the step's layer");
  refuse_if(!core::find_attn_impl(pl.attn_implementation), origin, "plan.attn_implementation",
            "must be one of the attention implementations core/attn_impls.hpp lists (ulysses_flash, sdpa, ...)");
  const Dims d = derive_dims(sc);
  refuse_if(d.D != 64 && d.D != 128, origin, "model.head_dim", "must be 64 or 128 (our attention kernels)");
  refuse_if(d.h > 16384, origin, "model.hidden", "must be at most 16384 (kernels/layer_ops.cu rmsnorm_bwd)");
  refuse_if(d.h % 8 || d.F % 8 || d.V % 8, origin, "model", "hidden, ffn_hidden and vocab must be multiples of 8 (16-byte rows for cuBLASLt)");
  refuse_if((pl.tiled_logits || pl.tiled_mlp) && d.h % 128, origin, "model.hidden",
            "must be a multiple of 128 with tiled logits or TiledMLP (each shard's rows start 256-byte aligned, as cuBLASLt's "
            "heuristic assumes)");
  if (P > 1) {
    refuse_if(d.S != d.S_l * P || d.S != pl.seq_len, origin, "plan.seq_len",
              "must be a multiple of plan.sp_size (" + std::to_string(P) + ") at sp > 1, unpadded");
    refuse_if(d.H % P != 0 || (d.H_kv % P != 0 && P % d.H_kv != 0), origin, "plan.sp_size",
              fmt::format("must split the heads: model.heads {} a multiple of sp {}, model.kv_heads {} a divisor or multiple of it", d.H, P, d.H_kv));
    refuse_if(d.h % (8 * P) != 0, origin, "model.hidden",
              fmt::format("must be a multiple of 8 x sp = {}: ZeRO-3's parts are not padded", 8 * P));
    refuse_if(sc.model.qk_norm && d.D % (8 * P) != 0, origin, "model.head_dim",
              fmt::format("must be a multiple of 8 x sp = {} with q/k norms: ZeRO-3's parts are not padded", 8 * P));
  }
  refuse_if(d.S_l * d.B > 2147483647 || d.V > 2147483647, origin, "plan.seq_len", "tokens and vocab must fit int32");
  StepShape s;
  s.dims.layer.T = d.B * d.S_l, s.dims.layer.h = d.h, s.dims.layer.H = d.H, s.dims.layer.H_kv = d.H_kv;
  s.dims.layer.D = d.D, s.dims.layer.F = d.F, s.dims.layer.qk_norm = sc.model.qk_norm;
  s.dims.layer.eps = norm_eps_of(sc.model);
  s.rope_theta = rope_theta_of(sc.model);
  s.dims.layer.mlp_shards = d.mlp_shards;  // TiledMLP's rule (derive_dims); 1 shard runs the MLP whole
  s.dims.L = d.L, s.dims.V = d.V, s.dims.tied = sc.model.tied_embeddings;
  s.checkpoint = pl.activation_checkpointing;
  s.offload_checkpoints = pl.offload_checkpoints;
  s.offload_optimizer = pl.offload_optimizer;
  s.offload_params = pl.offload_params;
  s.logits_shards = d.logits_shards;
  s.attn_implementation = pl.attn_implementation;
  s.sp = P;
  return s;
}

}  // namespace ulysses::runtime
