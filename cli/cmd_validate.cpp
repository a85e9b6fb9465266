// ulysses validate: the cost model against measured runs.
//   --set FILE --backend cpu|cuda --out FILE.json   runs every case of a validation set on the
//       backend next to its prediction, writes the record (cases as set_key keys, measured phases
//       and memory, environment) and prints the error tables;
//   --stored FILE.json                               re-predicts every stored case with today's
//       model and profile (no GPU needed) and prints the same tables.
// Both exit 1 when a case failed a correctness check or the errors exceed the targets
// (per phase: median |error| and max |error|; peak memory: max |error|; a negative target is off).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "cli/options.hpp"
#include "eval/block_run.hpp"
#include "eval/block_validation.hpp"
#include "eval/device_match.hpp"
#include "eval/record_in.hpp"
#include "eval/step_record.hpp"
#include "eval/step_run.hpp"
#include "eval/validation_set.hpp"
#include "reports/file_out.hpp"
#include "reports/format.hpp"
#include "reports/version.hpp"
#include "core/errors.hpp"
#include "sim/predict.hpp"

#ifdef ULYSSES_WITH_CUDA
#include "runtime/cuda/device_info.hpp"
#endif

namespace ulysses::cli {
namespace {

using reports::Json;
using reports::utc_now;
using eval::CaseResult;
using eval::Targets;
constexpr const char* kStepFormat = "ulysses-step-validation/1";

std::string command_line(int argc, char** argv) {
  std::string s = argv[0];  // "ulysses <command>"
  for (int i = 1; i < argc; ++i) s += " " + std::string(argv[i]);
  return s;
}

Json environment(const std::string& backend, const HardwareProfile& hw) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  Json e{{"host", host}, {"profile_provenance", hw.has_calibration ? hw.calibrated.provenance : "uncalibrated"}};
#ifdef ULYSSES_WITH_CUDA
  if (backend == "cuda") {
    const auto d = runtime::cuda::device_info();
    e["gpu"] = d.name, e["gpus"] = d.count, e["driver"] = d.driver, e["cuda_runtime"] = d.runtime, e["nccl"] = d.nccl;
    e["device_total_bytes"] = d.total_bytes;
  }
#else
  (void)backend;
#endif
  return e;
}

Targets targets_of(const po::variables_map& vm) {
  return {pct_option(vm, "max-median-error-pct"), pct_option(vm, "max-error-pct"), pct_option(vm, "max-memory-error-pct")};
}

int report(const std::vector<CaseResult>& results, const Targets& t, const std::string& title) {
  const eval::Summary s = eval::summarize(results);
  std::cout << title << "\n" << eval::cases_table(results) << "\n" << eval::summary_table(s);
  std::cout << "error = (predicted - measured) / measured; measured = median over iterations, max over ranks; "
               "exchanges at P = 1 are not scored\n";
  const auto missed = eval::missed_targets(s, t);
  std::cout << fmt::format("targets: per phase median |error| <= {}%, max |error| <= {}%; peak memory |error| <= {}%: {}\n",
                           t.max_median_error_pct, t.max_error_pct, t.max_memory_error_pct, missed.empty() ? "met" : "MISSED");
  for (const auto& m : missed) std::cout << "  missed: " << m << "\n";
  return missed.empty() ? core::kExitOk : core::kExitFailure;
}

// --- whole steps on the deepspeed backend or our runtime (format ulysses-step-validation/1) ---

int report_steps(const std::vector<eval::StepCase>& cases, const std::string& title, const std::string& backend) {
  const eval::StepSummary s = eval::summarize_steps(cases, backend);
  std::cout << title << "\n\n" << eval::step_cases_table(cases) << "\n" << eval::step_summary_table(s);
  if (cases.empty()) {
    std::cout << "no case was measured: no target is met\n";
    return core::kExitFailure;
  }
  const auto missed = eval::missed_step_targets(s);
  for (const auto& m : missed) std::cout << "missed: " << m << "\n";
  if (missed.empty()) std::cout << "all targets met\n";
  return missed.empty() ? core::kExitOk : core::kExitFailure;
}

int run_step_set(const po::variables_map& vm, const std::string& measured_at, const std::string& command) {
  if (!vm.count("out")) throw core::InputError("", "--out", "required with --set (where the validation record is written)");
  const eval::ValidationSet set = eval::load_validation_set(vm["set"].as<std::string>());
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
    todo.push_back(eval::step_case_of(eval::step_set_case(set.model, profile, c.name, eval::case_keys(set, c), set.path, backend_of(vm))));
  }
  if (todo.empty()) throw core::InputError("", "--case", "selects no case of the set");
  runtime::deepspeed::StepOptions base = step_options_of(vm);
  const std::string backend = backend_of(vm);
  Json rec{{"format", kStepFormat}, {"set", set.path}, {"set_name", set.name}, {"model", set.model}, {"profile", set.profile},
           {"profile_used", profile}, {"backend", backend}, {"measured_at", measured_at}, {"command", command},
           {"version", reports::version_json()},
           {"error_pct_convention", "(predicted - measured) / measured * 100; per step, median over timed steps, max over ranks"},
           {"options", {{"warmup", base.warmup}, {"iters", base.iters}, {"seed", base.seed}}},
           {"cases", Json::array()}};
  std::vector<eval::StepCase> done;
  bool gpu_checked = false;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < todo.size(); ++i) {
    eval::StepCase& r = todo[i];
    runtime::deepspeed::StepOptions o = base;
    const Prediction p = predict(r.sc);
    try {
      r.m = eval::run_whole_step(backend, r.sc, o, set.path);
    } catch (const core::InputError&) {
      throw;
    } catch (const std::exception& e) {
      std::cerr << fmt::format("case {}: run failed: {}\n", r.name, e.what());
      rec["failed_cases"].push_back({{"name", r.name}, {"error", e.what()}});
      continue;
    }
    r.c = eval::compare_step(r.sc, p, r.m);
    if (!gpu_checked) note_other_gpu(r.sc, r.m.device), gpu_checked = true;  // once per run: every case ran there
    rec["device"] = r.m.device;
    rec["cases"].push_back(eval::step_case_json(r));
    std::cerr << fmt::format("[{:.0f} s] case {} ({}/{}): step {:.3f} s, allocated {:+.1f} %, reserved {:+.1f} %\n",
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), r.name, i + 1,
                             todo.size(), r.m.step_median_s, r.c.allocated.error_pct, r.c.reserved.error_pct);
    done.push_back(r);
    reports::write_file_atomic(tmp_path, rec.dump(1) + "\n");  // progress so far, never under the final name
  }
  rec["summary"] = eval::step_summary_json(eval::summarize_steps(done, backend));
  rec["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (done.size() == todo.size()) {
    reports::write_file_atomic(out_path, rec.dump(1) + "\n");
    std::remove(tmp_path.c_str());
  } else {
    reports::write_file_atomic(tmp_path, rec.dump(1) + "\n");
    std::cerr << fmt::format("{} of {} cases failed: the record stays at {}\n", todo.size() - done.size(), todo.size(), tmp_path);
  }
  std::cout << "wrote " << (done.size() == todo.size() ? out_path : tmp_path) << "\n";
  const int rc = report_steps(done, fmt::format("step validation set {} on backend {}, profile {}", set.path, backend, profile), backend);
  return done.size() == todo.size() ? rc : core::kExitFailure;
}

