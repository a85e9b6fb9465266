#include "cli/capacity_step.hpp"

#include <cmath>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/step_common.hpp"
#include "cli/validation.hpp"
#include "eval/step_capacity.hpp"
#include "eval/step_compare.hpp"
#include "reports/table.hpp"
#include "sim/errors.hpp"

namespace ulysses::cli {

namespace {
constexpr const char* kFormat = "ulysses-step-capacity/1";
using Json = reports::Json;

struct Case {
  std::string name;
  Keys keys;
  RunKeys run;
  Scenario sc;
  std::int64_t predicted_S = 0, measured_S = 0, failed_S = 0;  // failed_S: the shortest length that ran out
  std::string binding;
  Json probes = Json::array();
};

int report(const std::vector<Case>& cases, double max_err, const std::string& title) {
  reports::Table t({{"case", "", reports::Align::left}, {"ballast", "GiB"}, {"predicted S", "tokens"}, {"measured S", "tokens"},
                    {"first OOM", "tokens"}, {"error", "%"}, {"binds", "", reports::Align::left}});
  std::vector<std::string> missed;
  for (const auto& c : cases) {
    const double e = eval::error_pct(double(c.predicted_S), double(c.measured_S));
    t.add_row({c.name, fmt::format("{:.1f}", double(c.run.ballast_bytes) / double(1ULL << 30)), fmt::format("{}", c.predicted_S),
               fmt::format("{}", c.measured_S), fmt::format("{}", c.failed_S), fmt::format("{:+.2f}", e), c.binding});
    if (max_err >= 0 && !(std::fabs(e) <= max_err)) missed.push_back(fmt::format("{}: predicted {} vs measured {} ({:+.2f} %)", c.name, c.predicted_S, c.measured_S, e));
  }
  std::cout << title << "\n\n" << t.render()
            << fmt::format("measured S: the longest probed length that ran (the true one is below 'first OOM')\n"
                           "target: predicted within {} % of measured: {}\n", max_err, missed.empty() ? "met" : "MISSED");
  for (const auto& m : missed) std::cout << "missed: " << m << "\n";
  return missed.empty() ? kExitOk : kExitFailure;
}

Json case_json(const Case& c) {
  Json keys = Json::array();
  for (const auto& [k, v] : c.keys) keys.push_back({k, v});
  return {{"name", c.name}, {"keys", keys}, {"ballast_bytes", c.run.ballast_bytes}, {"predicted_S", c.predicted_S},
          {"binding", c.binding}, {"measured_S", c.measured_S}, {"first_oom_S", c.failed_S}, {"probes", c.probes}};
}
}  // namespace

bool is_step_capacity_record(const Json& j) { return j.value("format", "") == kFormat; }

int run_step_capacity_set(const po::variables_map& vm, const std::string& measured_at, const std::string& command) {
  if (!vm.count("out")) throw InputError("", "--out", "required with --set");
  const ValidationSet set = load_validation_set(vm["set"].as<std::string>());
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : set.profile;
  const std::int64_t g = vm["granularity"].as<std::int64_t>();
  if (g < 256 || g % 256) throw InputError("", "--granularity", fmt::format("must be a positive multiple of 256 (got {})", g));
  const std::string out_path = vm["out"].as<std::string>(), tmp = out_path + ".partial";
  { std::ofstream p(tmp); if (!p) throw InputError("", "--out", "cannot write '" + out_path + "'"); }
  std::vector<Case> cases;
  for (const auto& c : set.cases) {
    Case k;
    k.name = c.name;
    k.keys = set.defaults;
    k.keys.insert(k.keys.end(), c.keys.begin(), c.keys.end());
    Keys sk = k.keys;
    k.run = split_run_keys(sk, set.path, c.name);
    k.sc = case_scenario(set.model, profile, sk, set.path, c.name);
    (void)runtime::deepspeed::job_json(k.sc, {}, "", set.path);
    cases.push_back(std::move(k));
  }
  runtime::deepspeed::StepOptions base;
  base.warmup = 1;  // a probe: one warm-up step and one measured step per length
  base.iters = 1;
  Json rec{{"format", kFormat}, {"set", set.path}, {"model", set.model}, {"profile", set.profile}, {"profile_used", profile},
           {"granularity", g}, {"measured_at", measured_at}, {"command", command}, {"cases", Json::array()}};
  for (auto& c : cases) {
    const CapacityResult pr = eval::predicted_step_capacity(c.sc, c.run.ballast_bytes, g);
    c.predicted_S = pr.max_seq_len;
    c.binding = to_string(pr.binding);
    if (c.predicted_S <= 0) throw InputError(set.path, "cases." + c.name, "the planner fits no length: nothing to bisect");
    runtime::deepspeed::StepOptions o = base;
    o.expandable_segments = c.run.expandable_segments;
    o.ballast_bytes = c.run.ballast_bytes;
    std::int64_t lo = 0, hi = 0;
    std::vector<std::int64_t> ladder = eval::first_ladder(c.predicted_S, g);
    for (int round = 0; round < 3 && !ladder.empty(); ++round) {
      o.probe_seq_lens = ladder;
      Scenario s = c.sc;
      s.plan.seq_len = ladder.back();
      const auto r = runtime::deepspeed::run_probes(s, o, set.path);
      for (const auto& p : r.fits) {
        lo = std::max(lo, p.seq_len);
        c.probes.push_back({{"seq_len", p.seq_len}, {"fits", true}, {"max_memory_allocated", p.max_memory_allocated},
                            {"max_memory_reserved", p.max_memory_reserved}});
      }
      if (r.oom_at > 0) {
        hi = hi ? std::min(hi, r.oom_at) : r.oom_at;
        c.probes.push_back({{"seq_len", r.oom_at}, {"fits", false}});
      }
      std::cerr << fmt::format("case {} round {}: fits up to {}, first OOM {}\n", c.name, round + 1, lo, hi);
      if (hi == 0) ladder = {ladder.back() * 2, ladder.back() * 3};  // nothing failed: go higher
      else if (lo == 0) ladder = eval::ladder_between(0, hi, 4, g);   // the first probe failed: go lower
      else ladder = eval::ladder_between(lo, hi, 5, g);               // refine inside the bracket
      if (hi > 0 && lo > 0 && double(hi - lo) <= 0.02 * double(lo)) break;  // resolution 2 %: the target is 3 %
    }
    if (lo == 0 || hi == 0) throw std::runtime_error(fmt::format("case {}: could not bracket the longest S", c.name));
    c.measured_S = lo;
    c.failed_S = hi;
    rec["cases"].push_back(case_json(c));
    std::ofstream part(tmp);
    part << rec.dump(1) << "\n";
  }
  { std::ofstream o(tmp); o << rec.dump(1) << "\n"; if (!o.flush()) throw InputError("", "--out", "cannot write '" + out_path + "'"); }
  std::rename(tmp.c_str(), out_path.c_str());
  std::cout << "wrote " << out_path << "\n";
  return report(cases, vm["max-error-pct"].as<double>(), fmt::format("step capacity set {} (deepspeed), profile {}", set.path, profile));
}

int run_step_capacity_stored(const po::variables_map& vm, const Json& rec, const std::string& path) {
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : rec.value("profile", "");
  const std::int64_t g = rec.value("granularity", std::int64_t{1024});
  std::vector<Case> cases;
  for (std::size_t i = 0; i < rec["cases"].size(); ++i) {
    const Json& j = rec["cases"][i];
    try {
      Case c;
      c.name = j.at("name").get<std::string>();
      for (const auto& kv : j.at("keys")) c.keys.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
      Keys sk = c.keys;
      c.run = split_run_keys(sk, path, c.name);
      c.sc = case_scenario(rec.value("model", ""), profile, sk, path, c.name);
      const CapacityResult pr = eval::predicted_step_capacity(c.sc, c.run.ballast_bytes, g);
      c.predicted_S = pr.max_seq_len, c.binding = to_string(pr.binding);
      c.measured_S = j.at("measured_S").get<std::int64_t>();
      c.failed_S = j.value("first_oom_S", std::int64_t{0});
      cases.push_back(std::move(c));
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw InputError(path, fmt::format("cases[{}]", i), std::string("is not a stored step capacity case (") + e.what() + ")");
    }
  }
  return report(cases, vm["max-error-pct"].as<double>(),
                fmt::format("step capacity record {} (measured {}) re-predicted with profile {}", path, rec.value("measured_at", "?"), profile));
}

}  // namespace ulysses::cli
