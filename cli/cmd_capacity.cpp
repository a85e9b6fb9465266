// ulysses capacity: the longest sequence of the Ulysses attention block (forward + backward), or of a
// whole step (--scope step: the deepspeed backend, or our runtime on cuda), on the GPUs and as the
// model predicts it.
//   --set FILE --backend cuda --out FILE.json   for each case: the predicted longest S (largest
//       multiple of --granularity whose predicted block_peak_bytes fits HBM minus the calibrated
//       fixed costs: CUDA context, and NCCL buffers when P > 1) and the measured one (bisection on
//       the GPUs: every block buffer allocated for real on every rank until an allocation fails,
//       runtime/cuda/capacity_probe.hpp); at the longest S found the block's phases then run
//       once (all six when the model predicts the block under --max-run-s, else the exchanges);
//   --stored FILE.json                         re-predicts the stored cases against the stored
//       measurements (no GPU).
// Exit 1 when a predicted longest S is off the measured one by more than --max-error-pct.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/options.hpp"
#include "eval/block_capacity.hpp"
#include "eval/record_in.hpp"
#include "eval/step_capacity_record.hpp"
#include "eval/step_run.hpp"
#include "eval/validation_set.hpp"
#include "reports/file_out.hpp"
#include "reports/format.hpp"
#include "reports/version.hpp"
#include "core/errors.hpp"
#include "sim/tokens.hpp"

#ifdef ULYSSES_WITH_CUDA
#include "runtime/cuda/device_info.hpp"
#endif

