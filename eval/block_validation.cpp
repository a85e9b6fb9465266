#include "cli/validation.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <unordered_set>

#include <fmt/format.h>

#include "reports/json_in.hpp"
#include "reports/table.hpp"
#include "sim/config.hpp"
#include "sim/config_internal.hpp"
#include "sim/errors.hpp"
#include "sim/phases.hpp"

namespace ulysses::cli {
namespace {

Keys keys_of(const YAML::Node& n, const cfg::Where& w, std::string* name) {
  Keys out;
  for (const auto& [k, v] : cfg::map_items(n, w)) {
    const cfg::Where wk = w.child(k);
    const std::string text = cfg::scalar_of(v, wk, "a scalar value").text;
    if (k == "name" && name) *name = text;
    else out.emplace_back(k, text);
  }
  return out;
}

bool is_exchange(int phase) {
  const auto p = static_cast<BlockPhase>(phase);
  return p != BlockPhase::attn_fwd && p != BlockPhase::attn_bwd;
}

std::string pct(double v) { return fmt::format("{:+.1f}", v); }

}  // namespace

ValidationSet load_validation_set(const std::string& path) {
  const YAML::Node root = cfg::load_file(path);
  const cfg::Where w{path, "", cfg::dir_of(path)};
  const auto items = cfg::map_items(root, w);
  cfg::reject_unknown(items, {"name", "model", "profile", "defaults", "cases"}, w);
  cfg::require_keys(items, {"model", "profile", "cases"}, w);
  ValidationSet s;
  s.path = path;
  s.name = cfg::stem_of(path);
  for (const auto& [k, v] : items) {
    const cfg::Where wk = w.child(k);
    if (k == "name") s.name = cfg::parse_string(cfg::scalar_of(v, wk, "a text"), wk);
    else if (k == "model") s.model = cfg::parse_string(cfg::scalar_of(v, wk, "a model preset name"), wk);
    else if (k == "profile") s.profile = cfg::parse_string(cfg::scalar_of(v, wk, "a profile name"), wk);
    else if (k == "defaults") s.defaults = keys_of(v, wk, nullptr);
    else if (k == "cases") {
      if (!v.IsSequence() || v.size() == 0) wk.fail("must be a non-empty list of cases (maps of scenario keys)");
      std::unordered_set<std::string> names;  // linear in the cases (issue 17)
      for (std::size_t i = 0; i < v.size(); ++i) {
        const cfg::Where wi{path, fmt::format("cases[{}]", i), w.dir};
        ValidationCase c;
        c.name = fmt::format("case{}", i);
        c.keys = keys_of(v[i], wi, &c.name);
        if (!names.insert(c.name).second) wi.child("name").fail(fmt::format("'{}' is used by another case", c.name));
        s.cases.push_back(std::move(c));
      }
    }
  }
  // every case must build a valid scenario: fail now, naming the case, not in the middle of a run
  // (run.* keys are the deepspeed backend's worker options: cli/step_common.hpp checks them; a block
  // backend passes them to case_scenario, which refuses them as unknown keys)
  for (std::size_t i = 0; i < s.cases.size(); ++i) {
    Keys all;
    for (const auto& kv : s.defaults)
      if (kv.first.rfind("run.", 0) != 0) all.push_back(kv);
    for (const auto& kv : s.cases[i].keys)
      if (kv.first.rfind("run.", 0) != 0) all.push_back(kv);
    case_scenario(s.model, s.profile, all, path, s.cases[i].name);
  }
  return s;
}

Scenario case_scenario(const std::string& model, const std::string& profile, const Keys& keys, const std::string& origin,
                       const std::string& name) {
  Scenario sc;
  sc.name = name;
  set_key(sc, "model", model, origin);
  set_key(sc, "profile", profile, origin);
  bool gpus_given = false;
  for (const auto& [k, v] : keys) {
    set_key(sc, k, v, origin);
    gpus_given = gpus_given || k == "gpus";
  }
  if (!gpus_given) {
    std::int64_t g = 0;
    if (__builtin_mul_overflow(sc.plan.sp_size, sc.plan.dp_replicate_size, &g) || __builtin_mul_overflow(g, sc.plan.dp_shard_size, &g))
      throw InputError(origin, "cases." + name + ".gpus",
                       "plan.sp_size * dp_replicate_size * dp_shard_size does not fit in 64 bits");
    sc.gpus = g;
  }
  validate(sc, origin.empty() ? name : origin + " (case " + name + ")");
  return sc;
}

CaseMeasurement measurement_of(const runtime::Measurement& m) {
  CaseMeasurement c;
  for (std::size_t i = 0; i < m.phases.size() && i < 6; ++i) {
    // phases are in BlockPhase order; look them up by name all the same
    const auto it = std::find(kBlockPhaseNames.begin(), kBlockPhaseNames.end(), m.phases[i].name);
    const auto k = static_cast<std::size_t>(it - kBlockPhaseNames.begin());
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

double error_pct(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured * 100.0 : (predicted > 0 ? 1e9 : 0.0);
}

double ErrorStats::median_abs() const {
  std::vector<double> a;
  for (double e : errors_pct) a.push_back(std::fabs(e));
  if (a.empty()) return 0;
  std::sort(a.begin(), a.end());
  const std::size_t n = a.size();
  return n % 2 ? a[n / 2] : 0.5 * (a[n / 2 - 1] + a[n / 2]);
}
double ErrorStats::max_abs() const {
  double m = 0;
  for (double e : errors_pct) m = std::max(m, std::fabs(e));
  return m;
}
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

Summary summarize(const std::vector<CaseResult>& r) {
  Summary s;
  for (int k = 0; k < 6; ++k) s.phases.push_back(ErrorStats{std::string(kBlockPhaseNames[k]), {}, {}});
  s.block_total.name = "block total";
  s.memory.name = "peak memory";
  s.all_phases.name = "every phase";
  for (const auto& c : r) {
    double pt = 0, mt = 0;
    for (int k = 0; k < 6; ++k) {
      pt += c.p.block[k], mt += c.m.phase_s[k];
      if (!phase_scored(k, c.sc.plan.sp_size)) continue;
      const double e = error_pct(c.p.block[k], c.m.phase_s[k]);
      s.phases[k].errors_pct.push_back(e), s.phases[k].cases.push_back(c.name);
      s.all_phases.errors_pct.push_back(e), s.all_phases.cases.push_back(c.name + " " + s.phases[k].name);
    }
    s.block_total.errors_pct.push_back(error_pct(pt, mt)), s.block_total.cases.push_back(c.name);
    s.memory.errors_pct.push_back(error_pct(static_cast<double>(c.predicted_peak_bytes), static_cast<double>(c.m.peak_bytes)));
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
  for (auto n : kBlockPhaseNames) cols.push_back({std::string(n), "us pred/meas err%"});
  cols.push_back({"peak", "GiB pred/meas err%"});
  reports::Table t(cols);
  for (const auto& c : r) {
    std::vector<std::string> row{c.name, fmt::format("{}", c.sc.plan.sp_size), fmt::format("{}", c.p.padded_seq_len),
                                 fmt::format("{}/{}/{}", c.sc.model.heads, c.sc.model.kv_heads, c.sc.model.head_dim),
                                 c.sc.workload.causal ? "causal" : "full"};
    for (int k = 0; k < 6; ++k) {
      if (!phase_scored(k, c.sc.plan.sp_size)) { row.push_back("-"); continue; }
      row.push_back(fmt::format("{:.0f}/{:.0f} {}", c.p.block[k] * 1e6, c.m.phase_s[k] * 1e6,
                                pct(error_pct(c.p.block[k], c.m.phase_s[k]))));
    }
    row.push_back(fmt::format("{:.2f}/{:.2f} {}", c.predicted_peak_bytes / 1073741824.0, c.m.peak_bytes / 1073741824.0,
                              pct(error_pct(double(c.predicted_peak_bytes), double(c.m.peak_bytes)))));
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
    phases.push_back({{"name", kBlockPhaseNames[k]}, {"measured_s", r.m.phase_s[k]}, {"measured_min_s", r.m.phase_min_s[k]},
                      {"measured_max_s", r.m.phase_max_s[k]}, {"predicted_s", r.p.block[k]},
                      {"error_pct", error_pct(r.p.block[k], r.m.phase_s[k])}, {"scored", phase_scored(k, r.sc.plan.sp_size)}});
  Json j{{"name", r.name},
         {"keys", keys},
         {"shape",
          {{"B", r.sc.plan.micro_batch_size}, {"S", r.p.padded_seq_len}, {"H", r.sc.model.heads}, {"H_kv", r.sc.model.kv_heads},
           {"D", r.sc.model.head_dim}, {"P", r.sc.plan.sp_size}, {"causal", r.sc.workload.causal},
           {"kv_strategy", reports::to_string(r.sc.plan.kv_strategy)}, {"attn_implementation", r.sc.plan.attn_implementation}}},
         {"phases", phases},
         {"peak_memory",
          {{"measured_bytes", r.m.peak_bytes}, {"predicted_bytes", r.predicted_peak_bytes},
           {"error_pct", error_pct(double(r.predicted_peak_bytes), double(r.m.peak_bytes))}}},
         {"correct", r.m.correct},
         {"checks", r.m.checks},
         {"checks_failed", r.m.checks_failed}};
  if (raw) {
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

namespace {

// The fields the `--stored` commands read (cli/cmd_validate.cpp, cmd_capacity.cpp, validate_step.cpp,
// capacity_step.cpp, eval/step_record.cpp), checked once here: a missing key or a wrong type is one
// line naming the file and the key (the readers then find what they expect).
constexpr std::int64_t kMaxRecordBytes = std::int64_t{1} << 53;  // exact in a double
constexpr std::int64_t kMaxRecordS = std::int64_t{1} << 40;

// Every field of a stored step measurement that measurement_from_json (runtime/deepspeed) reads.
void check_step_measurement(const reports::JsonIn& m) {
  constexpr std::int64_t kMaxBytes = std::int64_t{1} << 53;  // exact in a double
  constexpr double kMaxS = 1e7;
  m.object();
  for (const char* k : {"device", "pytorch_cuda_alloc_conf", "peak_at"})
    if (m.has(k)) m.at(k).str();
  if (m.has("versions")) m.at("versions").object();
  if (m.has("ranks")) m.at("ranks").integer(1, 1 << 20);
  for (const char* k : {"layers", "seq_len"})
    if (m.has(k)) m.at(k).integer(0, std::int64_t{1} << 40);
  for (const char* k : {"device_used_bytes", "host_rss_bytes", "host_rss_peak_bytes", "checkpoint_pinned_bytes"})
    if (m.has(k)) m.at(k).integer(0, kMaxBytes);
  if (m.has("wall_s")) m.at("wall_s").number_in(0, false, kMaxS, false, "a time in seconds >= 0");
  if (m.has("losses")) {
    const reports::JsonIn l = m.at("losses");
    l.array();
    for (std::size_t i = 0; i < l.json().size(); ++i)
      if (!l.json()[i].is_null()) l.at(i).number();  // null: a non-finite loss
  }
  const reports::JsonIn ph = m.at("phases");
  ph.array();
  for (std::size_t i = 0; i < ph.json().size(); ++i) {
    const reports::JsonIn p = ph.at(i);
    p.at("name").str();
    p.at("median_s").number_in(0, false, kMaxS, false, "a time in seconds >= 0");
    for (const char* k : {"min_s", "max_s"})
      if (p.has(k)) p.at(k).number_in(0, false, kMaxS, false, "a time in seconds >= 0");
    if (p.has("kernel_s")) p.at("kernel_s").number_in(-1, false, kMaxS, false, "a time in seconds >= 0 (or -1: not traced)");
    for (const char* k : {"alloc_start_bytes", "peak_bytes", "peak_reserved_bytes"})
      if (p.has(k)) p.at(k).integer(0, kMaxBytes);
  }
  const reports::JsonIn step = m.at("step_s");
  step.at("median").number_in(0, true, kMaxS, false, "a time in seconds > 0");
  for (const char* k : {"min", "max"})
    if (step.has(k)) step.at(k).number_in(0, false, kMaxS, false, "a time in seconds >= 0");
  m.at("max_memory_allocated").integer(1, kMaxBytes);
  m.at("max_memory_reserved").integer(0, kMaxBytes);
}

void check_case_keys(const reports::JsonIn& c) {
  c.at("name").str();
  const reports::JsonIn keys = c.at("keys");
  keys.array();
  for (std::size_t k = 0; k < keys.json().size(); ++k) {
    const reports::JsonIn kv = keys.at(k);
    if (!kv.json().is_array() || kv.json().size() != 2) kv.fail("must be a [key, value] pair of text");
    kv.at(0).str(), kv.at(1).str();
  }
}

void check_block_case(const reports::JsonIn& c) {
  const reports::JsonIn ph = c.at("phases");
  ph.array(6);
  for (std::size_t k = 0; k < 6; ++k) {
    const reports::JsonIn p = ph.at(k);
    if (p.at("name").str() != kBlockPhaseNames[k])
      p.at("name").fail(fmt::format("must be '{}' (the six block phases in order)", kBlockPhaseNames[k]));
    p.at("measured_s").number_in(0, true, 1e6, false, "a time in seconds > 0");
    for (const char* opt : {"measured_min_s", "measured_max_s"})
      if (p.has(opt)) p.at(opt).number_in(0, false, 1e6, false, "a time in seconds >= 0");
  }
  c.at("peak_memory").at("measured_bytes").integer(1, kMaxRecordBytes);
  c.at("correct").boolean();
}

void check_capacity_case(const reports::JsonIn& c, bool step) {
  c.at("measured_S").integer(0, kMaxRecordS);
  if (step && c.has("first_oom_S")) c.at("first_oom_S").integer(0, kMaxRecordS);
}

}  // namespace

reports::Json load_record(const std::string& path, const std::string& producer) {
  const reports::Json j = reports::read_json_file(path, "--stored");
  const reports::JsonIn r(j, path);
  if (!j.is_object()) r.fail("is not a JSON object: not a record of `" + producer + "`");
  for (const char* k : {"format", "model", "profile", "backend", "device", "measured_at", "set_name"})
    if (r.has(k)) r.at(k).str();
  if (!r.has("cases") || !j["cases"].is_array() || j["cases"].empty())
    throw InputError(path, "cases", "missing or empty: not a record of `" + producer + "`");
  r.integer_or("granularity", 1024, 1, std::int64_t{1} << 24);
  const std::string format = r.str_or("format", "");
  const bool capacity = producer.find("capacity") != std::string::npos;
  const bool step = format == (capacity ? "ulysses-step-capacity/1" : "ulysses-step-validation/1");
  const reports::JsonIn cases = r.at("cases");
  for (std::size_t i = 0; i < j["cases"].size(); ++i) {
    const reports::JsonIn c = cases.at(i);
    c.object();
    check_case_keys(c);
    if (capacity) check_capacity_case(c, step);
    else if (step) check_step_measurement(c.at("measured"));
    else check_block_case(c);
  }
  return j;
}

}  // namespace ulysses::cli
