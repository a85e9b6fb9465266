#include "runtime/backend.hpp"

#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/heads.hpp"

namespace ulysses::runtime {

namespace {
core::InputError no_whole_steps(const std::string& backend) {
  return core::InputError("", "--scope", fmt::format("step: the {} backend runs the attention block only (whole steps: --backend cuda or deepspeed)", backend));
}
}  // namespace

StepMeasurement Backend::run_step(const Scenario&, const StepRunOptions&, const std::string&) { throw no_whole_steps(name()); }

ProbeResult Backend::probe_steps(const Scenario&, const std::vector<std::int64_t>&, std::int64_t, const std::string&) {
  throw no_whole_steps(name());
}

std::string validate(const BlockShape& s) {
  if (s.B <= 0 || s.S <= 0 || s.H <= 0 || s.H_kv <= 0 || s.D <= 0 || s.P <= 0)
    return "B, S, H, H_kv, D and P must be positive";
  switch (core::head_rule(s.H, s.H_kv, s.P)) {
    case core::HeadRule::kv_heads_divide_heads:
      return fmt::format("heads ({}) must be a multiple of kv_heads ({})", s.H, s.H_kv);
    case core::HeadRule::heads_divisible_by_sp: return fmt::format("heads ({}) must be divisible by sp_size ({})", s.H, s.P);
    case core::HeadRule::kv_heads_split_or_replicated:
      return fmt::format("kv_heads ({}) must divide or be divisible by sp_size ({})", s.H_kv, s.P);
    case core::HeadRule::ok: break;
  }
  if (s.S % s.P != 0) return fmt::format("seq_len ({}) must be divisible by sp_size ({})", s.S, s.P);
  return "";
}

BlockShape block_shape_of(const Scenario& sc) {
  BlockShape b;
  b.B = sc.plan.micro_batch_size;
  const std::int64_t P = sc.plan.sp_size;
  b.S = sc.plan.seq_len;  // unpadded: validate() rejects S % P != 0
  if (sc.plan.pad_to_multiple_of > 0) {
    const std::int64_t mult = std::lcm(P, sc.plan.pad_to_multiple_of);
    b.S = (sc.plan.seq_len + mult - 1) / mult * mult;
  }
  b.H = sc.model.heads;
  b.H_kv = sc.model.kv_heads;
  b.D = sc.model.head_dim;
  b.P = P;
  b.causal = sc.workload.causal;
  b.kv_strategy = sc.plan.kv_strategy;
  b.attn_implementation = sc.plan.attn_implementation;
  return b;
}

}  // namespace ulysses::runtime
