// Step capacity records: cases, bisection outcome, table, targets, stored cases (eval/step_capacity_record.hpp).
#include "eval/step_capacity_record.hpp"

#include <cmath>

#include <fmt/format.h>

#include "eval/record_in.hpp"
#include "eval/step_compare.hpp"
#include "reports/table.hpp"
#include "core/errors.hpp"

namespace ulysses::eval {

using Json = reports::Json;

bool is_step_capacity_record(const Json& j) { return j.value("format", "") == kStepCapacityFormat; }

StepCapacityCase predicted_step_capacity_case(StepSetCase set, std::int64_t g) {
  StepCapacityCase c;
  c.set = std::move(set);
  const CapacityResult pr = predicted_step_capacity(c.set.sc, c.set.run.ballast_bytes, g);
  c.predicted_S = pr.max_seq_len;
  c.binding = to_string(pr.binding);
  return c;
}

bool record_bisection(StepCapacityCase& c, const Bisection& b) {
  if (b.fits == 0 || b.first_oom == 0) return false;
  for (const auto& p : b.ran)
    c.probes.push_back({{"seq_len", p.seq_len}, {"fits", true}, {"max_memory_allocated", p.max_memory_allocated},
                        {"max_memory_reserved", p.max_memory_reserved}});
  for (std::int64_t s : b.oom) c.probes.push_back({{"seq_len", s}, {"fits", false}});
  c.measured_S = b.fits;
  c.failed_S = b.first_oom;
  return true;
}

namespace {
double err(const StepCapacityCase& c) { return error_pct(double(c.predicted_S), double(c.measured_S)); }
}  // namespace

std::string step_capacity_table(const std::vector<StepCapacityCase>& cases) {
  reports::Table t({{"case", "", reports::Align::left}, {"ballast", "GiB"}, {"predicted S", "tokens"}, {"measured S", "tokens"},
                    {"first OOM", "tokens"}, {"error", "%"}, {"binds", "", reports::Align::left}});
  for (const auto& c : cases)
    t.add_row({c.set.name, fmt::format("{:.1f}", double(c.set.run.ballast_bytes) / double(1ULL << 30)),
               fmt::format("{}", c.predicted_S), fmt::format("{}", c.measured_S), fmt::format("{}", c.failed_S),
               fmt::format("{:+.2f}", err(c)), c.binding});
  return t.render();
}

std::vector<std::string> missed_step_capacity(const std::vector<StepCapacityCase>& cases, double max_err_pct) {
  std::vector<std::string> missed;
  for (const auto& c : cases) {
    const double e = err(c);
    if (max_err_pct >= 0 && !(std::fabs(e) <= max_err_pct))
      missed.push_back(fmt::format("{}: predicted {} vs measured {} ({:+.2f} %)", c.set.name, c.predicted_S, c.measured_S, e));
  }
  return missed;
}

Json step_capacity_case_json(const StepCapacityCase& c) {
  Json keys = Json::array();
  for (const auto& [k, v] : c.set.keys) keys.push_back({k, v});
  return {{"name", c.set.name}, {"keys", keys}, {"ballast_bytes", c.set.run.ballast_bytes}, {"predicted_S", c.predicted_S},
          {"binding", c.binding}, {"measured_S", c.measured_S}, {"first_oom_S", c.failed_S}, {"probes", c.probes}};
}

std::vector<StepCapacityCase> repredict_step_capacity_record(const Json& rec, const std::string& path, const std::string& profile) {
  const std::int64_t g = rec.value("granularity", std::int64_t{1024});  // 1..2^24: load_record checked it
  std::vector<StepCapacityCase> cases;
  const std::string backend = rec.value("backend", "deepspeed");  // records before issue 13's have none
  for_each_stored_case(rec, path, "stored step capacity case", [&](const Json& j) {
    StepCapacityCase c = predicted_step_capacity_case(
        step_set_case(rec.value("model", ""), profile, j.at("name").get<std::string>(), stored_keys(j), path, backend), g);
    c.measured_S = j.at("measured_S").get<std::int64_t>();
    c.failed_S = j.value("first_oom_S", std::int64_t{0});
    cases.push_back(std::move(c));
  });
  return cases;
}

}  // namespace ulysses::eval
