// ulysses predict: one scenario at one sequence length: memory breakdown and phase times.
#include <iostream>

#include <fmt/format.h>

#include "cli/options.hpp"
#include "reports/csv.hpp"
#include "reports/file_out.hpp"
#include "reports/format.hpp"
#include "reports/json_out.hpp"
#include "reports/run_config_out.hpp"
#include "reports/table.hpp"
#include "core/errors.hpp"
#include "sim/predict.hpp"

namespace ulysses::cli {
namespace {

void print_table(const Scenario& sc, const Prediction& p) {
  std::cout << reports::describe_scenario(sc);
  std::cout << fmt::format("S = {} ({}; padded {}, S_local {}): GPU {} ({:.2f} of {:.2f} GiB), host {} ({:.2f} of {:.2f} GiB/node)\n",
                           p.seq_len, reports::human_tokens(p.seq_len), p.padded_seq_len, p.s_local, p.fits_gpu ? "fits" : "DOES NOT FIT",
                           core::to_GiB(p.gpu.total()), core::to_GiB(p.gpu_capacity_bytes), p.fits_host ? "fits" : "DOES NOT FIT",
                           core::to_GiB(p.host.total()), core::to_GiB(p.host_capacity_bytes));
  std::cout << fmt::format("\nGPU peak at: {}\n", p.gpu_peak_at ? p.gpu_peak_at : "");
  std::cout << reports::memory_table(p.gpu, p.gpu_capacity_bytes, "GPU");
  std::cout << "\n" << reports::memory_table(p.host, p.host_capacity_bytes, "host/node");
  std::cout << "\n" << reports::phase_table(p.step);
  PhaseTimes block;
  for (int i = 0; i < static_cast<int>(core::BlockPhase::count); ++i) block.add(core::kBlockPhaseNames[i].data(), p.block[i]);
  std::cout << fmt::format("\none layer's Ulysses attention block (q exchange {} B/rank, k+v {} B/rank, peak {:.3f} GiB):\n",
                           p.a2a_q_bytes_per_rank, p.a2a_kv_bytes_per_rank, core::to_GiB(p.block_peak_bytes))
            << reports::phase_table(block, false);
  std::cout << "\n" << reports::throughput_lines(p);
}

int run_predict(int argc, char** argv) {
  po::options_description d("predict options", kHelpColumns, kHelpDescColumn);
  d.add_options()("help,h", "this help")
      ("label", po::value<std::string>(), "a name echoed in the output")
      ("fail-if-not-fits", po::bool_switch(), "exit 3 (after the output) when the scenario does not fit GPU HBM or host RAM");
  add_format_option(d);
  po::options_description s("scenario options (without --scenario: --model and --seq-len are required)", kHelpColumns, kHelpDescColumn);
  add_scenario_options(s);
  d.add(s);
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--model NAME --seq-len S [flags] | --scenario FILE [--seq-len S] [flags]",
               "Memory per GPU and host RAM per node (named terms that sum to the total) and the time of\n"
               "every phase of one training step, for one scenario at one sequence length.\n"
               "Exit status: 0, also when the scenario does not fit (the output says so: binding, DOES NOT FIT);\n"
               "3 with --fail-if-not-fits when it does not fit; 2 on bad input. --seq-len takes 131072, 128K, 1M, 128Ki.",
               d);
    return core::kExitOk;
  }
  const Format format = format_of(vm);
  RunConfigRead run_configs;
  const Scenario sc = scenario_from_options(vm, true, &run_configs);
  const Prediction p = predict(sc);
  const bool fits = p.fits_gpu && p.fits_host;
  const int exit_code = !fits && vm["fail-if-not-fits"].as<bool>() ? core::kExitDoesNotFit : core::kExitOk;

  if (format == Format::table) {
    if (vm.count("label")) std::cout << "label: " << vm["label"].as<std::string>() << "\n";
    std::cout << reports::run_config_echo_text(run_configs);
    print_table(sc, p);
    reports::check_stdout();  // e.g. `> /dev/full`: exit 1, not 0 with nothing written
    return exit_code;
  }
  reports::Json j = reports::predict_result_json(sc, p);
  if (vm.count("label")) j["label"] = vm["label"].as<std::string>();
  if (!run_configs.empty()) j["run_configs"] = reports::run_config_echo_json(run_configs);
  print_machine_readable(j, format);
  reports::check_stdout();
  return exit_code;
}

const RegisterCommand reg{"predict", "memory breakdown and phase times of one scenario at one length", &run_predict};

}  // namespace
}  // namespace ulysses::cli
