// ulysses capacity: the longest sequence of the Ulysses attention block (forward + backward), on
// the GPUs and as the model predicts it.
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
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/runtime_common.hpp"
#include "cli/capacity_step.hpp"
#include "cli/validation.hpp"
#include "reports/file_out.hpp"
#include "reports/format.hpp"
#include "reports/table.hpp"
#include "reports/version.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/limits.hpp"
#include "sim/predict.hpp"
#include "sim/tokens.hpp"

#ifdef ULYSSES_WITH_CUDA
#include "runtime/cuda/device_info.hpp"
#include "runtime/cuda/capacity_probe.hpp"
#endif

namespace ulysses::cli {
namespace {

using reports::Json;

// The memory the block may use per rank: HBM minus the fixed costs (calibrated when present).
core::bytes_t usable_bytes(const Scenario& sc) {
  const Calibration& c = sc.hw.calibrated;
  const bool cal = sc.hw.has_calibration;
  const core::bytes_t ctx = cal && c.cuda_context_bytes >= 0 ? c.cuda_context_bytes : sc.hw.cuda_context_bytes;
  const core::bytes_t nccl = cal && c.nccl_buffer_bytes >= 0 ? c.nccl_buffer_bytes : sc.hw.nccl_buffer_bytes;
  return sc.hw.hbm_bytes - ctx - (sc.plan.sp_size > 1 ? nccl : 0);
}

core::bytes_t predicted_peak(Scenario sc, std::int64_t S) {
  sc.plan.seq_len = S;
  return predict(sc).block_peak_bytes;
}

// Largest multiple of g whose predicted block peak fits `usable` (0 when even g does not).
std::int64_t predicted_max_S(const Scenario& sc, std::int64_t g) {
  const core::bytes_t usable = usable_bytes(sc);
  if (predicted_peak(sc, g) > usable) return 0;
  const std::int64_t k_max = limits::kMaxSeqLen / g;  // g >= 1 (load_record, --granularity)
  std::int64_t lo = 1, hi = 2;  // in units of g
  while (hi <= k_max && predicted_peak(sc, hi * g) <= usable) lo = hi, hi *= 2;
  if (hi > k_max) hi = k_max + 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (predicted_peak(sc, mid * g) <= usable ? lo : hi) = mid;
  }
  return lo * g;
}

struct CapacityCase {
  std::string name;
  Keys keys;
  Scenario sc;
  std::int64_t predicted_S = 0, measured_S = 0;
  core::bytes_t predicted_usable = 0;
  Json detail;
};

double err_pct(const CapacityCase& c) { return error_pct(double(c.predicted_S), double(c.measured_S)); }

int report(const std::vector<CapacityCase>& cs, double max_err, const std::string& title) {
  reports::Table t({{"case", "", reports::Align::left}, {"P", ""}, {"H/H_kv/D", ""}, {"predicted S", "tokens"},
                    {"measured S", "tokens"}, {"error", "%"}});
  std::vector<std::string> missed;
  for (const auto& c : cs) {
    const double e = err_pct(c);
    t.add_row({c.name, fmt::format("{}", c.sc.plan.sp_size),
               fmt::format("{}/{}/{}", c.sc.model.heads, c.sc.model.kv_heads, c.sc.model.head_dim),
               fmt::format("{}", c.predicted_S), fmt::format("{}", c.measured_S), fmt::format("{:+.2f}", e)});
    if (max_err >= 0 && (c.measured_S <= 0 || std::fabs(e) > max_err))
      missed.push_back(fmt::format("{}: predicted {} vs measured {} ({:+.2f}%)", c.name, c.predicted_S, c.measured_S, e));
  }
  std::cout << title << "\n" << t.render()
            << fmt::format("target: predicted longest S within {}% of the measured one: {}\n", max_err, missed.empty() ? "met" : "MISSED");
  for (const auto& m : missed) std::cout << "  missed: " << m << "\n";
  return missed.empty() ? core::kExitOk : core::kExitFailure;
}

int run_stored(const po::variables_map& vm) {
  const std::string path = vm["stored"].as<std::string>();
  const Json j = load_record(path, "ulysses capacity --out");
  if (is_step_capacity_record(j)) return run_step_capacity_stored(vm, j, path);
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : j.value("profile", "");
  const std::int64_t g = j.value("granularity", std::int64_t{1024});  // 1..2^24: load_record checked it
  std::vector<CapacityCase> cs;
  for (std::size_t i = 0; i < j["cases"].size(); ++i) {
    const Json& c = j["cases"][i];
    try {
      CapacityCase k;
      k.name = c.at("name").get<std::string>();
      for (const auto& kv : c.at("keys")) k.keys.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
      k.sc = case_scenario(j.value("model", ""), profile, k.keys, path, k.name);
      k.predicted_S = predicted_max_S(k.sc, g);
      k.measured_S = c.at("measured_S").get<std::int64_t>();
      cs.push_back(std::move(k));
    } catch (const core::InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw core::InputError(path, fmt::format("cases[{}]", i), std::string("is not a stored case (") + e.what() + ")");
    }
  }
  return report(cs, pct_option(vm, "max-error-pct"),
                fmt::format("capacity record {} (measured {} on {}) re-predicted with profile {}", path, j.value("measured_at", "?"),
                            j.value("device", "?"), profile));
}

#ifdef ULYSSES_WITH_CUDA
// Bisection on the GPUs between a size that fits and one that does not, to granularity g.
std::int64_t measured_max_S(CapacityCase& c, std::int64_t g, double timeout_s) {
  runtime::BlockShape shape = runtime::block_shape_of(c.sc);
  Json probes = Json::array();
  auto fits = [&](std::int64_t S) {
    shape.S = S;
    const auto p = runtime::cuda::probe_block_fit(shape, {}, timeout_s);
    probes.push_back({{"S", S}, {"fits", p.fits}, {"arena_bytes", p.arena_bytes}, {"free_before_bytes", p.free_before_bytes}});
    std::cerr << fmt::format("  {} S={}: {}\n", c.name, S, p.fits ? "fits" : "out of memory");
    return p.fits;
  };
  const std::int64_t guess = std::max<std::int64_t>(g, c.predicted_S / g * g);
  std::int64_t lo = 0, hi = 0;  // lo fits (0: none known), hi does not (0: none known)
  if (fits(guess)) {
    lo = guess;
    for (double f : {1.01, 1.03, 1.1, 1.3, 2.0, 4.0}) {
      const std::int64_t s = (static_cast<std::int64_t>(guess * f) / g + 1) * g;
      if (!fits(s)) { hi = s; break; }
      lo = s;
    }
  } else {
    hi = guess;
    for (double f : {0.99, 0.97, 0.9, 0.7, 0.5, 0.25, 0.1}) {
      const std::int64_t s = std::max<std::int64_t>(g, static_cast<std::int64_t>(guess * f) / g * g);
      if (fits(s)) { lo = s; break; }
      hi = s;
    }
  }
  if (lo == 0 || hi == 0) throw std::runtime_error(fmt::format("case {}: could not bracket the longest S", c.name));
  while (hi - lo > g) {
    const std::int64_t mid = (lo + (hi - lo) / 2) / g * g;
    (fits(mid) ? lo : hi) = mid;
  }
  c.detail["probes"] = probes;
  return lo;
}

int run_set(const po::variables_map& vm, int argc, char** argv) {
  if (!vm.count("out")) throw core::InputError("", "--out", "required with --set");
  if (backend_of(vm) != "cuda") throw core::InputError("", "--backend", "capacity bisects on GPUs: --backend cuda or deepspeed");
  const ValidationSet set = load_validation_set(vm["set"].as<std::string>());
  // predictions use --profile when given; the record names the set's profile, which --stored
  // loads by default on any machine (commit the calibrated profile under that name)
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : set.profile;
  const std::int64_t g = parse_tokens(vm["granularity"].as<std::string>(), "", "--granularity");
  if (g < 2 || g % 128 != 0) throw core::InputError("", "--granularity", "must be a positive multiple of 128");
  const double max_run_s = vm["max-run-s"].as<double>();
  std::vector<CapacityCase> cs;
  for (const auto& c : set.cases) {
    CapacityCase k;
    k.name = c.name;
    k.keys = set.defaults;
    k.keys.insert(k.keys.end(), c.keys.begin(), c.keys.end());
    k.sc = case_scenario(set.model, profile, k.keys, set.path, c.name);
    k.predicted_S = predicted_max_S(k.sc, g);
    k.predicted_usable = usable_bytes(k.sc);
    cs.push_back(std::move(k));
  }
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
      // NCCL connects lazily on first use: run a small block once so that its buffers exist
      // before the bisection (they are part of the fixed costs, not of the block)
      runtime::BlockShape small = runtime::block_shape_of(c.sc);
      small.S = 8 * g;
      const auto w = runtime::cuda::probe_block_fit(small, {0, 1, 2, 3, 4, 5}, 120);
      rec["warmup_free_after_bytes"][std::to_string(c.sc.plan.sp_size)] = w.free_after_bytes;
      warmed_P = c.sc.plan.sp_size;
    }
    try {
      c.measured_S = measured_max_S(c, g, 120);
    } catch (const std::exception& e) {  // recorded; the other cases still run
      std::cerr << fmt::format("case {}: {}\n", c.name, e.what());
      rec["failed_cases"].push_back({{"name", c.name}, {"error", e.what()}});
      write_record();
      continue;
    }
    // at the longest S: run the phases once (all six if the model says the block is short enough)
    Scenario at = c.sc;
    at.plan.seq_len = c.measured_S;
    const Prediction p = predict(at);
    double block_s = 0;
    for (double t : p.block) block_s += t;
    std::vector<int> phases;
    if (block_s <= max_run_s) phases = {0, 1, 2, 3, 4, 5};
    else if (c.sc.plan.sp_size > 1) phases = {0, 2, 3, 5};
    runtime::BlockShape shape = runtime::block_shape_of(at);
    Json run{{"phases", phases}, {"predicted_block_s", block_s}};
    if (!phases.empty()) {
      try {
        const auto r = runtime::cuda::probe_block_fit(shape, phases, 600);
        run["ran"] = r.fits, run["wall_s"] = r.phases_s, run["free_after_bytes"] = r.free_after_bytes;
        run["arena_bytes"] = r.arena_bytes;
        std::cerr << fmt::format("  {} at S={}: ran {} phase(s) in {:.2f} s: {}\n", c.name, c.measured_S, phases.size(),
                                 r.phases_s, r.fits ? "ok" : "out of memory");
      } catch (const std::exception& e) {
        run["ran"] = false, run["error"] = e.what();
        std::cerr << fmt::format("  {} at S={}: the phases failed: {}\n", c.name, c.measured_S, e.what());
      }
    }
    Json keys = Json::array();
    for (const auto& [k, v] : c.keys) keys.push_back({k, v});
    rec["cases"].push_back({{"name", c.name}, {"keys", keys}, {"P", c.sc.plan.sp_size}, {"measured_S", c.measured_S},
                            {"predicted_S", c.predicted_S}, {"error_pct", err_pct(c)},
                            {"predicted_usable_bytes", c.predicted_usable},
                            {"predicted_peak_bytes_at_measured_S", p.block_peak_bytes}, {"run_at_measured_S", run},
                            {"probes", c.detail["probes"]}});
    write_record();
  }
  write_record();
  std::vector<CapacityCase> done;
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
      ("backend", po::value<std::string>()->default_value("cuda"), "cuda (the block) | deepspeed (whole steps, under each case's run.ballast_GiB)")
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
  if (vm.count("set") && vm["backend"].as<std::string>() == "deepspeed") {
    std::string cmd = argv[0];
    for (int i = 1; i < argc; ++i) cmd += std::string(" ") + argv[i];
    return run_step_capacity_set(vm, reports::utc_now(), cmd);
  }
  return vm.count("stored") ? run_stored(vm) : run_set(vm, argc, argv);
}

const RegisterCommand reg{"capacity", "longest S of the attention block: bisected on the GPUs vs predicted", &run_capacity};

}  // namespace
}  // namespace ulysses::cli