int run_step_stored(const po::variables_map& vm, const Json& rec, const std::string& path) {
  const std::string profile = profile_for_stored(vm, rec, path);
  const std::vector<eval::StepCase> cases = eval::repredict_step_record(rec, path, profile);
  const std::string backend = rec.value("backend", "deepspeed");
  if (vm.count("json")) {
    Json out{{"record", path}, {"profile", profile}, {"summary", eval::step_summary_json(eval::summarize_steps(cases, backend))},
             {"cases", Json::array()}};
    for (const auto& r : cases) out["cases"].push_back(eval::step_case_json(r));
    reports::write_file_atomic(vm["json"].as<std::string>(), out.dump(1) + "\n");
  }
  return report_steps(cases, fmt::format("step validation record {} ({} cases, measured {} on {}) re-predicted with profile {}",
                                         path, cases.size(), rec.value("measured_at", "?"), rec.value("device", "?"), profile),
                      backend);
}

// --- the block on the cpu and cuda backends (format ulysses-validation/1) ---

int run_stored(const po::variables_map& vm) {
  const std::string path = vm["stored"].as<std::string>();
  const Json j = eval::load_record(path, "ulysses validate --out");
  if (j.value("format", "") == kStepFormat) return run_step_stored(vm, j, path);
  const std::string profile = profile_for_stored(vm, j, path);
  const std::vector<CaseResult> results = eval::repredict_block_record(j, path, profile);
  const std::string title = fmt::format(
      "validation record {} ({} cases, measured {} on {}, backend {}) re-predicted with profile {}", path, results.size(),
      j.value("measured_at", "?"), j.value("device", "?"), j.value("backend", "?"), profile);
  if (vm.count("json")) {
    Json out{{"record", path},           {"set_name", j.value("set_name", "")}, {"device", j.value("device", "")},
             {"measured_at", j.value("measured_at", "")}, {"profile", profile}, {"summary", eval::summary_json(eval::summarize(results))},
             {"cases", Json::array()}};
    for (const auto& r : results) out["cases"].push_back(eval::case_json(r, nullptr));
    reports::write_file_atomic(vm["json"].as<std::string>(), out.dump(1) + "\n");
  }
  return report(results, targets_of(vm), title);
}

