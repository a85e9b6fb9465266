// ulysses compare: predict and run the same scenario; per phase and for peak memory: predicted,
// measured and the signed error (predicted - measured) / measured in %; optionally a Chrome /
// Perfetto trace with the predicted and the measured timeline as two processes.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/runtime_common.hpp"
#include "cli/step_common.hpp"
#include "cli/validation.hpp"
#include "reports/file_out.hpp"
#include "reports/table.hpp"
#include "reports/trace.hpp"
#include "reports/version.hpp"
#include "core/errors.hpp"
#include "sim/predict.hpp"

namespace ulysses::cli {
namespace {

using reports::Json;

std::int64_t max_peak(const runtime::Measurement& m) {
  return m.peak_bytes_per_rank.empty() ? 0 : *std::max_element(m.peak_bytes_per_rank.begin(), m.peak_bytes_per_rank.end());
}

Json compare_json(const Scenario& sc, const Prediction& p, const runtime::Measurement& m) {
  Json j;
  j["scenario"] = sc.name;
  j["profile"] = sc.hw.name;
  j["calibrated"] = sc.hw.has_calibration;
  j["backend"] = m.backend;
  j["device"] = m.device;
  j["error_pct_convention"] = "(predicted - measured) / measured * 100; measured = median over iterations, max over ranks";
  j["phases"] = Json::array();
  double pred_total = 0, meas_total = 0;
  for (std::size_t i = 0; i < m.phases.size(); ++i) {
    const auto& ph = m.phases[i];
    const double pred = p.block[i];
    pred_total += pred, meas_total += ph.median_s;
    j["phases"].push_back({{"name", ph.name}, {"predicted_s", pred}, {"measured_s", ph.median_s},
                           {"error_pct", error_pct(pred, ph.median_s)}, {"measured_min_s", ph.min_s},
                           {"measured_max_s", ph.max_s}});
  }
  j["block_total"] = {{"predicted_s", pred_total}, {"measured_s", meas_total}, {"error_pct", error_pct(pred_total, meas_total)}};
  const std::int64_t peak = max_peak(m);
  const std::int64_t predicted_peak = predicted_block_peak(p, m.backend);
  j["peak_memory"] = {{"predicted_bytes", predicted_peak}, {"measured_bytes", peak},
                      {"error_pct", error_pct(double(predicted_peak), double(peak))},
                      {"allocation", m.backend == "cpu" ? "each buffer freed after its last use" : "every buffer up front"}};
  j["exchange_bytes_per_rank"] = {{"q", {{"predicted", p.a2a_q_bytes_per_rank}, {"measured", m.a2a_q_bytes_per_rank}}},
                                  {"kv", {{"predicted", p.a2a_kv_bytes_per_rank}, {"measured", m.a2a_kv_bytes_per_rank}}}};
  j["measurement"] = measurement_json(m);
  j["correct"] = m.correct;
  return j;
}

std::string compare_table(const Scenario& sc, const Json& j) {
  std::string out = fmt::format("scenario {} on profile {} ({}), backend {}\n", sc.name, sc.hw.name,
                                sc.hw.has_calibration ? "calibrated" : "uncalibrated", j["backend"].get<std::string>());
  reports::Table t({{"phase", "", reports::Align::left}, {"predicted", "us"}, {"measured", "us"}, {"error", "%"},
                    {"meas. min", "us"}, {"meas. max", "us"}});
  auto row = [&](const std::string& name, const Json& e) {
    auto us = [&](const char* k) { return e.contains(k) ? fmt::format("{:.1f}", e[k].get<double>() * 1e6) : std::string("-"); };
    t.add_row({name, us("predicted_s"), us("measured_s"), fmt::format("{:+.1f}", e["error_pct"].get<double>()),
               us("measured_min_s"), us("measured_max_s")});
  };
  for (const auto& e : j["phases"]) row(e["name"].get<std::string>(), e);
  row("block total", j["block_total"]);
  out += t.render();
  const Json& pm = j["peak_memory"];
  reports::Table mt({{"", "", reports::Align::left}, {"predicted", "bytes"}, {"measured", "bytes"}, {"error", "%"}});
  mt.add_row({"peak memory per rank", fmt::format("{}", pm["predicted_bytes"].get<std::int64_t>()),
              fmt::format("{}", pm["measured_bytes"].get<std::int64_t>()), fmt::format("{:+.1f}", pm["error_pct"].get<double>())});
  for (const char* k : {"q", "kv"}) {
    const Json& e = j["exchange_bytes_per_rank"][k];
    const auto pr = e["predicted"].get<std::int64_t>(), me = e["measured"].get<std::int64_t>();
    mt.add_row({fmt::format("a2a {} bytes per rank", k), fmt::format("{}", pr), fmt::format("{}", me),
                fmt::format("{:+.1f}", error_pct(double(pr), double(me)))});
  }
  out += '\n';
  out += mt.render();
  std::int64_t failed = 0;
  for (const auto& c : j["measurement"]["checks"]) failed += !c["passed"].get<bool>();
  out += fmt::format("\nchecks: {} of {} passed; correct: {}\n", j["measurement"]["checks"].size() - failed,
                     j["measurement"]["checks"].size(), j["correct"].get<bool>() ? "true" : "false");
  out += "error = (predicted - measured) / measured; measured = median over iterations, max over ranks\n";
  return out;
}

// Two processes: the prediction (the block's phases back to back on one thread: every rank is
// predicted alike) and the measurement (one thread per rank: the phases of the last timed
// iteration with their segments nested inside).
Json trace_of(const Prediction& p, const runtime::Measurement& m, const Json& cmp) {
  reports::TraceProcess pred{"predicted (sim, every rank)", {{"predicted block", {}}}};
  double t = 0;
  for (std::size_t i = 0; i < m.phases.size(); ++i) {
    const Json& e = cmp["phases"][i];
    pred.threads[0].spans.push_back({m.phases[i].name, t, p.block[i] * 1e6, "phase",
                                     {{"predicted_us", p.block[i] * 1e6}, {"measured_median_us", m.phases[i].median_s * 1e6},
                                      {"error_pct", e["error_pct"]}}});
    t += p.block[i] * 1e6;
  }
  reports::TraceProcess meas{fmt::format("measured ({}, last timed iteration)", m.backend), {}};
  std::map<std::string, std::size_t> track_of;  // "rank 0" -> thread index, in first-seen order
  std::vector<runtime::TraceEvent> events = m.trace;
  std::stable_sort(events.begin(), events.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  for (const auto& e : events) {
    auto it = track_of.find(e.track);
    if (it == track_of.end()) {
      it = track_of.emplace(e.track, meas.threads.size()).first;
      meas.threads.push_back({e.track, {}});
    }
    const bool is_phase = std::find(core::kBlockPhaseNames.begin(), core::kBlockPhaseNames.end(), e.name) != core::kBlockPhaseNames.end();
    meas.threads[it->second].spans.push_back({e.name, e.start_us, e.dur_us, is_phase ? "phase" : "segment", {{"rank", e.rank}}});
  }
  // parents before children: by start, longer first, a phase before a segment of equal extent
  for (auto& th : meas.threads)
    std::stable_sort(th.spans.begin(), th.spans.end(), [](const reports::TraceSpan& a, const reports::TraceSpan& b) {
      if (a.start_us != b.start_us) return a.start_us < b.start_us;
      if (a.dur_us != b.dur_us) return a.dur_us > b.dur_us;
      return a.category == "phase" && b.category != "phase";
    });
  return reports::chrome_trace({pred, meas});
}

// --backend deepspeed: the whole step (all layers of the --layers model) predicted and run.
int compare_step_scenario(const po::variables_map& vm, Format format) {
  const Scenario sc = with_layers(scenario_from_options(vm, true), vm);
  const Prediction p = predict(sc);  // a scenario the model cannot predict fails before the run
  runtime::deepspeed::StepOptions o = step_options_of(vm);
  std::string trace;
  if (vm.count("trace")) {
    trace = vm["trace"].as<std::string>();
    check_output_option("--trace", trace);  // a bad path fails before the run
    o.trace = trace + ".cupti";
  }
  const auto m = runtime::deepspeed::run_step(sc, o, origin_of(vm));
  if (!trace.empty()) {  // ours: predicted vs measured phases; the torch.profiler (CUPTI) one of rank 0 beside it
    reports::write_file_atomic(trace, step_trace(p, m).dump(1) + "\n");
    std::error_code ec;
    std::filesystem::rename(trace + ".cupti.rank0.json", trace + ".cupti.json", ec);
    if (ec) std::cerr << fmt::format("ulysses compare: no CUPTI trace from the worker ({}); {} has the phases\n", ec.message(), trace);
  }
  const eval::StepComparison c = eval::compare_step(p, m);
  if (format == Format::json) {
    Json j = eval::comparison_json(c);
    j["version"] = reports::version_json();
    j["scenario"] = sc.name;
    j["profile"] = sc.hw.name;
    j["calibrated"] = sc.hw.has_calibration;
    j["prediction"] = reports::prediction_json(p);
    j["measurement"] = runtime::deepspeed::measurement_json(m);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("scenario {} ({} layers, S={}) on profile {} ({}), backend deepspeed on {}\n", sc.name,
                             sc.model.layers, sc.plan.seq_len, sc.hw.name,
                             sc.hw.has_calibration ? "calibrated" : "uncalibrated", m.device)
              << step_compare_table(c);
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
  refuse_step_options(vm, backend);
  if (is_step_backend(backend)) return compare_step_scenario(vm, format);
  auto be = open_backend(backend);
  const Scenario sc = scenario_from_options(vm, true);
  const runtime::BlockShape shape = block_shape_checked(sc, vm, backend);
  if (vm.count("trace")) check_output_option("--trace", vm["trace"].as<std::string>());  // a bad path fails fast
  (void)predict(sc);  // a scenario the model cannot predict fails before the run
  const runtime::Measurement m = be->run_block(shape, run_options_of(vm));
  // The prediction is of the kernel that ran: the CUDA backend runs its own kernels for the
  // PyTorch names (flash_attention_2, sdpa, ... -> ulysses_flash, docs/INPUTS.md), which the
  // profile calibrates under their own keys; the PyTorch names' efficiencies describe PyTorch.
  Scenario sp = sc;
  std::string note;
  if (!m.attn_kernel.empty() && m.attn_kernel != sc.plan.attn_implementation) {
    note = fmt::format("attention: plan.attn_implementation {} ran as {} on the {} backend; predicted as {}\n",
                       sc.plan.attn_implementation, m.attn_kernel, m.backend, m.attn_kernel);
    sp.plan.attn_implementation = m.attn_kernel;
  }
  const Prediction p = predict(sp);
  Json j = compare_json(sp, p, m);
  j["version"] = reports::version_json();
  j["attn_implementation"] = {{"planned", sc.plan.attn_implementation}, {"predicted_as", sp.plan.attn_implementation}};
  if (vm.count("trace")) reports::write_file_atomic(vm["trace"].as<std::string>(), trace_of(p, m, j).dump(1) + "\n");
  if (format == Format::json) std::cout << j.dump(2) << "\n";
  else std::cout << note << compare_table(sp, j);
  return m.correct ? core::kExitOk : core::kExitFailure;
}

const RegisterCommand reg{"compare", "predict and run one scenario: predicted vs measured per phase and memory", &run_compare};

}  // namespace
}  // namespace ulysses::cli
