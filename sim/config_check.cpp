// Cross-key rules of a scenario (docs/INPUTS.md "Rules"). check() returns a stable text per
// rule (sweeps count skipped points by it); validate() throws it with the offending values.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "core/heads.hpp"
#include "sim/checked.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/limits.hpp"

namespace ulysses {

namespace {

struct Violation {
  std::string key;     // dotted key to blame
  std::string rule;    // stable text, no values
  std::string detail;  // the values that break it
};

std::optional<Violation> first_violation(const Scenario& sc) {
  const ModelSpec& m = sc.model;
  const Plan& p = sc.plan;
  const HardwareProfile& hw = sc.hw;
  const auto positive = [](const char* key, std::int64_t v) -> std::optional<Violation> {
    if (v > 0) return std::nullopt;
    return Violation{key, "must be positive", fmt::format("got {}", v)};
  };
  const auto pos_d = [](const char* key, double v) -> std::optional<Violation> {
    if (v > 0) return std::nullopt;
    return Violation{key, "must be positive", fmt::format("got {}", v)};
  };
  const auto at_most = [](const char* key, std::int64_t v, std::int64_t max) -> std::optional<Violation> {
    if (v <= max) return std::nullopt;
    return Violation{key, fmt::format("must be at most {} (docs/INPUTS.md \"Limits\")", max), fmt::format("got {}", v)};
  };
  const auto frac = [](const char* key, double v) -> std::optional<Violation> {
    if (v > 0 && v <= 1) return std::nullopt;
    return Violation{key, "must be a fraction of peak in (0, 1]", fmt::format("got {}", v)};
  };

  // Model architecture.
  for (const auto& [key, v] : {std::pair{"model.layers", m.layers}, {"model.hidden", m.hidden}, {"model.heads", m.heads},
                               {"model.kv_heads", m.kv_heads}, {"model.head_dim", m.head_dim},
                               {"model.ffn_hidden", m.ffn_hidden}, {"model.vocab", m.vocab}})
    if (auto bad = positive(key, v)) return bad;
  for (const auto& [key, v, max] : {std::tuple{"model.layers", m.layers, kMaxLayers},
                                    {"model.hidden", m.hidden, kMaxHidden}, {"model.heads", m.heads, kMaxHeads},
                                    {"model.kv_heads", m.kv_heads, kMaxHeads}, {"model.head_dim", m.head_dim, kMaxHeadDim},
                                    {"model.ffn_hidden", m.ffn_hidden, kMaxFfn}, {"model.vocab", m.vocab, kMaxVocab}})
    if (auto bad = at_most(key, v, max)) return bad;
  if (m.heads * m.head_dim > kMaxHidden)
    return Violation{"model.head_dim", fmt::format("heads * head_dim must be at most {} (docs/INPUTS.md \"Limits\")", kMaxHidden),
                     fmt::format("heads {}, head_dim {}", m.heads, m.head_dim)};
  if (!core::kv_heads_divide(m.heads, m.kv_heads))
    return Violation{"model.kv_heads", "must divide model.heads", fmt::format("heads {}, kv_heads {}", m.heads, m.kv_heads)};

  // Hardware profile.
  for (const auto& [key, v] : {std::pair{"profile.hbm_GiB", static_cast<double>(hw.hbm_bytes)},
                               {"profile.bf16_dense_TFLOPs", hw.bf16_dense_flops}, {"profile.hbm_GBps", hw.hbm_GBps},
                               {"profile.nvlink_GBps", hw.nvlink_GBps}, {"profile.gpus_per_node", static_cast<double>(hw.gpus_per_node)},
                               {"profile.host_ram_GiB", static_cast<double>(hw.host_ram_bytes)},
                               {"profile.host_link_GBps", hw.host_link_GBps}, {"profile.nic_GBps", hw.nic_GBps}})
    if (auto bad = pos_d(key, v)) return bad;
  for (const auto& [key, v] : {std::pair{"profile.attn_fwd_eff", hw.attn_fwd_eff}, {"profile.attn_bwd_eff", hw.attn_bwd_eff},
                               {"profile.gemm_eff", hw.gemm_eff}, {"profile.a2a_link_eff", hw.a2a_link_eff}})
    if (auto bad = frac(key, v)) return bad;
  if (hw.a2a_alpha_s < 0 || hw.cuda_context_bytes < 0 || hw.nccl_buffer_bytes < 0)
    return Violation{"profile", "a2a_alpha_us, cuda_context_GiB and nccl_buffer_GiB must not be negative", ""};

  // Cluster and plan sizes.
  if (auto bad = positive("gpus", sc.gpus)) return bad;
  if (sc.gpus_per_node < 0) return Violation{"gpus_per_node", "must be positive (or 0: the profile's)", fmt::format("got {}", sc.gpus_per_node)};
  if (sc.host_ram_bytes < 0) return Violation{"host_mem_GiB", "must be positive (or 0: the profile's)", ""};
  if (auto bad = positive("plan.sp_size", p.sp_size)) return bad;
  if (auto bad = positive("plan.dp_replicate_size", p.dp_replicate_size)) return bad;
  if (p.dp_shard_auto && p.dp_shard_size <= 0)
    return Violation{"plan.dp_shard_size", "auto needs gpus to be a multiple of sp_size * dp_replicate_size",
                     fmt::format("gpus {}, sp_size {}, dp_replicate_size {}", sc.gpus, p.sp_size, p.dp_replicate_size)};
  if (auto bad = positive("plan.dp_shard_size", p.dp_shard_size)) return bad;
  if (auto bad = positive("plan.micro_batch_size", p.micro_batch_size)) return bad;
  if (auto bad = positive("plan.seq_len", p.seq_len)) return bad;
  if (p.pad_to_multiple_of < 0)
    return Violation{"plan.pad_to_multiple_of", "must not be negative", fmt::format("got {}", p.pad_to_multiple_of)};
  for (const auto& [key, v, max] : {std::tuple{"gpus", sc.gpus, kMaxGpus}, {"gpus_per_node", sc.gpus_per_node, kMaxGpus},
                                    {"plan.sp_size", p.sp_size, kMaxGpus},
                                    {"plan.dp_replicate_size", p.dp_replicate_size, kMaxGpus},
                                    {"plan.dp_shard_size", p.dp_shard_size, kMaxGpus},
                                    {"plan.micro_batch_size", p.micro_batch_size, kMaxSeqLen},
                                    {"plan.seq_len", p.seq_len, kMaxSeqLen},
                                    {"plan.pad_to_multiple_of", p.pad_to_multiple_of, kMaxSeqLen}})
    if (auto bad = at_most(key, v, max)) return bad;
  {  // B * S and the padded S (ceil(S / lcm(pad, sp)) * lcm) stay within the largest S
    const auto tokens = checked_mul(p.micro_batch_size, p.seq_len);
    if (!tokens || *tokens > kMaxSeqLen)
      return Violation{"plan.micro_batch_size", fmt::format("micro_batch_size * seq_len must be at most {} tokens (docs/INPUTS.md \"Limits\")", kMaxSeqLen),
                       fmt::format("{} * {}", p.micro_batch_size, p.seq_len)};
    if (p.pad_to_multiple_of > 0) {
      const auto m = checked_lcm(p.pad_to_multiple_of, p.sp_size);
      const auto padded = m ? checked_round_up(p.seq_len, *m) : std::nullopt;
      const auto padded_tokens = padded ? checked_mul(p.micro_batch_size, *padded) : std::nullopt;
      if (!padded_tokens || *padded_tokens > kMaxSeqLen)
        return Violation{"plan.pad_to_multiple_of", fmt::format("micro_batch_size * padded seq_len must be at most {} tokens (docs/INPUTS.md \"Limits\")", kMaxSeqLen),
                         fmt::format("seq_len {} padded to a multiple of lcm({}, {})", p.seq_len, p.pad_to_multiple_of, p.sp_size)};
    }
  }
  if (!(p.reduce_bucket_size > 0 && p.reduce_bucket_size <= double(kMaxSeqLen)))
    return Violation{"plan.reduce_bucket_size", fmt::format("must be positive and at most {}", kMaxSeqLen), fmt::format("got {}", p.reduce_bucket_size)};
  if (p.zero_stage < 0 || p.zero_stage > 3)
    return Violation{"plan.zero_stage", "must be 0, 1, 2 or 3", fmt::format("got {}", p.zero_stage)};
  if (std::find(attn_implementations().begin(), attn_implementations().end(), p.attn_implementation) ==
      attn_implementations().end())
    return Violation{"plan.attn_implementation", "unknown implementation", fmt::format("got '{}'", p.attn_implementation)};

  // World size.
  if (p.dp_replicate_size * p.dp_shard_size * p.sp_size != sc.gpus)
    return Violation{"gpus", "must equal dp_replicate_size * dp_shard_size * sp_size",
                     fmt::format("gpus {}, {} * {} * {} = {}", sc.gpus, p.dp_replicate_size, p.dp_shard_size, p.sp_size,
                                 p.dp_replicate_size * p.dp_shard_size * p.sp_size)};

  // Ulysses head rules (docs/DESIGN.md): heads split over sp ranks; kv heads split or replicated.
  const core::HeadRule heads = core::sp_head_rule(m.heads, m.kv_heads, p.sp_size);
  if (heads == core::HeadRule::heads_divisible_by_sp)
    return Violation{"plan.sp_size", "model.heads must be divisible by sp_size", fmt::format("heads {}, sp_size {}", m.heads, p.sp_size)};
  if (heads == core::HeadRule::kv_heads_split_or_replicated)
    return Violation{"plan.sp_size", "model.kv_heads must divide or be divisible by sp_size",
                     fmt::format("kv_heads {}, sp_size {}", m.kv_heads, p.sp_size)};
  if (p.pad_to_multiple_of == 0 && p.seq_len % p.sp_size != 0)
    return Violation{"plan.seq_len", "must be divisible by sp_size (or set plan.pad_to_multiple_of)",
                     fmt::format("seq_len {}, sp_size {}", p.seq_len, p.sp_size)};

  // Feature dependencies (DeepSpeed ZeRO semantics).
  if (p.offload_params && p.zero_stage != 3)
    return Violation{"plan.offload_params", "needs zero_stage 3", fmt::format("zero_stage {}", p.zero_stage)};
  if (p.offload_optimizer && p.zero_stage == 0)
    return Violation{"plan.offload_optimizer", "needs zero_stage 1, 2 or 3", "zero_stage 0"};
  if (p.offload_checkpoints && !p.activation_checkpointing)
    return Violation{"plan.offload_checkpoints", "needs activation_checkpointing", "activation_checkpointing false"};
  return std::nullopt;
}

}  // namespace

std::string check(const Scenario& sc) {
  const auto v = first_violation(sc);
  return v ? v->key + ": " + v->rule : "";
}

void validate(const Scenario& sc, const std::string& origin) {
  const auto v = first_violation(sc);
  if (!v) return;
  const bool is_flag = !origin.empty() && origin[0] == '-';
  const std::string rule = v->detail.empty() ? v->rule : v->rule + " (" + v->detail + ")";
  throw core::InputError(is_flag ? "" : origin, v->key, rule);  // command-line scenarios: "command line: ..."
}

}  // namespace ulysses
