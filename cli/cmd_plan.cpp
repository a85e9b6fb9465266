// ulysses plan: the longest sequence that fits GPU HBM and host RAM, what binds first, the
// memory breakdown and the step time at that length.
#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "cli/options.hpp"
#include "reports/csv.hpp"
#include "reports/file_out.hpp"
#include "reports/format.hpp"
#include "reports/json_out.hpp"
#include "reports/plan_out.hpp"
#include "reports/run_config_out.hpp"
#include "reports/table.hpp"
#include "sim/capacity.hpp"
#include "core/errors.hpp"
#include "sim/feature_search.hpp"
#include "sim/predict.hpp"
#include "sim/tokens.hpp"

namespace ulysses::cli {
namespace {

// q: the prediction one step past the longest length (what fails there).
void print_table(const Scenario& sc, const CapacityResult& r, const Prediction& q) {
  const Prediction& p = r.at_max;
  std::cout << reports::describe_scenario(sc);
  if (r.max_seq_len > 0) {
    std::cout << fmt::format("longest sequence: {} tokens ({}), S_local {} (multiple of {}, {} evaluations)\n",
                             r.max_seq_len, reports::human_tokens(r.max_seq_len), p.s_local, r.step, r.evaluations);
    std::cout << fmt::format("binds first: {} (at S = {}: GPU {:.3f} of {:.3f} GiB, host {:.1f} of {:.1f} GiB/node)\n",
                             to_string(r.binding), q.seq_len, core::to_GiB(q.gpu.total()), core::to_GiB(q.gpu_capacity_bytes),
                             core::to_GiB(q.host.total()), core::to_GiB(q.host_capacity_bytes));
  } else {
    std::cout << fmt::format("nothing fits: even S = {} exceeds {} (breakdown below is at S = {})\n", r.step,
                             to_string(r.binding), p.seq_len);
  }
  std::cout << fmt::format("\nGPU peak at: {}\n", p.gpu_peak_at ? p.gpu_peak_at : "");
  std::cout << reports::memory_table(p.gpu, p.gpu_capacity_bytes, "GPU");
  std::cout << "\n" << reports::memory_table(p.host, p.host_capacity_bytes, "host/node");
  std::cout << "\n" << reports::phase_table(p.step);
  std::cout << "\n" << reports::throughput_lines(p);
}

bool given(const po::variables_map& vm, const char* name) { return vm.count(name) && !vm[name].defaulted(); }

// plan --target-seq-len: the fewest GPUs and the fastest rung sets reaching it (exit 3 when none does).
int run_target(const po::variables_map& vm, Format format, std::int64_t granularity) {
  const std::int64_t target = parse_tokens(vm["target-seq-len"].as<std::string>(), "", "--target-seq-len");
  if (given(vm, "seq-len")) throw core::InputError("", "--target-seq-len", "conflicts with --seq-len (give one)");
  if (vm["explain"].as<bool>()) throw core::InputError("", "--target-seq-len", "conflicts with --explain (explain a plan at a GPU count)");
  if (given(vm, "sp-size") && vm["sp-size"].as<std::string>() != "auto" && !given(vm, "gpus"))
    throw core::InputError("", "--sp-size", "with --target-seq-len a fixed sp size needs --gpus (or use --sp-size auto)");
  RunConfigRead run_configs;
  const Scenario base = base_scenario_from_options(vm, false, true, &run_configs);
  const RungSet free = kAllRungs & ~fixed_rungs(vm, &run_configs);
  const TargetResult t = search_target(base, free, target, granularity, given(vm, "gpus"));
  const std::int64_t max_gpus = given(vm, "gpus") ? base.gpus : kMaxTargetGpus;  // what was scanned up to
  if (format == Format::table) {
    if (vm.count("label")) std::cout << "label: " << vm["label"].as<std::string>() << "\n";
    if (t.reached) std::cout << reports::describe_scenario(t.scenario);
    std::cout << reports::target_text(t, max_gpus);
  } else {
    reports::Json j = reports::target_json(t, max_gpus);
    if (vm.count("label")) j["label"] = vm["label"].as<std::string>();
    print_machine_readable(j, format);
  }
  reports::check_stdout();
  return t.reached ? core::kExitOk : core::kExitNotReachable;
}

int run_plan(int argc, char** argv) {
  po::options_description d("plan options", kHelpColumns, kHelpDescColumn);
  d.add_options()("help,h", "this help")
      ("granularity", po::value<std::string>()->default_value("1024"),
       "the longest sequence is searched in multiples of lcm(granularity, sp_size); a token count (1024, 64K, 128Ki)")
      ("label", po::value<std::string>(), "a name echoed in the output (e.g. the feature ablation)")
      ("emit", po::value<std::string>(), "write DIR/accelerate_config.yaml and DIR/ds_config.json for the plan found")
      ("target-seq-len", po::value<std::string>(),
       "instead of the longest S: the fewest GPUs (1, 2, 4, .. within a node, then whole nodes, up to 4096; "
       "only --gpus when given) whose best feature set fits this S (e.g. 1M = 1,000,000; K/M/G decimal), "
       "and the sets that do there, fastest step first; exit 3 when none does")
      ("explain", po::bool_switch(),
       "what binds (GPU HBM or host RAM, largest terms) and what each feature rung, added or taken away, "
       "and twice the GPUs would give");
  add_format_option(d);
  po::options_description s("scenario options (without --scenario: --model is required)", kHelpColumns, kHelpDescColumn);
  add_scenario_options(s);
  d.add(s);
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--model NAME [--gpus N] [flags] | --scenario FILE [flags]",
               "The largest sequence (a multiple of sp_size and of --granularity) that fits GPU HBM and host\n"
               "RAM per node, which one binds first, the memory breakdown at that length and the step time.\n"
               "GPUs not taken by sp_size and dp_replicate_size form dp_shard_size unless it is given.\n"
               "--seq-len (and a scenario's seq_len) is not used: plan searches the length.\n"
               "--all-features searches every set of the feature rungs not fixed by a flag and prints which it\n"
               "chose and why. --target-seq-len S inverts the question. Exit status: 0, 2 bad input, 3 the\n"
               "--target-seq-len is not reached with up to 4096 GPUs (the longest found is printed).",
               d);
    return core::kExitOk;
  }
  const Format format = format_of(vm);
  const std::int64_t granularity = parse_tokens(vm["granularity"].as<std::string>(), "", "--granularity");
  if (vm.count("target-seq-len")) {
    if (vm.count("emit")) throw core::InputError("", "--emit", "conflicts with --target-seq-len (emit the plan at a GPU count)");
    return run_target(vm, format, granularity);
  }
  const bool all = vm["all-features"].as<bool>();
  RunConfigRead run_configs;
  Scenario sc = base_scenario_from_options(vm, false, all, &run_configs);
  const RungSet fixed = fixed_rungs(vm, &run_configs);
  RungSearch search;
  if (all) {  // the best set of the rungs not fixed (sim/feature_search.hpp)
    search = search_rungs(sc, kAllRungs & ~fixed, granularity);
    sc = with_rungs(sc, search.chosen().set, search.free);
  }
  if (vm.count("emit")) reports::check_emittable(sc, vm["emit"].as<std::string>());

