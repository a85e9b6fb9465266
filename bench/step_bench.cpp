// bench/step_bench.hpp: both backends' steps, their throughput rows, the ratio.
#include "bench/step_bench.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "eval/step_run.hpp"
#include "reports/table.hpp"
#include "sim/predict.hpp"

namespace ulysses::bench {

bool StepBench::valid() const { return rows.size() == 2 && rows[0].m.correct() && rows[1].m.correct(); }

double StepBenchRow::tokens_per_joule() const {
  if (!(m.energy_j_per_step > 0) || !(c.tokens_per_gpu.measured > 0)) return -1;
  return c.tokens_per_gpu.measured * double(std::max(m.ranks, 1)) * m.step_median_s / m.energy_j_per_step;
}

double StepBench::ratio() const {
  if (!valid() || !(rows[1].c.tokens_per_gpu.measured > 0)) return 0;
  return rows[0].c.tokens_per_gpu.measured / rows[1].c.tokens_per_gpu.measured;
}

StepBench bench_step(const Scenario& sc, const std::vector<std::string>& backends, const runtime::deepspeed::StepOptions& opt,
                     const std::string& origin) {
  StepBench b;
  b.scenario = sc.name;
  std::vector<std::pair<Scenario, Prediction>> plans;  // every backend's scenario predicted before anything runs
  for (const auto& be : backends) {  // both plans refused or accepted before either step runs
    const Scenario s = eval::step_scenario_for(be, sc);
    eval::check_whole_step(be, s, opt, origin);
    plans.emplace_back(s, predict(s));
  }
  for (std::size_t i = 0; i < backends.size(); ++i) {
    StepBenchRow r;
    r.backend = backends[i];
    std::optional<runtime::PowerSampler> sampler;  // NVML: every GPU of the host (an idle one gives no loaded sample)
    if (backends[i] != "cpu") sampler.emplace().start();
    r.m = eval::run_whole_step(backends[i], plans[i].first, opt, origin);
    r.power = sampler ? sampler->stop() : runtime::PowerSummary{.why = "the cpu backend"};
    r.c = eval::compare_step(plans[i].first, plans[i].second, r.m);
    b.rows.push_back(std::move(r));
  }
  return b;
}

std::string step_bench_table(const StepBench& b) {
  reports::Table t({{"backend", "", reports::Align::left}, {"step", "ms"}, {"tokens/s", "per GPU"}, {"hw", "TFLOP/s"},
                    {"hw MFU", "%"}, {"Megatron", "TFLOP/s"}, {"Megatron MFU", "%"}, {"peak alloc", "GiB"}, {"correct", ""}});
  for (const auto& r : b.rows) {
    const double peak = r.c.peak_tflops;
    const auto mfu = [&](double tf) { return peak > 0 ? fmt::format("{:.1f}", 100 * tf / peak) : std::string("-"); };
    t.add_row({r.backend, fmt::format("{:.2f}", r.m.step_median_s * 1e3), fmt::format("{:.0f}", r.c.tokens_per_gpu.measured),
               fmt::format("{:.4g}", r.c.hw_tflops.measured), mfu(r.c.hw_tflops.measured),
               fmt::format("{:.4g}", r.c.megatron_tflops.measured), mfu(r.c.megatron_tflops.measured),
               r.m.has_device_memory() ? fmt::format("{:.3f}", double(r.m.max_memory_allocated) / double(1ULL << 30)) : "-",
               r.m.correct() ? "true" : "false"});
  }
  std::string out = t.render();
  // the papers' count (c = 4 under checkpointing, attention unmasked, the embedding as a GEMM) exceeds the work that
  // ran at few layers: say so where it passes the peak, so that a >100 % is not read as a measuring error
  bool over = false;
  for (const auto& r : b.rows) over = over || (r.c.peak_tflops > 0 && r.c.megatron_tflops.measured > r.c.peak_tflops);
  if (over)
    out += "Megatron-style: the papers' FLOP count (recompute as a full forward, attention unmasked), not the work\n"
           "  that ran, so above the peak here; hw is the utilization (docs/STEP_RUNTIME.md)\n";
  if (b.valid())
    out += fmt::format("tokens/s per GPU, {} / {}: {:.3f}x (target >= {:.2f}x: {})\n", b.rows[0].backend, b.rows[1].backend,
                       b.ratio(), b.target, b.ratio() >= b.target ? "met" : "missed");
  else
    out += "no ratio: a backend's step was not correct (a loss not finite or a check wrong)\n";
  return out;
}

std::string step_power_table(const StepBench& b) {
  double limit = 0;
  for (const auto& r : b.rows) limit = std::max(limit, r.power.limit_w);
  std::string out = fmt::format("power (NVML every 25 ms; loaded: >= {:.0f} % of the {:.0f} W limit, setup included; at cap: "
                                "within {:.0f} % of it)\n", 100 * runtime::kLoadedFraction, limit, 100 * (1 - runtime::kAtCapFraction));
  reports::Table t({{"backend", "", reports::Align::left}, {"sm clock", "MHz"}, {"lowest", "MHz"}, {"power", "W"},
                    {"at cap", "%"}, {"loaded", "samples"}, {"GPUs", ""}});
  std::string missing;
  for (const auto& r : b.rows) {
    const auto& p = r.power;
    if (!p.available) {
      missing += fmt::format("  {}: not sampled ({})\n", r.backend, p.why);
      continue;
    }
    t.add_row({r.backend, fmt::format("{:.0f}", p.sm_mhz_median), fmt::format("{:.0f}", p.sm_mhz_min),
               fmt::format("{:.1f}", p.watts_mean), fmt::format("{:.1f}", 100 * p.at_cap_fraction),
               fmt::format("{}", p.loaded), fmt::format("{}", p.gpus)});
  }
  out = t.rows() ? out + t.render() + missing : "power: " + (missing.empty() ? std::string("no rows\n") : missing.substr(2));
  // W: the joules per step over the median step, per GPU (the energy window also holds the host's gaps between steps)
  auto watts = [](const StepBenchRow& r) { return r.m.energy_j_per_step / r.m.step_median_s / std::max(1, r.power.gpus); };
  out += "energy over the timed steps (NVML energy counters, summed over the ranks' GPUs):";
  for (const auto& r : b.rows)
    out += r.tokens_per_joule() > 0 ? fmt::format(" {} {:.1f} J per step ({:.0f} W per GPU), {:.1f} tokens/J;", r.backend,
                                                  r.m.energy_j_per_step, watts(r), r.tokens_per_joule())
                                    : fmt::format(" {} not measured;", r.backend);
  out.back() = '\n';
  if (b.valid() && b.rows[0].tokens_per_joule() > 0 && b.rows[1].tokens_per_joule() > 0) {
    out += fmt::format("tokens per joule, {} / {}: {:.3f}x\n", b.rows[0].backend, b.rows[1].backend,
                       b.rows[0].tokens_per_joule() / b.rows[1].tokens_per_joule());
    if (limit > 0 && watts(b.rows[0]) >= runtime::kAtCapFraction * limit && watts(b.rows[1]) >= runtime::kAtCapFraction * limit)
      out += fmt::format("both timed steps at the {:.0f} W power limit: the tokens/s ratio is one of work per joule "
                         "(docs/STEP_POWER.md)\n", limit);
  }
  return out;
}

static runtime::Json power_json(const runtime::PowerSummary& p) {
  runtime::Json j{{"available", p.available}};
  if (!p.available) {
    j["why"] = p.why;
    return j;
  }
  j.update({{"gpus", p.gpus}, {"limit_w", p.limit_w}, {"samples", p.samples}, {"loaded", p.loaded},
            {"sm_mhz_median", p.sm_mhz_median}, {"sm_mhz_min", p.sm_mhz_min}, {"watts_mean", p.watts_mean},
            {"at_cap_fraction", p.at_cap_fraction}});
  return j;
}

runtime::Json step_bench_json(const StepBench& b) {
  runtime::Json j;
  j["scenario"] = b.scenario;
  j["rows"] = runtime::Json::array();
  for (const auto& r : b.rows)
    j["rows"].push_back({{"backend", r.backend}, {"measurement", runtime::measurement_json(r.m)}, {"comparison", eval::comparison_json(r.c)},
                         {"power", power_json(r.power)},
                         {"tokens_per_joule", r.tokens_per_joule() > 0 ? runtime::Json(r.tokens_per_joule()) : runtime::Json(nullptr)}});
  j["valid"] = b.valid();
  j["ratio_tokens_per_s_per_gpu"] = b.valid() ? runtime::Json(b.ratio()) : runtime::Json(nullptr);
  j["target"] = b.target;
  return j;
}

}  // namespace ulysses::bench
