// Whole steps (the deepspeed backend, our runtime's) written out: the measurement, the comparison, the trace.
#include "eval/step_out.hpp"

#include <algorithm>
#include <cmath>

#include <map>

#include <fmt/format.h>

#include "reports/table.hpp"
#include "reports/trace.hpp"

namespace ulysses::eval {

namespace rd = runtime::deepspeed;

namespace {
std::string ms(double s) { return fmt::format("{:.2f}", s * 1e3); }
std::string gib(double b) { return fmt::format("{:.3f}", b / double(1ULL << 30)); }
}  // namespace

std::string step_table(const runtime::StepMeasurement& m) {
  std::string versions;
  for (auto it = m.versions.begin(); it != m.versions.end(); ++it)
    versions += fmt::format("{}{} {}", versions.empty() ? "" : ", ", it.key(), it.value().is_string() ? it.value().get<std::string>() : it.value().dump());
  std::string out = fmt::format("backend {} on {} ({} rank(s)){}\nPYTORCH_CUDA_ALLOC_CONF={}\nlayers {} seq_len {}\n\n",
                                m.backend, m.device, m.ranks, versions.empty() ? "" : "; " + versions,
                                m.alloc_conf.empty() ? "(unset)" : m.alloc_conf, m.layers, m.seq_len);
  reports::Table t({{"phase", "", reports::Align::left}, {"median", "ms"}, {"min", "ms"}, {"max", "ms"}, {"kernels", "ms"},
                    {"sm clock", "MHz"}, {"alloc at start", "GiB"}, {"peak alloc", "GiB"}, {"peak reserved", "GiB"}});
  const auto mem = [&](std::int64_t b) { return m.has_device_memory() ? gib(double(b)) : std::string("-"); };
  for (const auto& p : m.phases)
    t.add_row({p.name, ms(p.median_s), ms(p.min_s), ms(p.max_s), p.kernel_s >= 0 ? ms(p.kernel_s) : "-",
               p.sm_mhz >= 0 ? fmt::format("{:.0f}", p.sm_mhz) : "-", mem(p.alloc_start_bytes), mem(p.peak_bytes),
               mem(p.peak_reserved_bytes)});
  out += t.render();
  if (!m.checks.empty()) {
    reports::Table c({{"check", "", reports::Align::left}, {"elements", ""}, {"max rel err", ""}, {"tolerance", ""}, {"#wrong", ""}});
    for (const auto& k : m.checks)
      c.add_row({k.name, std::to_string(k.elements), fmt::format("{:.3e}", k.max_rel_err), fmt::format("{:.0e}", k.tolerance),
                 std::to_string(k.wrong)});
    out += "\n" + c.render();
  }
  if (!m.has_device_memory()) {
    std::string losses;
    for (double l : m.losses) losses += fmt::format(" {:.6f}", l);
    return out + fmt::format("\nstep {} ms (min {}, max {}) over timed steps\ndevice memory: none (the {} backend has no device)\n"
                             "loss per step:{}\ncorrect (every loss finite, no check wrong): {}\n",
                             ms(m.step_median_s), ms(m.step_min_s), ms(m.step_max_s), m.backend, losses, m.correct() ? "true" : "false");
  }
  out += fmt::format(
      "\nstep {} ms (min {}, max {}) over timed steps\nmax_memory_allocated {} B ({} GiB), peak at {}\n"
      "max_memory_reserved {} B ({} GiB)\ndevice memory used at the end {} B\nhost RSS {} B (peak {}), pinned "
      "host memory {} B\n",
      ms(m.step_median_s), ms(m.step_min_s), ms(m.step_max_s), m.max_memory_allocated, gib(double(m.max_memory_allocated)),
      m.peak_at, m.max_memory_reserved, gib(double(m.max_memory_reserved)), m.device_used_bytes, m.host_rss_bytes,
      m.host_rss_peak_bytes, m.pinned_bytes);
  std::string losses;
  for (double l : m.losses) losses += fmt::format(" {:.4f}", l);
  out += fmt::format("loss per step:{}\ncorrect (every loss finite{}): {}\n", losses, m.checks.empty() ? "" : ", no check wrong",
                     m.correct() ? "true" : "false");
  return out;
}

std::string step_compare_table(const StepComparison& c) {
  const bool clocks = std::any_of(c.phases.begin(), c.phases.end(), [](const Row& r) { return r.sm_samples > 0; });
  std::vector<reports::Column> cols = {{"phase", "", reports::Align::left}, {"predicted", "ms"}, {"measured", "ms"}, {"error", "%"}, {"scored", ""}};
  if (clocks) cols.push_back({"sm clock", "MHz"});
  reports::Table t(cols);
  const auto clock = [&](const Row& r) { return r.sm_samples > 0 ? fmt::format("{:.0f}", r.sm_mhz) : std::string("-"); };
  for (const auto& r : c.phases) {
    std::vector<std::string> cells = {r.name, ms(r.predicted), r.measured_seen ? ms(r.measured) : "-",
                                      r.measured_seen ? fmt::format("{:+.1f}", r.error_pct) : "-", r.scored ? "yes" : "no"};
    if (clocks) cells.push_back(clock(r));
    t.add_row(cells);
  }
  std::vector<std::string> step = {"step", ms(c.step.predicted), ms(c.step.measured), fmt::format("{:+.1f}", c.step.error_pct), "yes"};
  if (clocks) step.push_back("-");
  t.add_row(step);
  std::string out = t.render();
  reports::Table mt({{"memory", "", reports::Align::left}, {"predicted", "bytes"}, {"measured", "bytes"}, {"error", "%"}});
  for (const auto* r : {&c.allocated, &c.reserved})
    mt.add_row({r->name, fmt::format("{:.0f}", r->predicted), fmt::format("{:.0f}", r->measured), fmt::format("{:+.1f}", r->error_pct)});
  out += "\n" + mt.render();
  out += fmt::format("\npeak at: predicted {}, measured {}\n", c.predicted_peak_at, c.measured_peak_at);
  reports::Table tt({{"throughput", "", reports::Align::left}, {"predicted", ""}, {"measured", ""}, {"MFU pred", "%"},
                     {"MFU meas", "%"}});
  const auto mfu = [&](double tflops) { return c.peak_tflops > 0 ? fmt::format("{:.1f}", tflops / c.peak_tflops * 100) : "-"; };
  tt.add_row({c.tokens_per_gpu.name, fmt::format("{:.0f}", c.tokens_per_gpu.predicted), fmt::format("{:.0f}", c.tokens_per_gpu.measured), "-", "-"});
  for (const auto* r : {&c.hw_tflops, &c.megatron_tflops})
    tt.add_row({r->name, fmt::format("{:.1f}", r->predicted), fmt::format("{:.1f}", r->measured), mfu(r->predicted), mfu(r->measured)});
  out += "\n" + tt.render() + fmt::format("MFU: TFLOP/s over the profile's dense bf16 peak ({:.1f} TFLOP/s per GPU)\n", c.peak_tflops);
  out += "error = (predicted - measured) / measured; phases per step (all layers), median over timed steps\n";
  if (clocks)
    out += "sm clock: NVML's SM clock while the phase ran (its phases' medians weighted by their samples); the step model\n"
           "assumes the clock its curves were calibrated at (docs/STEP_POWER.md \"The test: the same cycles, a different clock\")\n";
  return out;
}

reports::Json step_trace(const Prediction& p, const runtime::StepMeasurement& m) {
  reports::TraceProcess pred{"predicted (step model, every rank)", {{"predicted step", {}}}};
  double t = 0;
  for (int i = 0; i < p.step.n; ++i) {
    const auto& ph = p.step.phases[i];
    if (ph.time_s <= 0) continue;
    pred.threads[0].spans.push_back({ph.name, t, ph.time_s * 1e6, "phase", {{"predicted_us", ph.time_s * 1e6}}});
    t += ph.time_s * 1e6;
  }
  reports::TraceProcess meas{fmt::format("measured ({}, last timed step)", m.backend), {}};
  for (std::size_t r = 0; r < m.timeline.size(); ++r) {
    reports::TraceThread th{fmt::format("rank {}", r), {}};
    for (const auto& s : m.timeline[r]) th.spans.push_back({s.phase, s.start_s * 1e6, s.dur_s * 1e6, "phase", {{"rank", r}}});
    meas.threads.push_back(std::move(th));
  }
  if (m.traced.empty()) return reports::chrome_trace({pred, meas});
  // our runtime's traced step (CUPTI): its phase windows, then each stream's kernels and copies, then NVTX
  reports::TraceProcess traced{fmt::format("traced step ({}, CUPTI; host waits between phases)", m.backend), {}};
  std::map<std::string, std::size_t> at;
  for (const auto& s : m.traced) {
    auto it = at.find(s.track);
    if (it == at.end()) {
      it = at.emplace(s.track, traced.threads.size()).first;
      traced.threads.push_back({s.track, {}});
    }
    const char* cat = s.track == "phases" ? "phase" : s.track == "nvtx" ? "nvtx" : "gpu";
    traced.threads[it->second].spans.push_back({s.name, s.start_s * 1e6, s.dur_s * 1e6, cat, nullptr});
  }
  return reports::chrome_trace({pred, meas, traced});
}

}  // namespace ulysses::eval