int run_set(const po::variables_map& vm, int argc, char** argv) {
  if (!vm.count("out")) throw core::InputError("", "--out", "required with --set (where the validation record is written)");
  const eval::ValidationSet set = eval::load_validation_set(vm["set"].as<std::string>());
  // predictions use --profile when given; the record names the set's profile and the one used (profile_used),
  // which --stored loads by default where it loads (commit the calibrated profile under that name)
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : set.profile;
  const std::string backend = backend_of(vm);
  const std::string out_path = vm["out"].as<std::string>();
  check_output_option("--out", out_path);  // fail fast on a bad path
  const runtime::RunOptions opt = run_options_of(vm);
  std::vector<std::string> only;
  if (vm.count("case")) only = vm["case"].as<std::vector<std::string>>();
  // build and check every scenario before running anything
  std::vector<CaseResult> todo;
  for (const auto& c : set.cases) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    CaseResult r;
    r.name = c.name;
    r.keys = eval::case_keys(set, c);
    r.sc = eval::case_scenario(set.model, profile, r.keys, set.path, c.name);
    todo.push_back(std::move(r));
  }
  if (todo.empty()) throw core::InputError("", "--case", "selects no case of the set");
  std::vector<runtime::BlockShape> shapes;
  for (const auto& r : todo) shapes.push_back(block_shape_checked(r.sc, vm, backend));
  auto be = eval::open_backend(backend);
  Json rec{{"format", "ulysses-validation/1"},
           {"set", set.path},
           {"set_name", set.name},
           {"model", set.model},
           {"profile", set.profile},
           {"profile_used", profile},
           {"backend", backend},
           {"device", ""},
           {"measured_at", utc_now()},
           {"version", reports::version_json()},
           {"command", command_line(argc, argv)},
           {"error_pct_convention", "(predicted - measured) / measured * 100; measured = median over timed iterations, max over ranks"},
           {"options", {{"warmup", opt.warmup}, {"iters", opt.iters}, {"seed", opt.seed}, {"verify", opt.verify}}},
           {"environment", environment(backend, todo.front().sc.hw)},
           {"cases", Json::array()}};
  std::vector<CaseResult> done;
  std::int64_t widest_P = 0;
  std::map<std::string, int> cases_per_kernel;  // the attention kernel each case ran
  bool gpu_checked = false;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < todo.size(); ++i) {
    CaseResult& r = todo[i];
    eval::predict_case(r, backend);
    runtime::Measurement m;
    try {
      m = be->run_block(shapes[i], opt);
    } catch (const std::exception& e) {
      std::cerr << fmt::format("case {}: run failed: {}\n", r.name, e.what());
      Json failed{{"name", r.name}, {"error", e.what()}};
      rec["failed_cases"].push_back(failed);
      continue;
    }
    r.m = eval::measurement_of(m);
    if (!gpu_checked) note_other_gpu(r.sc, m.device), gpu_checked = true;  // once per run: every case ran there
    if (shapes[i].P >= widest_P) rec["device"] = m.device, widest_P = shapes[i].P;  // the case with the most GPUs
    if (!m.attn_kernel.empty()) ++cases_per_kernel[m.attn_kernel];
    rec["cases"].push_back(eval::case_json(r, &m));
    std::cerr << fmt::format("[{:.0f} s] case {} ({}/{}): correct {}, block {:.3f} ms\n",
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), r.name, i + 1,
                             todo.size(), r.m.correct ? "yes" : "NO",
                             eval::block_total_s(r.m) * 1e3);
    done.push_back(r);
  }
  rec["device"] = eval::device_with_kernels(rec["device"].get<std::string>(), cases_per_kernel);
  if (!cases_per_kernel.empty()) rec["attn_kernels"] = cases_per_kernel;
  rec["summary"] = eval::summary_json(eval::summarize(done));
  rec["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  reports::write_file_atomic(out_path, rec.dump(1) + "\n");
  std::cout << "wrote " << out_path << "\n";
  const int rc = report(done, targets_of(vm), fmt::format("validation set {} on backend {} ({}), profile {}", set.path, backend,
                                                          rec["device"].get<std::string>(), profile));
  return done.size() == todo.size() ? rc : core::kExitFailure;
}

