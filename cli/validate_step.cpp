#include "cli/validate_step.hpp"

#include <chrono>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/runtime_common.hpp"
#include "cli/step_common.hpp"
#include "cli/validation.hpp"
#include "eval/step_record.hpp"
#include "reports/file_out.hpp"
#include "reports/version.hpp"
#include "core/errors.hpp"
#include "sim/predict.hpp"

namespace ulysses::cli {

namespace {
constexpr const char* kFormat = "ulysses-step-validation/1";
using Json = reports::Json;

eval::StepCase step_case_of(StepSetCase s) {
  eval::StepCase r;
  r.name = std::move(s.name);
  r.keys = std::move(s.keys);
  r.sc = std::move(s.sc);
  return r;
}

int report(const std::vector<eval::StepCase>& cases, const std::string& title) {
  const eval::StepSummary s = eval::summarize_steps(cases);
  std::cout << title << "\n\n" << eval::step_cases_table(cases) << "\n" << eval::step_summary_table(s);
  const auto missed = eval::missed_step_targets(s);
  for (const auto& m : missed) std::cout << "missed: " << m << "\n";
  if (missed.empty()) std::cout << "all targets met\n";
  return missed.empty() ? core::kExitOk : core::kExitFailure;
}
}  // namespace

bool is_step_record(const Json& j) { return j.value("format", "") == kFormat; }

int run_step_set(const po::variables_map& vm, const std::string& measured_at, const std::string& command) {
  if (!vm.count("out")) throw core::InputError("", "--out", "required with --set (where the validation record is written)");
  const ValidationSet set = load_validation_set(vm["set"].as<std::string>());
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : set.profile;
  const std::string out_path = vm["out"].as<std::string>();
  const std::string tmp_path = out_path + ".partial";
  {  // a bad path fails before the first run; nothing is left behind
    std::ofstream probe(tmp_path);
    if (!probe) throw core::InputError("", "--out", "cannot write '" + out_path + "'");
  }
  std::remove(tmp_path.c_str());
  std::vector<std::string> only;
  if (vm.count("case")) only = vm["case"].as<std::vector<std::string>>();
  std::vector<eval::StepCase> todo;
  for (const auto& c : set.cases) {  // every scenario built and checked before anything runs
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    Keys keys = set.defaults;
    keys.insert(keys.end(), c.keys.begin(), c.keys.end());
    todo.push_back(step_case_of(step_set_case(set.model, profile, c.name, keys, set.path)));
  }
  if (todo.empty()) throw core::InputError("", "--case", "selects no case of the set");
  runtime::deepspeed::StepOptions base = step_options_of(vm);
  Json rec{{"format", kFormat}, {"set", set.path}, {"set_name", set.name}, {"model", set.model}, {"profile", set.profile},
           {"profile_used", profile}, {"backend", "deepspeed"}, {"measured_at", measured_at}, {"command", command},
           {"version", reports::version_json()},
           {"error_pct_convention", "(predicted - measured) / measured * 100; per step, median over timed steps, max over ranks"},
           {"options", {{"warmup", base.warmup}, {"iters", base.iters}, {"seed", base.seed}}},
           {"cases", Json::array()}};
  std::vector<eval::StepCase> done;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < todo.size(); ++i) {
    eval::StepCase& r = todo[i];
    runtime::deepspeed::StepOptions o = base;
    const Prediction p = predict(r.sc);
    try {
      r.m = runtime::deepspeed::run_step(r.sc, o, set.path);
    } catch (const core::InputError&) {
      throw;
    } catch (const std::exception& e) {
      std::cerr << fmt::format("case {}: run failed: {}\n", r.name, e.what());
      rec["failed_cases"].push_back({{"name", r.name}, {"error", e.what()}});
      continue;
    }
    r.c = eval::compare_step(p, r.m);
    rec["device"] = r.m.device;
    rec["cases"].push_back(eval::step_case_json(r));
    std::cerr << fmt::format("[{:.0f} s] case {} ({}/{}): step {:.3f} s, allocated {:+.1f} %, reserved {:+.1f} %\n",
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), r.name, i + 1,
                             todo.size(), r.m.step_median_s, r.c.allocated.error_pct, r.c.reserved.error_pct);
    done.push_back(r);
    reports::write_file_atomic(tmp_path, rec.dump(1) + "\n");  // progress so far, never under the final name
  }
  rec["summary"] = eval::step_summary_json(eval::summarize_steps(done));
  rec["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (done.size() == todo.size()) {
    reports::write_file_atomic(out_path, rec.dump(1) + "\n");
    std::remove(tmp_path.c_str());
  } else {
    reports::write_file_atomic(tmp_path, rec.dump(1) + "\n");
    std::cerr << fmt::format("{} of {} cases failed: the record stays at {}\n", todo.size() - done.size(), todo.size(), tmp_path);
  }
  std::cout << "wrote " << (done.size() == todo.size() ? out_path : tmp_path) << "\n";
  const int rc = report(done, fmt::format("step validation set {} on backend deepspeed, profile {}", set.path, profile));
  return done.size() == todo.size() ? rc : core::kExitFailure;
}

int run_step_stored(const po::variables_map& vm, const Json& rec, const std::string& path) {
  const std::string model = rec.value("model", "");
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : rec.value("profile", "");
  std::vector<eval::StepCase> cases;
  for (std::size_t i = 0; i < rec["cases"].size(); ++i) {
    const Json& c = rec["cases"][i];
    try {
      Keys keys;
      for (const auto& kv : c.at("keys")) keys.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
      eval::StepCase r = step_case_of(step_set_case(model, profile, c.at("name").get<std::string>(), keys, path));
      r.m = eval::measurement_from_case(c);
      r.c = eval::compare_step(predict(r.sc), r.m);
      cases.push_back(std::move(r));
    } catch (const core::InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw core::InputError(path, fmt::format("cases[{}]", i), std::string("is not a stored step case (") + e.what() + ")");
    }
  }
  if (vm.count("json")) {
    Json out{{"record", path}, {"profile", profile}, {"summary", eval::step_summary_json(eval::summarize_steps(cases))},
             {"cases", Json::array()}};
    for (const auto& r : cases) out["cases"].push_back(eval::step_case_json(r));
    reports::write_file_atomic(vm["json"].as<std::string>(), out.dump(1) + "\n");
  }
  return report(cases, fmt::format("step validation record {} ({} cases, measured {} on {}) re-predicted with profile {}",
                                   path, cases.size(), rec.value("measured_at", "?"), rec.value("device", "?"), profile));
}

}  // namespace ulysses::cli
