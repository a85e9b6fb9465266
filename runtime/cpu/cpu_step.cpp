// The cpu backend's whole step (runtime/cpu/cpu_step.hpp): the scenario to a step input, the validating
// step against the one-rank oracle, the timed steps, the measurement.
#include "runtime/cpu/cpu_step.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/heads.hpp"
#include "core/stats.hpp"
#include "runtime/cpu/cpu_backend.hpp"
#include "runtime/reference_attention.hpp"
#include "runtime/reference_layer.hpp"
#include "sim/limits.hpp"
#include "sim/memory.hpp"
#include "sim/model.hpp"

namespace ulysses::runtime::cpu {
namespace {

void refuse_if(bool cond, const std::string& origin, const std::string& key, const std::string& why) {
  if (cond) throw core::InputError(origin, key, why + " (the cpu step: docs/STEP_RUNTIME.md \"The step on CPU threads\")");
}

// each tensor relative to the largest magnitude of its `want`; `wrong`: elements off by more than tol of that
// scale (a small tensor is not measured against a large one's scale)
StepCheck compare(const std::string& name, const std::vector<const std::vector<double>*>& got,
                  const std::vector<const std::vector<double>*>& want, double tol) {
  StepCheck c{name, 0, 0, 0, tol};
  for (std::size_t i = 0; i < got.size(); ++i) {
    double scale = 1e-300;
    for (double x : *want[i]) scale = std::max(scale, std::fabs(x));
    for (std::size_t j = 0; j < got[i]->size(); ++j) {
      const double e = std::fabs((*got[i])[j] - (*want[i])[j]) / scale;
      c.elements += 1;
      c.wrong += !(e <= tol);  // NaN counts as wrong
      c.max_rel_err = std::max(c.max_rel_err, std::isfinite(e) ? e : INFINITY);
    }
  }
  return c;
}
StepCheck compare_scalar(const std::string& name, double got, double want, double tol) {
  const std::vector<double> g{got}, w{want};
  return compare(name, {&g}, {&w}, tol);
}

// The one-rank step and optimizer (runtime/reference_step.hpp, reference_adam.hpp) against the P-rank step.
std::vector<StepCheck> check_against_one_rank(const SpStepInput& in, const SpStepResult& got) {
  const StepResult want = step_reference(in.dims, in.params, in.tokens, shift_labels(in.tokens), in.cos, in.sin, in.logits_shards);
  const auto g_want = grad_tensors(in.dims, want);
  const ClipResult clip = clip_gradients(g_want, in.adam.max_grad_norm);
  const auto params = param_tensors(in.dims, in.params);
  std::vector<std::vector<double>> masters;
  for (std::size_t i = 0; i < params.size(); ++i) {
    AdamState s = adam_state_from(widen(*params[i]));
    adamw_reference(s, *g_want[i], clip.coef, 1, in.adam);
    masters.push_back(std::move(s.master));
  }
  std::vector<const std::vector<double>*> m_got, m_want;
  for (std::size_t i = 0; i < masters.size(); ++i) m_got.push_back(&got.masters[i]), m_want.push_back(&masters[i]);
  StepCheck bits{"parameters (bf16 bits)", 0, 0, 0, 0};
  const auto upd = param_tensors(in.dims, got.updated);
  for (std::size_t i = 0; i < masters.size(); ++i)
    for (std::size_t j = 0; j < masters[i].size(); ++j) {
      bits.elements += 1;
      bits.wrong += (*upd[i])[j] != core::float_to_bf16(static_cast<float>(masters[i][j]));
    }
  return {compare_scalar("loss", got.loss, want.loss_sum / double(std::max<std::int64_t>(want.valid_tokens, 1)), 1e-10),
          compare("gradients", grad_tensors(in.dims, got.grads), g_want, 1e-9),
          compare_scalar("clip norm", got.clip.norm, clip.norm, 1e-10), compare("masters", m_got, m_want, 1e-10), bits};
}

}  // namespace

double cpu_step_flops(const StepDims& d) {
  const DecoderLayerDims& l = d.layer;
  const double T = double(l.T), h = double(l.h), HD = double(l.H * l.D), KD = double(l.H_kv * l.D), F = double(l.F);
  const double gemms = 2 * T * (h * (HD + 2 * KD) + HD * h + 3 * h * F);
  const double attn = 2 * 2 * T * T / 2 * HD;
  // forward, the backward's recompute, the backward (twice the forward); the loss head forward and backward
  return double(d.L) * 4 * (gemms + attn) + 3 * 2 * T * double(d.V) * h;
}

CpuStepShape cpu_step_shape(const Scenario& sc, int steps, const std::string& origin) {
  const Plan& pl = sc.plan;
  const ModelSpec& mo = sc.model;
  refuse_if(sc.gpus != pl.sp_size, origin, "gpus", fmt::format("must equal plan.sp_size ({}): the ranks are one SP group, dp 1", pl.sp_size));
  refuse_if(pl.dp_replicate_size != 1 || pl.dp_shard_size != 1, origin, pl.dp_replicate_size != 1 ? "plan.dp_replicate_size" : "plan.dp_shard_size",
            "must be 1");
  refuse_if(pl.sp_size > kMaxThreads, origin, "plan.sp_size", fmt::format("at most {} thread-ranks", kMaxThreads));
  refuse_if(pl.micro_batch_size != 1, origin, "plan.micro_batch_size", "must be 1");
  refuse_if(pl.zero_stage != 3, origin, "plan.zero_stage", "must be 3 (the ranks partition parameters, gradients and optimizer state)");
  refuse_if(pl.offload_optimizer || pl.offload_params || pl.offload_checkpoints, origin,
            pl.offload_optimizer ? "plan.offload_optimizer" : pl.offload_params ? "plan.offload_params" : "plan.offload_checkpoints",
            "must be false: the cpu step has no device to offload from");
  refuse_if(mo.qkv_bias, origin, "model.qkv_bias", "q/k/v biases are not in the step's layer");
  refuse_if(pl.seq_len <= 0, origin, "plan.seq_len", "required to run a step (or pass --seq-len)");
  const std::int64_t P = pl.sp_size;
  switch (core::head_rule(mo.heads, mo.kv_heads, P)) {
    case core::HeadRule::ok: break;
    case core::HeadRule::kv_heads_divide_heads: refuse_if(true, origin, "model.kv_heads", "must divide model.heads"); break;
    case core::HeadRule::heads_divisible_by_sp: refuse_if(true, origin, "plan.sp_size", "must divide model.heads"); break;
    case core::HeadRule::kv_heads_split_or_replicated:
      refuse_if(true, origin, "plan.sp_size", "must divide or be a multiple of model.kv_heads");
      break;
  }
  refuse_if(mo.head_dim % 2 != 0, origin, "model.head_dim", "must be even (RoPE rotates pairs)");
  const Dims dd = derive_dims(sc);
  const std::int64_t T = pl.seq_len;
  refuse_if(T % P != 0, origin, "plan.seq_len", fmt::format("must be a multiple of plan.sp_size ({})", P));
  refuse_if(dd.S != T, origin, "plan.seq_len",
            fmt::format("must be a multiple of the padding ({} here would be padded to {}): the cpu step runs no pad tokens", T, dd.S));
  CpuStepShape s;
  auto& ld = s.dims.layer;
  ld.T = T, ld.h = mo.hidden, ld.H = mo.heads, ld.H_kv = mo.kv_heads, ld.D = mo.head_dim, ld.F = mo.ffn_hidden;
  ld.qk_norm = mo.qk_norm, ld.eps = norm_eps_of(mo);
  s.dims.L = mo.layers, s.dims.V = mo.vocab, s.dims.tied = mo.tied_embeddings;
  const double flops = double(steps + 1) * cpu_step_flops(s.dims);  // the P-rank steps and the one-rank oracle
  refuse_if(flops > kCpuStepMaxFlops, origin, "plan.seq_len",
            fmt::format("{} steps and the oracle are {:.1e} fp64 FLOPs, above {:.0e}: the cpu step is a check at tiny shapes "
                        "(fewer tokens, --layers, --iters, or a smaller model)", steps, flops, kCpuStepMaxFlops));
  s.logits_shards = dd.logits_shards;
  return s;
}

SpStepInput cpu_step_input(const Scenario& sc, std::uint64_t seed, int steps, const std::string& origin) {
  const CpuStepShape shape = cpu_step_shape(sc, steps, origin);
  SpStepInput in;
  in.dims = shape.dims;
  in.logits_shards = shape.logits_shards;
  const DecoderLayerDims& ld = in.dims.layer;
  const std::int64_t T = ld.T;
  // parameters and tokens from the seed: one stream per tensor
  std::uint64_t stream = seed * 1000003ull;
  const auto draw = [&](std::int64_t n, float scale) { return random_bf16(n, ++stream, scale); };
  const std::int64_t h = ld.h, HD = ld.H * ld.D, KD = ld.H_kv * ld.D, F = ld.F;
  in.params.embed = draw(in.dims.V * h, 1.f);
  in.params.w_final = draw(h, 1.f);
  if (!in.dims.tied) in.params.lm_head = draw(in.dims.V * h, 0.3f);
  for (std::int64_t l = 0; l < in.dims.L; ++l) {
    DecoderLayerParams<std::vector<core::bf16>> p{draw(h, 1.f),      draw(HD * h, 0.3f), draw(KD * h, 0.3f),
                                                  draw(KD * h, 0.3f), draw(h * HD, 0.3f), draw(h, 1.f),
                                                  draw(F * h, 0.3f),  draw(F * h, 0.3f),  draw(h * F, 0.3f), {}, {}};
    if (ld.qk_norm) p.wqn = draw(ld.D, 1.f), p.wkn = draw(ld.D, 1.f);
    in.params.layers.push_back(std::move(p));
  }
  std::mt19937_64 g(seed ^ 0x5EEDull);
  for (std::int64_t t = 0; t < T; ++t) in.tokens.push_back(static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(in.dims.V)));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) pos[t] = t;
  rope_tables(T, ld.D, pos.data(), rope_theta_of(sc.model), in.cos, in.sin);
  return in;
}