  const auto t0 = std::chrono::steady_clock::now();
  const CapacityResult r = find_max_seq_len(sc, granularity);
  const double search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Scenario next = sc;  // one step further
  next.plan.seq_len = r.max_seq_len + r.step;
  const Prediction q = r.max_seq_len > 0 ? predict(next) : r.at_max;
  sc.plan.seq_len = r.max_seq_len > 0 ? r.max_seq_len : r.at_max.seq_len;  // the scenario as planned
  std::vector<std::string> emitted;  // --emit DIR: the run configs of the plan found
  if (vm.count("emit") && r.max_seq_len <= 0) throw core::InputError("", "--emit", "nothing fits: no run config written");
  if (vm.count("emit")) emitted = reports::emit_run_configs(vm["emit"].as<std::string>(), sc);

  const bool sp_fixed = given(vm, "sp-size") && vm["sp-size"].as<std::string>() != "auto";
  const auto why = all ? rung_effects(sc, search.free, false, sp_fixed, granularity) : std::vector<RungEffect>{};
  const auto effects = vm["explain"].as<bool>() ? rung_effects(sc, kAllRungs, true, sp_fixed, granularity) : std::vector<RungEffect>{};
  if (format == Format::table) {
    if (vm.count("label")) std::cout << "label: " << vm["label"].as<std::string>() << "\n";
    std::cout << reports::run_config_echo_text(run_configs);
    if (all) std::cout << reports::features_text(search, fixed, why);
    print_table(sc, r, q);
    if (vm["explain"].as<bool>()) std::cout << reports::explain_text(r, q, effects);
    for (const auto& f : emitted) std::cout << "wrote " << f << "\n";
    reports::check_stdout();  // e.g. `> /dev/full`: exit 1, not 0 with nothing written
    return core::kExitOk;
  }
  reports::Json j = reports::plan_result_json(sc, r, granularity);
  if (vm.count("label")) j["label"] = vm["label"].as<std::string>();
  j["next_step"] = {{"seq_len", q.seq_len},
                    {"gpu_total_bytes", q.gpu.total()},
                    {"host_total_bytes_per_node", q.host.total()},
                    {"fits_gpu", q.fits_gpu},
                    {"fits_host", q.fits_host}};
  j["search_time_s"] = search_s;
  if (!run_configs.empty()) j["run_configs"] = reports::run_config_echo_json(run_configs);
  if (!emitted.empty()) j["emitted"] = emitted;
  if (all) j["all_features"] = reports::features_json(search, fixed, why);
  if (vm["explain"].as<bool>()) j["explain"] = reports::explain_json(r, q, effects);
  print_machine_readable(j, format);
  reports::check_stdout();
  return core::kExitOk;
}

const RegisterCommand reg{"plan", "longest sequence that fits GPU HBM and host RAM, and what binds", &run_plan};

}  // namespace
}  // namespace ulysses::cli
