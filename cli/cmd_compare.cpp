// ulysses compare: predict and run the same scenario; per phase and for peak memory: predicted,
// measured and the signed error (predicted - measured) / measured in %; optionally a Chrome /
// Perfetto trace with the predicted and the measured timeline as two processes.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/options.hpp"
#include "eval/block_compare.hpp"
#include "eval/block_run.hpp"
#include "eval/step_compare.hpp"
#include "eval/step_out.hpp"
#include "eval/step_run.hpp"
#include "reports/file_out.hpp"
#include "reports/version.hpp"
#include "core/errors.hpp"
#include "sim/predict.hpp"

namespace ulysses::cli {
namespace {

using reports::Json;

// Whole steps (--backend deepspeed, or cuda --scope step): all layers of the --layers model predicted and run.
int compare_step_scenario(const po::variables_map& vm, Format format) {
  const std::string backend = backend_of(vm);
  const Scenario sc = eval::step_scenario_for(backend, with_layers(scenario_from_options(vm, true), vm));
  const Prediction p = predict(sc);  // a scenario the model cannot predict fails before the run
  runtime::deepspeed::StepOptions o = step_options_of(vm);
  std::string trace;
  if (vm.count("trace")) {
    trace = vm["trace"].as<std::string>();
    check_output_option("--trace", trace);  // a bad path fails before the run
    o.trace = trace + ".cupti";
  }
  const auto m = eval::run_whole_step(backend, sc, o, origin_of(vm));
  note_other_gpu(sc, m.device);
  if (!trace.empty()) {  // ours: predicted vs measured phases; deepspeed: the torch.profiler (CUPTI) one of rank 0 beside it
    reports::write_file_atomic(trace, eval::step_trace(p, m).dump(1) + "\n");
    if (backend == "deepspeed") {
      std::error_code ec;
      std::filesystem::rename(trace + ".cupti.rank0.json", trace + ".cupti.json", ec);
      if (ec) std::cerr << fmt::format("ulysses compare: no CUPTI trace from the worker ({}); {} has the phases\n", ec.message(), trace);
    }
  }
  const eval::StepComparison c = eval::compare_step(sc, p, m);
  if (format == Format::json) {
    Json j = eval::comparison_json(c);
    j["version"] = reports::version_json();
    j["scenario"] = sc.name;
    j["profile"] = sc.hw.name;
    j["calibrated"] = sc.hw.has_calibration;
    j["prediction"] = reports::prediction_json(p);
    j["measurement"] = runtime::measurement_json(m);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("scenario {} ({} layers, S={}) on profile {} ({}), backend {} on {}\n", sc.name,
                             sc.model.layers, sc.plan.seq_len, sc.hw.name,
                             sc.hw.has_calibration ? "calibrated" : "uncalibrated", m.backend, m.device)
              << eval::step_compare_table(c);
  }
  if (!m.correct()) std::cerr << "ulysses compare: the measured run's loss is not finite\n";
  return m.correct() ? core::kExitOk : core::kExitFailure;
}

int run_compare(int argc, char** argv) {
  po::options_description d("compare options");
  d.add_options()("help,h", "this help")("trace", po::value<std::string>(), "write a Chrome/Perfetto trace JSON here");
  add_runtime_options(d);
  add_step_options(d);
  add_format_option(d);
  po::options_description s("scenario options (flags override the --scenario file)");
  add_scenario_options(s);
  d.add(s);
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--backend cpu --scenario FILE [--trace FILE] [--format table|json]",
               "Predicts the scenario's Ulysses attention block and runs it on the backend; per phase and for\n"
               "peak memory: predicted, measured and the signed error (predicted - measured)/measured in %.\n"
               "JSON: phases [{name, predicted_s, measured_s, error_pct}], peak_memory {predicted_bytes,\n"
               "measured_bytes, error_pct}, correct. Exit 1 when a correctness check fails.",
               d);
    return core::kExitOk;
  }
  const Format format = format_of(vm);
  if (format == Format::csv) throw core::InputError("", "--format", "compare writes table or json");
  const std::string backend = backend_of(vm);
  refuse_step_options(vm);
  if (is_step_run(vm)) return compare_step_scenario(vm, format);
  auto be = eval::open_backend(backend);
  const Scenario sc = scenario_from_options(vm, true);
  const runtime::BlockShape shape = block_shape_checked(sc, vm, backend);
  if (vm.count("trace")) check_output_option("--trace", vm["trace"].as<std::string>());  // a bad path fails fast
  const Prediction planned = predict(sc);  // a scenario the model cannot predict fails before the run
  const runtime::Measurement m = be->run_block(shape, run_options_of(vm));
  note_other_gpu(sc, m.device);
  const eval::AsRun r = eval::prediction_as_run(sc, planned, m);  // predicts again only for another kernel
  Json j = eval::block_comparison_json(r.sc, r.p, m);
  j["version"] = reports::version_json();
  j["attn_implementation"] = {{"planned", sc.plan.attn_implementation}, {"predicted_as", r.sc.plan.attn_implementation}};
  if (vm.count("trace"))
    reports::write_file_atomic(vm["trace"].as<std::string>(), eval::block_comparison_trace(r.p, m, j).dump(1) + "\n");
  if (format == Format::json) std::cout << j.dump(2) << "\n";
  else std::cout << r.note << eval::block_comparison_table(r.sc, j);
  return m.correct ? core::kExitOk : core::kExitFailure;
}

const RegisterCommand reg{"compare", "predict and run one scenario: predicted vs measured per phase and memory", &run_compare};

}  // namespace
}  // namespace ulysses::cli