namespace ulysses::cli {
namespace {

using reports::Json;

using eval::BlockCapacityCase;

// --- the block (cuda backend, format ulysses-capacity/1) ---

int report(const std::vector<BlockCapacityCase>& cs, double max_err, const std::string& title) {
  const std::vector<std::string> missed = eval::missed_block_capacity(cs, max_err);
  std::cout << title << "\n" << eval::block_capacity_table(cs)
            << fmt::format("target: predicted longest S within {}% of the measured one: {}\n", max_err, missed.empty() ? "met" : "MISSED");
  for (const auto& m : missed) std::cout << "  missed: " << m << "\n";
  return missed.empty() ? core::kExitOk : core::kExitFailure;
}

// --- whole steps on the deepspeed backend (format ulysses-step-capacity/1) ---

int report_steps(const std::vector<eval::StepCapacityCase>& cases, double max_err, const std::string& title) {
  const std::vector<std::string> missed = eval::missed_step_capacity(cases, max_err);
  std::cout << title << "\n\n" << eval::step_capacity_table(cases)
            << fmt::format("measured S: the longest probed length that ran (the true one is below 'first OOM')\n"
                           "target: predicted within {} % of measured: {}\n", max_err, missed.empty() ? "met" : "MISSED");
  for (const auto& m : missed) std::cout << "missed: " << m << "\n";
  return missed.empty() ? core::kExitOk : core::kExitFailure;
}

int run_step_capacity_set(const po::variables_map& vm, const std::string& measured_at, const std::string& command) {
  if (!vm.count("out")) throw core::InputError("", "--out", "required with --set");
  const std::string backend = backend_of(vm);
  const eval::ValidationSet set = eval::load_validation_set(vm["set"].as<std::string>());
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : set.profile;
  const std::int64_t g = parse_tokens(vm["granularity"].as<std::string>(), "", "--granularity");
  if (g < 256 || g % 256) throw core::InputError("", "--granularity", fmt::format("must be a positive multiple of 256 (got {})", g));
  const std::string out_path = vm["out"].as<std::string>(), partial = out_path + ".partial";
  {  // a bad path fails before the first probe; nothing is left behind
    std::ofstream p(partial);
    if (!p) throw core::InputError("", "--out", "cannot write '" + out_path + "'");
  }
  std::remove(partial.c_str());
  std::vector<eval::StepCapacityCase> cases;
  for (const auto& c : set.cases) {
    eval::StepCapacityCase k =
        eval::predicted_step_capacity_case(eval::step_set_case(set.model, profile, c.name, eval::case_keys(set, c), set.path, backend), g);
    if (k.predicted_S <= 0) throw core::InputError(set.path, "cases." + c.name, "the planner fits no length: nothing to bisect");
    cases.push_back(std::move(k));
  }
  Json rec{{"format", eval::kStepCapacityFormat}, {"set", set.path}, {"model", set.model}, {"profile", set.profile},
           {"profile_used", profile}, {"backend", backend}, {"granularity", g}, {"measured_at", measured_at}, {"command", command},
           {"version", reports::version_json()}, {"cases", Json::array()}};
  for (auto& c : cases) {
    const eval::Bisection b = eval::bisect_capacity(
        c.predicted_S, g,
        [&](const std::vector<std::int64_t>& ladder) {
          return eval::probe_whole_steps(backend, c.set.sc, ladder, c.set.run.ballast_bytes, set.path);
        },
        [&](int round, const eval::Bisection& now) {
          std::cerr << fmt::format("case {} round {}: fits up to {}, first OOM {}\n", c.set.name, round, now.fits, now.first_oom);
        });
    if (!eval::record_bisection(c, b))
      throw std::runtime_error(fmt::format("case {}: could not bracket the longest S (record so far: {})", c.set.name, partial));
    rec["cases"].push_back(eval::step_capacity_case_json(c));
    reports::write_file_atomic(partial, rec.dump(1) + "\n");  // progress, never under the final name
  }
  reports::write_file_atomic(out_path, rec.dump(1) + "\n");
  std::remove(partial.c_str());
  std::cout << "wrote " << out_path << "\n";
  return report_steps(cases, pct_option(vm, "max-error-pct"), fmt::format("step capacity set {} ({}), profile {}", set.path, backend, profile));
}

int run_stored(const po::variables_map& vm) {
  const std::string path = vm["stored"].as<std::string>();
  const Json j = eval::load_record(path, "ulysses capacity --out");
  const std::string profile = profile_for_stored(vm, j, path);
  if (eval::is_step_capacity_record(j))
    return report_steps(eval::repredict_step_capacity_record(j, path, profile), pct_option(vm, "max-error-pct"),
                        fmt::format("step capacity record {} ({}, measured {}) re-predicted with profile {}", path,
                                    j.value("backend", "deepspeed"), j.value("measured_at", "?"), profile));
  return report(eval::repredict_block_capacity_record(j, path, profile), pct_option(vm, "max-error-pct"),
                fmt::format("capacity record {} (measured {} on {}) re-predicted with profile {}", path, j.value("measured_at", "?"),
                            j.value("device", "?"), profile));
}

#ifdef ULYSSES_WITH_CUDA
int run_set(const po::variables_map& vm, int argc, char** argv) {
  if (!vm.count("out")) throw core::InputError("", "--out", "required with --set");
  if (backend_of(vm) != "cuda") throw core::InputError("", "--backend", "capacity bisects on GPUs: --backend cuda or deepspeed");
  const eval::ValidationSet set = eval::load_validation_set(vm["set"].as<std::string>());
  // predictions use --profile when given; the record names the set's profile and the one used (profile_used),
  // which --stored loads by default where it loads (commit the calibrated profile under that name)
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : set.profile;
  const std::int64_t g = parse_tokens(vm["granularity"].as<std::string>(), "", "--granularity");
  if (g < 2 || g % 128 != 0) throw core::InputError("", "--granularity", "must be a positive multiple of 128");
  const double max_run_s = vm["max-run-s"].as<double>();
  std::vector<BlockCapacityCase> cs;
  for (const auto& c : set.cases) cs.push_back(eval::predicted_block_capacity_case(set, c, profile, g));
  // P = 1 first: no NCCL communicator exists yet in this process when they are probed
  std::stable_sort(cs.begin(), cs.end(), [](auto& a, auto& b) { return a.sc.plan.sp_size < b.sc.plan.sp_size; });
  const auto info = runtime::cuda::device_info();
  std::string cmd = argv[0];  // "ulysses <command>"
  for (int i = 1; i < argc; ++i) cmd += std::string(" ") + argv[i];
  Json rec{{"format", "ulysses-capacity/1"}, {"set", set.path}, {"model", set.model}, {"profile", set.profile}, {"profile_used", profile},
           {"granularity", g}, {"device", fmt::format("{}x {}", info.count, info.name)},
           {"environment", {{"gpu", info.name}, {"gpus", info.count}, {"driver", info.driver}, {"cuda_runtime", info.runtime},
                            {"nccl", info.nccl}, {"device_total_bytes", info.total_bytes}}},
           {"command", cmd}, {"cases", Json::array()}};
  rec["measured_at"] = reports::utc_now();
  rec["version"] = reports::version_json();
  const std::string out_path = vm["out"].as<std::string>();
  auto write_record = [&] { reports::write_file_atomic(out_path, rec.dump(1) + "\n"); };
  std::int64_t warmed_P = 1;
  for (auto& c : cs) {
    if (c.sc.plan.sp_size > info.count) continue;
    if (c.sc.plan.sp_size > warmed_P) {
      rec["warmup_free_after_bytes"][std::to_string(c.sc.plan.sp_size)] = eval::warm_up_exchanges(c.sc, g);
      warmed_P = c.sc.plan.sp_size;
    }
    try {
      c.measured_S = eval::measured_max_S(c, g, 120, std::cerr);
    } catch (const std::exception& e) {  // recorded; the other cases still run
      std::cerr << fmt::format("case {}: {}\n", c.name, e.what());
      rec["failed_cases"].push_back({{"name", c.name}, {"error", e.what()}});
      write_record();
      continue;
    }
    // at the longest S: run the phases once (all six if the model says the block is short enough)
    rec["cases"].push_back(eval::measured_case_json(c, max_run_s, std::cerr));
    write_record();
  }
  write_record();
  std::vector<BlockCapacityCase> done;
  for (auto& c : cs)
    if (c.measured_S > 0) done.push_back(c);
  return report(done, pct_option(vm, "max-error-pct"), fmt::format("capacity on {} (profile {})", rec["device"].get<std::string>(), profile));
}
#else
int run_set(const po::variables_map&, int, char**) {
  throw core::InputError("", "--backend", "'cuda': this ulysses was built without the CUDA backend");
}
#endif

int run_capacity(int argc, char** argv) {
  po::options_description d("capacity options");
  d.add_options()("help,h", "this help")
      ("set", po::value<std::string>(), "block cases (validation-set YAML, plan.seq_len ignored): bisect on the GPUs")
      ("out", po::value<std::string>(), "with --set: write the capacity record (JSON) here")
      ("stored", po::value<std::string>(), "re-predict a stored capacity record (no GPU)")
      ("profile", po::value<std::string>(), "hardware profile (default: the set's / the record's)")
      ("backend", po::value<std::string>()->default_value("cuda"), "cuda (the block, or --scope step) | deepspeed (whole steps, under each case's run.ballast_GiB)")
      ("scope", po::value<std::string>(), "block (cuda's default) | step (whole steps: deepspeed's only scope; on cuda our runtime's step)")
      ("granularity", po::value<std::string>()->default_value("1024"), "S is searched in multiples of this (a token count: 1024, 128Ki)")
      ("max-run-s", po::value<double>()->default_value(20), "run all six phases at the longest S when the model predicts the block under this")
      ("max-error-pct", po::value<double>()->default_value(3), "target: |predicted - measured| / measured longest S (%; < 0: off)");
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--set FILE --backend cuda|deepspeed --out FILE.json | --stored FILE.json",
               "The longest S of the attention block found on the GPUs (allocation bisection) next to the model's.", d);
    return core::kExitOk;
  }
  if (vm.count("set") == vm.count("stored")) throw core::InputError("", "--set", "give exactly one of --set FILE and --stored FILE");
  if (vm.count("set") && is_step_run(vm)) {
    std::string cmd = argv[0];
    for (int i = 1; i < argc; ++i) cmd += std::string(" ") + argv[i];
    return run_step_capacity_set(vm, reports::utc_now(), cmd);
  }
  return vm.count("stored") ? run_stored(vm) : run_set(vm, argc, argv);
}

const RegisterCommand reg{"capacity", "longest S of the attention block: bisected on the GPUs vs predicted", &run_capacity};

}  // namespace
}  // namespace ulysses::cli
