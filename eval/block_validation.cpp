// The block validation: measurements, error statistics, targets, tables, stored cases.
#include "eval/block_validation.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "eval/abs_errors.hpp"
#include "eval/record_in.hpp"
#include "reports/table.hpp"
#include "core/errors.hpp"
#include "core/phases.hpp"
#include "sim/predict.hpp"

namespace ulysses::eval {
namespace {

bool is_exchange(int phase) {
  const auto p = static_cast<core::BlockPhase>(phase);
  return p != core::BlockPhase::attn_fwd && p != core::BlockPhase::attn_bwd;
}

std::string pct(double v) { return fmt::format("{:+.1f}", v); }

}  // namespace

CaseMeasurement measurement_of(const runtime::Measurement& m) {
  CaseMeasurement c;
  for (std::size_t i = 0; i < m.phases.size() && i < 6; ++i) {
    // phases are in BlockPhase order; look them up by name all the same
    const auto it = std::find(core::kBlockPhaseNames.begin(), core::kBlockPhaseNames.end(), m.phases[i].name);
    const auto k = static_cast<std::size_t>(it - core::kBlockPhaseNames.begin());
    if (k >= 6) continue;
    c.phase_s[k] = m.phases[i].median_s, c.phase_min_s[k] = m.phases[i].min_s, c.phase_max_s[k] = m.phases[i].max_s;
  }
  for (auto b : m.peak_bytes_per_rank) c.peak_bytes = std::max(c.peak_bytes, b);
  c.correct = m.correct;
  c.checks = static_cast<std::int64_t>(m.checks.size());
  for (const auto& ch : m.checks) c.checks_failed += ch.passed ? 0 : 1;
  return c;
}

bool phase_scored(int phase, std::int64_t P) { return P > 1 || !is_exchange(phase); }

double block_error_pct(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured * 100.0 : (predicted > 0 ? 1e9 : 0.0);
}

double ErrorStats::median_abs() const { return eval::median_abs(errors_pct); }
double ErrorStats::max_abs() const { return eval::max_abs(errors_pct); }
double ErrorStats::mean_signed() const {
  double s = 0;
  for (double e : errors_pct) s += e;
  return errors_pct.empty() ? 0 : s / static_cast<double>(errors_pct.size());
}
std::string ErrorStats::worst_case() const {
  std::size_t w = 0;
  for (std::size_t i = 1; i < errors_pct.size(); ++i)
    if (std::fabs(errors_pct[i]) > std::fabs(errors_pct[w])) w = i;
  return errors_pct.empty() ? "" : cases[w];
}

void predict_case(CaseResult& r, const std::string& backend) {
  r.p = predict(r.sc);
  r.predicted_peak_bytes = predicted_block_peak(r.p, backend);
}

double block_total_s(const CaseMeasurement& m) {
  return m.phase_s[0] + m.phase_s[1] + m.phase_s[2] + m.phase_s[3] + m.phase_s[4] + m.phase_s[5];
}

std::vector<CaseResult> repredict_block_record(const reports::Json& rec, const std::string& path, const std::string& profile) {
  std::vector<CaseResult> results;
  for_each_stored_case(rec, path, "stored case", [&](const reports::Json& c) {
    CaseResult r;
    r.name = c.at("name").get<std::string>();
    r.keys = stored_keys(c);
    r.sc = case_scenario(rec.value("model", ""), profile, r.keys, path, r.name);
    predict_case(r, rec.value("backend", ""));
    const reports::Json& ph = c.at("phases");
    for (std::size_t k = 0; k < 6; ++k) {
      if (ph.at(k).at("name").get<std::string>() != core::kBlockPhaseNames[k]) throw std::runtime_error("phase order");
      r.m.phase_s[k] = ph.at(k).at("measured_s").get<double>();
      r.m.phase_min_s[k] = ph.at(k).value("measured_min_s", 0.0), r.m.phase_max_s[k] = ph.at(k).value("measured_max_s", 0.0);
    }
    r.m.peak_bytes = c.at("peak_memory").at("measured_bytes").get<std::int64_t>();
    r.m.correct = c.at("correct").get<bool>();
    results.push_back(std::move(r));
  });
  return results;
}

Summary summarize(const std::vector<CaseResult>& r) {
  Summary s;
  for (int k = 0; k < 6; ++k) s.phases.push_back(ErrorStats{std::string(core::kBlockPhaseNames[k]), {}, {}});
  s.block_total.name = "block total";
  s.memory.name = "peak memory";
  s.all_phases.name = "every phase";
  for (const auto& c : r) {
    double pt = 0, mt = 0;
    for (int k = 0; k < 6; ++k) {
      pt += c.p.block[k], mt += c.m.phase_s[k];
      if (!phase_scored(k, c.sc.plan.sp_size)) continue;
      const double e = block_error_pct(c.p.block[k], c.m.phase_s[k]);
      s.phases[k].errors_pct.push_back(e), s.phases[k].cases.push_back(c.name);
      s.all_phases.errors_pct.push_back(e), s.all_phases.cases.push_back(c.name + " " + s.phases[k].name);
    }
    s.block_total.errors_pct.push_back(block_error_pct(pt, mt)), s.block_total.cases.push_back(c.name);
    s.memory.errors_pct.push_back(block_error_pct(static_cast<double>(c.predicted_peak_bytes), static_cast<double>(c.m.peak_bytes)));
    s.memory.cases.push_back(c.name);
    s.incorrect += c.m.correct ? 0 : 1;
  }
  return s;
}

std::vector<std::string> missed_targets(const Summary& s, const Targets& t) {
  std::vector<std::string> out;
  if (s.incorrect > 0) out.push_back(fmt::format("{} case(s) failed a correctness check", s.incorrect));
  for (const auto& ph : s.phases) {
    if (ph.errors_pct.empty()) continue;
    if (t.max_median_error_pct >= 0 && ph.median_abs() > t.max_median_error_pct)
      out.push_back(fmt::format("{}: median |error| {:.2f}% > {}%", ph.name, ph.median_abs(), t.max_median_error_pct));
    if (t.max_error_pct >= 0 && ph.max_abs() > t.max_error_pct)
      out.push_back(fmt::format("{}: max |error| {:.2f}% > {}% (case {})", ph.name, ph.max_abs(), t.max_error_pct, ph.worst_case()));
  }
  if (t.max_memory_error_pct >= 0 && s.memory.max_abs() > t.max_memory_error_pct)
    out.push_back(fmt::format("peak memory: max |error| {:.2f}% > {}% (case {})", s.memory.max_abs(), t.max_memory_error_pct,
                              s.memory.worst_case()));
  return out;
}

std::string summary_table(const Summary& s) {
  reports::Table t({{"", "", reports::Align::left}, {"cases", ""}, {"median |err|", "%"}, {"max |err|", "%"},
                    {"mean (bias)", "%"}, {"worst case", "", reports::Align::left}});
  auto row = [&](const ErrorStats& e) {
    if (e.errors_pct.empty()) return t.add_row({e.name, "0", "-", "-", "-", "-"});
    t.add_row({e.name, fmt::format("{}", e.errors_pct.size()), fmt::format("{:.2f}", e.median_abs()),
               fmt::format("{:.2f}", e.max_abs()), pct(e.mean_signed()), e.worst_case()});
  };
  for (const auto& p : s.phases) row(p);
  row(s.all_phases);
  row(s.block_total);
  row(s.memory);
  return t.render();
}

std::string cases_table(const std::vector<CaseResult>& r) {
  std::vector<reports::Column> cols{{"case", "", reports::Align::left}, {"P", ""}, {"S", ""}, {"H/H_kv/D", ""}, {"mask", ""}};
  for (auto n : core::kBlockPhaseNames) cols.push_back({std::string(n), "us pred/meas err%"});
  cols.push_back({"peak", "GiB pred/meas err%"});
  reports::Table t(cols);
  for (const auto& c : r) {
    std::vector<std::string> row{c.name, fmt::format("{}", c.sc.plan.sp_size), fmt::format("{}", c.p.padded_seq_len),
                                 fmt::format("{}/{}/{}", c.sc.model.heads, c.sc.model.kv_heads, c.sc.model.head_dim),
                                 c.sc.workload.causal ? "causal" : "full"};
    for (int k = 0; k < 6; ++k) {
      if (!phase_scored(k, c.sc.plan.sp_size)) { row.push_back("-"); continue; }
      row.push_back(fmt::format("{:.0f}/{:.0f} {}", c.p.block[k] * 1e6, c.m.phase_s[k] * 1e6,
                                pct(block_error_pct(c.p.block[k], c.m.phase_s[k]))));
    }
    row.push_back(fmt::format("{:.2f}/{:.2f} {}", c.predicted_peak_bytes / 1073741824.0, c.m.peak_bytes / 1073741824.0,
                              pct(block_error_pct(double(c.predicted_peak_bytes), double(c.m.peak_bytes)))));
    t.add_row(row);
  }
  return t.render();
}

reports::Json case_json(const CaseResult& r, const runtime::Measurement* raw) {
  using reports::Json;
  Json keys = Json::array();
  for (const auto& [k, v] : r.keys) keys.push_back({k, v});
  Json phases = Json::array();
  for (int k = 0; k < 6; ++k)
    phases.push_back({{"name", core::kBlockPhaseNames[k]}, {"measured_s", r.m.phase_s[k]}, {"measured_min_s", r.m.phase_min_s[k]},
                      {"measured_max_s", r.m.phase_max_s[k]}, {"predicted_s", r.p.block[k]},
                      {"error_pct", block_error_pct(r.p.block[k], r.m.phase_s[k])}, {"scored", phase_scored(k, r.sc.plan.sp_size)}});
  Json j{{"name", r.name},
         {"keys", keys},
         {"shape",
          {{"B", r.sc.plan.micro_batch_size}, {"S", r.p.padded_seq_len}, {"H", r.sc.model.heads}, {"H_kv", r.sc.model.kv_heads},
           {"D", r.sc.model.head_dim}, {"P", r.sc.plan.sp_size}, {"causal", r.sc.workload.causal},
           {"kv_strategy", reports::to_string(r.sc.plan.kv_strategy)}, {"attn_implementation", r.sc.plan.attn_implementation}}},
         {"phases", phases},
         {"peak_memory",
          {{"measured_bytes", r.m.peak_bytes}, {"predicted_bytes", r.predicted_peak_bytes},
           {"error_pct", block_error_pct(double(r.predicted_peak_bytes), double(r.m.peak_bytes))}}},
         {"correct", r.m.correct},
         {"checks", r.m.checks},
         {"checks_failed", r.m.checks_failed}};
  if (raw) {
    if (!raw->attn_kernel.empty()) j["attn_kernel"] = raw->attn_kernel;  // the kernel that ran (the set may mix them)
    j["peak_bytes_per_rank"] = raw->peak_bytes_per_rank;
    j["a2a_bytes_per_rank"] = {{"q", raw->a2a_q_bytes_per_rank}, {"kv", raw->a2a_kv_bytes_per_rank}};
    Json checks = Json::array();
    for (const auto& c : raw->checks)
      checks.push_back({{"name", c.name}, {"wrong", c.wrong}, {"max_abs_err", c.max_abs_err}, {"tolerance", c.tolerance}, {"passed", c.passed}});
    j["check_list"] = checks;
  }
  return j;
}

reports::Json summary_json(const Summary& s) {
  using reports::Json;
  auto one = [](const ErrorStats& e) {
    return Json{{"cases", e.errors_pct.size()}, {"median_abs_error_pct", e.median_abs()}, {"max_abs_error_pct", e.max_abs()},
                {"mean_signed_error_pct", e.mean_signed()}, {"worst_case", e.worst_case()}};
  };
  Json j;
  for (const auto& p : s.phases) j[p.name] = one(p);
  j["every phase"] = one(s.all_phases);
  j["block total"] = one(s.block_total);
  j["peak memory"] = one(s.memory);
  j["incorrect_cases"] = s.incorrect;
  return j;
}

}  // namespace ulysses::eval
