// Running the block on a backend: the checked shape, the backend opened, the measurement written.
#include "eval/block_run.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "reports/table.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/cpu/cpu_backend.hpp"
#include "core/errors.hpp"
#include "sim/limits.hpp"

namespace ulysses::eval {

namespace {
// The CPU reference is O(S^2) single-threaded per rank, plus an fp64 single-rank oracle: beyond
// this many tokens (B*S) a run takes minutes to hours.
constexpr std::int64_t kCpuMaxTokens = 16384;

std::string us(double s) { return fmt::format("{:.1f}", s * 1e6); }
}  // namespace

runtime::BlockShape block_shape_checked(const Scenario& sc, const std::string& origin, const std::string& backend) {
  if (sc.plan.seq_len <= 0) throw core::InputError(origin, "plan.seq_len", "required to run the block (or pass --seq-len)");
  const runtime::BlockShape s = runtime::block_shape_of(sc);
  if (const std::string why = runtime::validate(s); !why.empty()) throw core::InputError(origin, "plan", why);
  if (backend == "cpu" && s.P > kMaxThreads)
    throw core::InputError(origin, "plan.sp_size", fmt::format("the cpu backend runs one thread per rank: at most {} (got {})",
                                                         kMaxThreads, s.P));
  if (backend == "cpu" && s.B * s.S > kCpuMaxTokens)
    throw core::InputError(origin, "plan.seq_len",
                     fmt::format("the cpu backend runs up to {} tokens (micro_batch_size * seq_len; got {}): its "
                                 "attention is O(S^2) on one thread per rank; use --backend cuda",
                                 kCpuMaxTokens, s.B * s.S));
  if (backend == "cpu") {  // before any allocation: what the run needs against what the host has
    const std::int64_t need = runtime::cpu::memory_estimate_bytes(s), have = runtime::cpu::available_ram_bytes();
    if (have >= 0 && need > have)
      throw core::InputError(origin, "plan", fmt::format("the cpu backend needs about {:.1f} GiB for this block (ranks' buffers and "
                                                   "the fp64 oracle), {:.1f} GiB of host memory is available",
                                                   double(need) / double(1LL << 30), double(have) / double(1LL << 30)));
  }
  return s;
}

std::unique_ptr<runtime::Backend> open_backend(const std::string& name) {
#ifdef ULYSSES_WITH_CUDA
  static const bool registered = (runtime::register_cuda_backend(), true);
  (void)registered;
#endif
  try {
    return runtime::make_backend(name);
  } catch (const std::runtime_error& e) {
    throw core::InputError("", "--backend", e.what());
  }
}

std::string measurement_table(const runtime::Measurement& m) {
  const runtime::BlockShape& s = m.shape;
  std::string out = fmt::format(
      "backend {} on {}\nB={} S={} H={} H_kv={} D={} P={} {} kv_strategy={}\n\n", m.backend, m.device, s.B, s.S, s.H,
      s.H_kv, s.D, s.P, s.causal ? "causal" : "non-causal", reports::to_string(s.kv_strategy));
  reports::Table t({{"phase", "", reports::Align::left}, {"median", "us"}, {"min", "us"}, {"max", "us"}, {"peak", "bytes"}});
  for (std::size_t i = 0; i < m.phases.size(); ++i) {
    const auto& p = m.phases[i];
    t.add_row({p.name, us(p.median_s), us(p.min_s), us(p.max_s),
               i < m.phase_peak_bytes.size() ? fmt::format("{}", m.phase_peak_bytes[i]) : "-"});
  }
  out += t.render();
  out += fmt::format("\nexchanged per rank (bf16): q {} B, k+v {} B\npeak memory per rank:", m.a2a_q_bytes_per_rank,
                     m.a2a_kv_bytes_per_rank);
  for (std::size_t r = 0; r < m.peak_bytes_per_rank.size(); ++r) out += fmt::format(" {}", m.peak_bytes_per_rank[r]);
  out += " bytes\n\n";
  reports::Table c({{"check", "", reports::Align::left}, {"#wrong", ""}, {"max err", ""}, {"tolerance", ""}, {"result", ""}});
  for (const auto& k : m.checks)
    c.add_row({k.name, fmt::format("{}", k.wrong), fmt::format("{:.3g}", k.max_abs_err),
               k.tolerance > 0 ? fmt::format("{:.3g}", k.tolerance) : "exact", k.passed ? "ok" : "FAILED"});
  out += c.render();
  out += fmt::format("\ncorrect: {}\n", m.correct ? "true" : "false");
  return out;
}

reports::Json measurement_json(const runtime::Measurement& m) {
  reports::Json j;
  const runtime::BlockShape& s = m.shape;
  j["backend"] = m.backend;
  j["device"] = m.device;
  j["shape"] = {{"B", s.B}, {"S", s.S}, {"H", s.H}, {"H_kv", s.H_kv}, {"D", s.D}, {"P", s.P}, {"causal", s.causal},
                {"kv_strategy", reports::to_string(s.kv_strategy)}};
  j["phases"] = reports::Json::array();
  for (std::size_t i = 0; i < m.phases.size(); ++i) {
    const auto& p = m.phases[i];
    reports::Json e{{"name", p.name}, {"median_s", p.median_s}, {"min_s", p.min_s}, {"max_s", p.max_s}};
    if (i < m.phase_peak_bytes.size()) e["peak_bytes"] = m.phase_peak_bytes[i];
    j["phases"].push_back(e);
  }
  j["peak_bytes_per_rank"] = m.peak_bytes_per_rank;
  j["a2a_q_bytes_per_rank"] = m.a2a_q_bytes_per_rank;
  j["a2a_kv_bytes_per_rank"] = m.a2a_kv_bytes_per_rank;
  j["checks"] = reports::Json::array();
  for (const auto& k : m.checks)
    j["checks"].push_back({{"name", k.name}, {"wrong", k.wrong}, {"max_err", k.max_abs_err}, {"tolerance", k.tolerance},
                           {"passed", k.passed}});
  j["correct"] = m.correct;
  return j;
}

}  // namespace ulysses::eval
