#include "cli/capacity_step.hpp"

#include <cmath>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/step_common.hpp"
#include "cli/validation.hpp"
#include "eval/step_capacity.hpp"
#include "eval/step_compare.hpp"
#include "reports/file_out.hpp"
#include "reports/table.hpp"
#include "reports/version.hpp"
#include "sim/errors.hpp"
#include "sim/tokens.hpp"

namespace ulysses::cli {

namespace {
constexpr const char* kFormat = "ulysses-step-capacity/1";
using Json = reports::Json;

struct Case {
  StepSetCase set;
  std::int64_t predicted_S = 0, measured_S = 0, failed_S = 0;  // failed_S: the shortest length that ran out
  std::string binding;
  Json probes = Json::array();
};

void predict_case(Case& c, std::int64_t g) {
  const CapacityResult pr = eval::predicted_step_capacity(c.set.sc, c.set.run.ballast_bytes, g);
  c.predicted_S = pr.max_seq_len;
  c.binding = to_string(pr.binding);
}

int report(const std::vector<Case>& cases, double max_err, const std::string& title) {
  reports::Table t({{"case", "", reports::Align::left}, {"ballast", "GiB"}, {"predicted S", "tokens"}, {"measured S", "tokens"},
                    {"first OOM", "tokens"}, {"error", "%"}, {"binds", "", reports::Align::left}});
  std::vector<std::string> missed;
  for (const auto& c : cases) {
    const double e = eval::error_pct(double(c.predicted_S), double(c.measured_S));
    t.add_row({c.set.name, fmt::format("{:.1f}", double(c.set.run.ballast_bytes) / double(1ULL << 30)),
               fmt::format("{}", c.predicted_S), fmt::format("{}", c.measured_S), fmt::format("{}", c.failed_S),
               fmt::format("{:+.2f}", e), c.binding});
    if (max_err >= 0 && !(std::fabs(e) <= max_err))
      missed.push_back(fmt::format("{}: predicted {} vs measured {} ({:+.2f} %)", c.set.name, c.predicted_S, c.measured_S, e));
  }
  std::cout << title << "\n\n" << t.render()
            << fmt::format("measured S: the longest probed length that ran (the true one is below 'first OOM')\n"
                           "target: predicted within {} % of measured: {}\n", max_err, missed.empty() ? "met" : "MISSED");
  for (const auto& m : missed) std::cout << "missed: " << m << "\n";
  return missed.empty() ? kExitOk : kExitFailure;
}

Json case_json(const Case& c) {
  Json keys = Json::array();
  for (const auto& [k, v] : c.set.keys) keys.push_back({k, v});
  return {{"name", c.set.name}, {"keys", keys}, {"ballast_bytes", c.set.run.ballast_bytes}, {"predicted_S", c.predicted_S},
          {"binding", c.binding}, {"measured_S", c.measured_S}, {"first_oom_S", c.failed_S}, {"probes", c.probes}};
}
}  // namespace

bool is_step_capacity_record(const Json& j) { return j.value("format", "") == kFormat; }

int run_step_capacity_set(const po::variables_map& vm, const std::string& measured_at, const std::string& command) {
  if (!vm.count("out")) throw InputError("", "--out", "required with --set");
  const ValidationSet set = load_validation_set(vm["set"].as<std::string>());
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : set.profile;
  const std::int64_t g = parse_tokens(vm["granularity"].as<std::string>(), "", "--granularity");
  if (g < 256 || g % 256) throw InputError("", "--granularity", fmt::format("must be a positive multiple of 256 (got {})", g));
  const std::string out_path = vm["out"].as<std::string>(), partial = out_path + ".partial";
  {  // a bad path fails before the first probe; nothing is left behind
    std::ofstream p(partial);
    if (!p) throw InputError("", "--out", "cannot write '" + out_path + "'");
  }
  std::remove(partial.c_str());
  std::vector<Case> cases;
  for (const auto& c : set.cases) {
    Keys keys = set.defaults;
    keys.insert(keys.end(), c.keys.begin(), c.keys.end());
    Case k;
    k.set = step_set_case(set.model, profile, c.name, keys, set.path);
    predict_case(k, g);
    if (k.predicted_S <= 0) throw InputError(set.path, "cases." + c.name, "the planner fits no length: nothing to bisect");
    cases.push_back(std::move(k));
  }
  Json rec{{"format", kFormat}, {"set", set.path}, {"model", set.model}, {"profile", set.profile}, {"profile_used", profile},
           {"granularity", g}, {"measured_at", measured_at}, {"command", command}, {"version", reports::version_json()},
           {"cases", Json::array()}};
  for (auto& c : cases) {
    runtime::deepspeed::StepOptions o;
    o.warmup = 1;  // a probe: one warm-up step and one measured step per length
    o.iters = 1;
    o.ballast_bytes = c.set.run.ballast_bytes;
    const eval::Bisection b = eval::bisect_capacity(
        c.predicted_S, g,
        [&](const std::vector<std::int64_t>& ladder) {
          o.probe_seq_lens = ladder;
          Scenario s = c.set.sc;
          s.plan.seq_len = ladder.back();
          return runtime::deepspeed::run_probes(s, o, set.path);
        },
        [&](int round, const eval::Bisection& now) {
          std::cerr << fmt::format("case {} round {}: fits up to {}, first OOM {}\n", c.set.name, round, now.fits, now.first_oom);
        });
    for (const auto& p : b.ran)
      c.probes.push_back({{"seq_len", p.seq_len}, {"fits", true}, {"max_memory_allocated", p.max_memory_allocated},
                          {"max_memory_reserved", p.max_memory_reserved}});
    for (std::int64_t s : b.oom) c.probes.push_back({{"seq_len", s}, {"fits", false}});
    if (b.fits == 0 || b.first_oom == 0)
      throw std::runtime_error(fmt::format("case {}: could not bracket the longest S (record so far: {})", c.set.name, partial));
    c.measured_S = b.fits;
    c.failed_S = b.first_oom;
    rec["cases"].push_back(case_json(c));
    reports::write_file_atomic(partial, rec.dump(1) + "\n");  // progress, never under the final name
  }
  reports::write_file_atomic(out_path, rec.dump(1) + "\n");
  std::remove(partial.c_str());
  std::cout << "wrote " << out_path << "\n";
  return report(cases, pct_option(vm, "max-error-pct"), fmt::format("step capacity set {} (deepspeed), profile {}", set.path, profile));
}

int run_step_capacity_stored(const po::variables_map& vm, const Json& rec, const std::string& path) {
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : rec.value("profile", "");
  const std::int64_t g = rec.value("granularity", std::int64_t{1024});  // 1..2^24: load_record checked it
  std::vector<Case> cases;
  for (std::size_t i = 0; i < rec["cases"].size(); ++i) {
    const Json& j = rec["cases"][i];
    try {
      Keys keys;
      for (const auto& kv : j.at("keys")) keys.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
      Case c;
      c.set = step_set_case(rec.value("model", ""), profile, j.at("name").get<std::string>(), keys, path);
      predict_case(c, g);
      c.measured_S = j.at("measured_S").get<std::int64_t>();
      c.failed_S = j.value("first_oom_S", std::int64_t{0});
      cases.push_back(std::move(c));
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw InputError(path, fmt::format("cases[{}]", i), std::string("is not a stored step capacity case (") + e.what() + ")");
    }
  }
  return report(cases, pct_option(vm, "max-error-pct"),
                fmt::format("step capacity record {} (measured {}) re-predicted with profile {}", path, rec.value("measured_at", "?"), profile));
}

}  // namespace ulysses::cli