StepMeasurement run_cpu_step(const Scenario& sc, const StepRunOptions& opt, const std::string& origin) {
  const auto wall0 = std::chrono::steady_clock::now();
  const SpStepInput in = cpu_step_input(sc, opt.seed, 1 + opt.warmup + opt.iters, origin);
  const int P = static_cast<int>(sc.plan.sp_size);
  StepMeasurement m;
  m.backend = "cpu";
  m.device = fmt::format("{} ({} threads as ranks, {} hardware threads)", host_cpu_model(), P, std::thread::hardware_concurrency());
  m.ranks = P, m.layers = in.dims.L, m.seq_len = in.dims.layer.T;
  m.max_memory_allocated = m.max_memory_reserved = m.device_used_bytes = -1;  // no device
  const SpStepResult first = sp_step(in, P);
  m.checks = check_against_one_rank(in, first);
  m.losses.push_back(first.loss);
  std::vector<double> steps;
  std::map<std::string, std::vector<double>> phase;  // per phase: the max over ranks of each timed step
  std::vector<std::string> order;
  for (int i = 0; i < opt.warmup + opt.iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const SpStepResult r = sp_step(in, P);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.losses.push_back(r.loss);
    if (i < opt.warmup) continue;
    steps.push_back(s);
    for (std::size_t k = 0; k < r.phase_s[0].size(); ++k) {
      double worst = 0;
      for (const auto& rank : r.phase_s) worst = std::max(worst, rank[k].second);
      const std::string& name = r.phase_s[0][k].first;
      if (!phase.count(name)) order.push_back(name);
      phase[name].push_back(worst);
    }
  }
  for (const auto& name : order) {
    const auto& v = phase[name];
    m.phases.push_back({name, core::median(v), *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()), -1, -1, -1, -1});  // no device memory
  }
  if (!steps.empty()) {
    m.step_median_s = core::median(steps);
    m.step_min_s = *std::min_element(steps.begin(), steps.end()), m.step_max_s = *std::max_element(steps.begin(), steps.end());
  }
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return m;
}

}  // namespace ulysses::runtime::cpu