int run_validate(int argc, char** argv) {
  po::options_description d("validate options");
  d.add_options()("help,h", "this help")
      ("set", po::value<std::string>(), "validation set YAML (scenarios/validation/*.yaml): run it on --backend")
      ("out", po::value<std::string>(), "with --set: write the validation record (JSON) here")
      ("case", po::value<std::vector<std::string>>()->composing(), "with --set: run only this case (repeatable)")
      ("stored", po::value<std::string>(), "re-predict a stored validation record (no backend run)")
      ("json", po::value<std::string>(), "with --stored: write the re-predicted cases and summary as JSON here")
      ("profile", po::value<std::string>(), "hardware profile to predict with (default: the set's / the record's)")
      ("max-median-error-pct", po::value<double>()->default_value(5), "target: per phase median |error| (%; < 0: off)")
      ("max-error-pct", po::value<double>()->default_value(15), "target: per phase max |error| (%; < 0: off)")
      ("max-memory-error-pct", po::value<double>()->default_value(3), "target: peak memory max |error| (%; < 0: off)");
  add_runtime_options(d);
  add_step_options(d);
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--set FILE --backend cpu|cuda|deepspeed --out FILE.json | --stored FILE.json",
               "Runs a validation set of block scenarios on a backend next to their predictions (per phase\n"
               "and peak memory: predicted, measured, signed error), or re-predicts a stored record on any\n"
               "machine. Exit 1 when a correctness check failed or the errors exceed the targets.\n"
               "--backend deepspeed: whole training steps (docs/DEEPSPEED_BACKEND.md); record format\n"
               "ulysses-step-validation/1, targets: peak allocated/reserved median |err| <= 3 %, max <= 6 %, step <= 10 %.",
               d);
    return core::kExitOk;
  }
  if (vm.count("set") == vm.count("stored")) throw core::InputError("", "--set", "give exactly one of --set FILE and --stored FILE");
  refuse_step_options(vm);
  if (vm.count("set") && is_step_run(vm)) return run_step_set(vm, utc_now(), command_line(argc, argv));
  return vm.count("stored") ? run_stored(vm) : run_set(vm, argc, argv);
}

const RegisterCommand reg{"validate", "the model against measured runs: a validation set, or a stored record re-predicted", &run_validate};

}  // namespace
}  // namespace ulysses::cli
