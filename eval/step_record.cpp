#include "eval/step_record.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "reports/table.hpp"
#include "sim/stats.hpp"

namespace ulysses::eval {

namespace rd = runtime::deepspeed;
using Json = rd::Json;

Json step_case_json(const StepCase& c) {
  Json j;
  j["name"] = c.name;
  j["keys"] = Json::array();
  for (const auto& [k, v] : c.keys) j["keys"].push_back({k, v});
  j["expandable_segments"] = c.expandable_segments;
  Json ph = Json::array();
  for (const auto& p : c.m.phases)
    ph.push_back({{"name", p.name}, {"median_s", p.median_s}, {"min_s", p.min_s}, {"max_s", p.max_s},
                  {"kernel_s", p.kernel_s}, {"alloc_start_bytes", p.alloc_start_bytes}, {"peak_bytes", p.peak_bytes},
                  {"peak_reserved_bytes", p.peak_reserved_bytes}});
  j["measured"] = {{"device", c.m.device},
                   {"pytorch_cuda_alloc_conf", c.m.alloc_conf},
                   {"versions", c.m.versions},
                   {"ranks", c.m.ranks},
                   {"phases", ph},
                   {"step_s", {{"median", c.m.step_median_s}, {"min", c.m.step_min_s}, {"max", c.m.step_max_s}}},
                   {"max_memory_allocated", c.m.max_memory_allocated},
                   {"max_memory_reserved", c.m.max_memory_reserved},
                   {"peak_at", c.m.peak_at},
                   {"device_used_bytes", c.m.device_used_bytes},
                   {"host_rss_bytes", c.m.host_rss_bytes},
                   {"host_rss_peak_bytes", c.m.host_rss_peak_bytes},
                   {"checkpoint_pinned_bytes", c.m.pinned_bytes},
                   {"losses", c.m.losses},
                   {"wall_s", c.m.wall_s}};
  auto row = [](const Row& r) {
    return Json{{"name", r.name}, {"predicted", r.predicted}, {"measured", r.measured}, {"error_pct", r.error_pct}, {"scored", r.scored}};
  };
  Json cmp;
  cmp["phases"] = Json::array();
  for (const auto& r : c.c.phases) cmp["phases"].push_back(row(r));
  cmp["step"] = row(c.c.step);
  cmp["max_memory_allocated"] = row(c.c.allocated);
  cmp["max_memory_reserved"] = row(c.c.reserved);
  cmp["peak_at"] = {{"predicted", c.c.predicted_peak_at}, {"measured", c.c.measured_peak_at}};
  j["comparison"] = cmp;
  return j;
}

rd::StepMeasurement measurement_from_case(const Json& c) {
  const Json& m = c.at("measured");
  rd::StepMeasurement out;
  out.device = m.value("device", "");
  out.alloc_conf = m.value("pytorch_cuda_alloc_conf", "");
  out.versions = m.value("versions", Json::object());
  out.ranks = m.value("ranks", 1);
  for (const auto& p : m.at("phases")) {
    rd::StepPhase s;
    s.name = p.at("name").get<std::string>();
    s.median_s = p.at("median_s").get<double>();
    s.min_s = p.value("min_s", 0.0), s.max_s = p.value("max_s", 0.0), s.kernel_s = p.value("kernel_s", -1.0);
    s.alloc_start_bytes = p.value("alloc_start_bytes", std::int64_t{0});
    s.peak_bytes = p.value("peak_bytes", std::int64_t{0});
    s.peak_reserved_bytes = p.value("peak_reserved_bytes", std::int64_t{0});
    out.phases.push_back(s);
  }
  out.step_median_s = m.at("step_s").at("median").get<double>();
  out.step_min_s = m.at("step_s").value("min", 0.0), out.step_max_s = m.at("step_s").value("max", 0.0);
  out.max_memory_allocated = m.at("max_memory_allocated").get<std::int64_t>();
  out.max_memory_reserved = m.at("max_memory_reserved").get<std::int64_t>();
  out.peak_at = m.value("peak_at", "");
  out.device_used_bytes = m.value("device_used_bytes", std::int64_t{0});
  out.host_rss_bytes = m.value("host_rss_bytes", std::int64_t{0});
  out.host_rss_peak_bytes = m.value("host_rss_peak_bytes", std::int64_t{0});
  out.pinned_bytes = m.value("checkpoint_pinned_bytes", std::int64_t{0});
  for (const auto& l : m.value("losses", Json::array()))
    out.losses.push_back(l.is_number() ? l.get<double>() : std::numeric_limits<double>::quiet_NaN());
  out.wall_s = m.value("wall_s", 0.0);
  return out;
}

double Stat::median_abs() const {
  std::vector<double> a;
  for (double e : errors) a.push_back(std::fabs(e));
  return median(a);
}
double Stat::max_abs() const {
  double m = 0;
  for (double e : errors) m = std::max(m, std::fabs(e));
  return m;
}
std::string Stat::worst() const {
  std::size_t w = 0;
  for (std::size_t i = 1; i < errors.size(); ++i)
    if (std::fabs(errors[i]) > std::fabs(errors[w])) w = i;
  return errors.empty() ? "" : fmt::format("{} ({:+.1f} %)", cases[w], errors[w]);
}

StepSummary summarize_steps(const std::vector<StepCase>& cases) {
  StepSummary s;
  s.allocated.name = "max_memory_allocated";
  s.reserved.name = "max_memory_reserved (expandable segments)";
  s.step.name = "step time";
  std::map<std::string, std::size_t> idx;
  for (const auto& c : cases) {
    s.allocated.errors.push_back(c.c.allocated.error_pct), s.allocated.cases.push_back(c.name);
    if (c.expandable_segments) s.reserved.errors.push_back(c.c.reserved.error_pct), s.reserved.cases.push_back(c.name);
    s.step.errors.push_back(c.c.step.error_pct), s.step.cases.push_back(c.name);
    for (const auto& r : c.c.phases) {
      if (!r.scored) continue;
      auto it = idx.find(r.name);
      if (it == idx.end()) {
        it = idx.emplace(r.name, s.phases.size()).first;
        s.phases.push_back({r.name, {}, {}});
      }
      s.phases[it->second].errors.push_back(r.error_pct);
      s.phases[it->second].cases.push_back(c.name);
    }
  }
  return s;
}

std::vector<std::string> missed_step_targets(const StepSummary& s) {
  std::vector<std::string> out;
  for (const Stat* m : {&s.allocated, &s.reserved}) {
    if (m->median_abs() > 3) out.push_back(fmt::format("{}: median |error| {:.2f} % > 3 %", m->name, m->median_abs()));
    if (m->max_abs() > 6) out.push_back(fmt::format("{}: max |error| {:.2f} % > 6 % ({})", m->name, m->max_abs(), m->worst()));
  }
  if (s.step.median_abs() > 10) out.push_back(fmt::format("step time: median |error| {:.2f} % > 10 %", s.step.median_abs()));
  return out;
}

std::string step_cases_table(const std::vector<StepCase>& cases) {
  reports::Table t({{"case", "", reports::Align::left}, {"alloc pred", "GiB"}, {"alloc meas", "GiB"}, {"err", "%"},
                    {"resv pred", "GiB"}, {"resv meas", "GiB"}, {"err", "%"}, {"step pred", "s"}, {"step meas", "s"},
                    {"err", "%"}, {"peak at (pred / meas)", "", reports::Align::left}});
  auto g = [](double b) { return fmt::format("{:.2f}", b / double(1ULL << 30)); };
  for (const auto& c : cases)
    t.add_row({c.name, g(c.c.allocated.predicted), g(c.c.allocated.measured), fmt::format("{:+.1f}", c.c.allocated.error_pct),
               g(c.c.reserved.predicted), g(c.c.reserved.measured),
               c.expandable_segments ? fmt::format("{:+.1f}", c.c.reserved.error_pct) : fmt::format("({:+.1f})", c.c.reserved.error_pct),
               fmt::format("{:.3f}", c.c.step.predicted), fmt::format("{:.3f}", c.c.step.measured),
               fmt::format("{:+.1f}", c.c.step.error_pct), c.c.predicted_peak_at + " / " + c.c.measured_peak_at});
  return t.render() + "reserved errors in parentheses: run without expandable segments (not scored)\n";
}

std::string step_summary_table(const StepSummary& s) {
  reports::Table t({{"quantity", "", reports::Align::left}, {"cases", ""}, {"median |err|", "%"}, {"max |err|", "%"},
                    {"worst", "", reports::Align::left}});
  auto add = [&](const Stat& m) {
    t.add_row({m.name, fmt::format("{}", m.errors.size()), fmt::format("{:.2f}", m.median_abs()),
               fmt::format("{:.2f}", m.max_abs()), m.worst()});
  };
  add(s.allocated), add(s.reserved), add(s.step);
  for (const auto& p : s.phases) add(p);
  return t.render();
}

Json step_summary_json(const StepSummary& s) {
  auto st = [](const Stat& m) {
    return Json{{"name", m.name}, {"cases", m.errors.size()}, {"median_abs_error_pct", m.median_abs()},
                {"max_abs_error_pct", m.max_abs()}, {"worst", m.worst()}};
  };
  Json j{{"max_memory_allocated", st(s.allocated)}, {"max_memory_reserved", st(s.reserved)}, {"step", st(s.step)},
         {"phases", Json::array()}};
  for (const auto& p : s.phases) j["phases"].push_back(st(p));
  j["missed_targets"] = missed_step_targets(s);
  return j;
}

}  // namespace ulysses::eval
