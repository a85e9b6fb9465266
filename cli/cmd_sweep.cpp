// ulysses sweep SPEC.yaml: predict (or plan) over the cartesian product of the spec's axes on all
// cores; writes DIR/<name>.csv (every point) and DIR/<name>.summary.json; --shard K/N runs one slice
// of the points, `sweep merge` joins the slices (reports/sweep_out.hpp).
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "cli/options.hpp"
#include "reports/csv.hpp"
#include "reports/file_out.hpp"
#include "reports/format.hpp"
#include "reports/json_out.hpp"
#include "reports/sweep_out.hpp"
#include "reports/version.hpp"
#include "core/errors.hpp"
#include "sim/limits.hpp"
#include "sim/predict.hpp"
#include "sim/sweep.hpp"

namespace ulysses::cli {
namespace {

void put_double(std::string& out, double x) { reports::append_g7(out, x); }
void put_int(std::string& out, std::int64_t x) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  out.append(buf, r.ptr);
}

// The phase names of the first valid point (up to `limit` points scanned), in predict's order.
std::vector<const char*> first_phase_names(const SweepSpec& spec, std::int64_t limit) {
  const std::int64_t total = std::min(sweep_points(spec), limit);
  for (std::int64_t i = 0; i < total; ++i) {
    Scenario sc = spec.base;
    std::int64_t rest = i;
    std::vector<std::size_t> idx(spec.axes.size());
    for (std::size_t a = spec.axes.size(); a-- > 0;) {
      idx[a] = static_cast<std::size_t>(rest % static_cast<std::int64_t>(spec.axes[a].values.size()));
      rest /= static_cast<std::int64_t>(spec.axes[a].values.size());
    }
    for (std::size_t a = 0; a < spec.axes.size(); ++a) set_key(sc, spec.axes[a].key, spec.axes[a].values[idx[a]], spec.path);
    if (!check(sc).empty()) continue;
    if (spec.mode == "plan" || sc.plan.seq_len <= 0) sc.plan.seq_len = 1024 * sc.plan.sp_size;
    const Prediction p = predict(sc);
    std::vector<const char*> names;
    for (int k = 0; k < p.step.n; ++k) names.push_back(p.step.phases[k].name);
    return names;
  }
  return {};
}

// Formats one CSV row per point. Phase columns are fixed up front; a point with a phase outside
// them is flagged (the sweep then runs again with the union of the names).
class RowWriter {
 public:
  RowWriter(const SweepSpec& spec, std::vector<std::string> phases, std::vector<const char*> literals)
      : phases_(std::move(phases)), literal_(std::move(literals)) {
    literal_.resize(phases_.size(), nullptr);
    for (const auto& a : spec.axes) {
      escaped_.emplace_back();
      for (const auto& v : a.values) escaped_.back().push_back(reports::csv_escape(v));
    }
    for (const auto& a : spec.axes) header_.push_back(a.key);
    for (const char* c : {"valid", "skip_reason", "seq_len", "padded_seq_len", "s_local", "gpu_total_GiB",
                          "host_total_GiB", "fits", "binding", "step_time_s", "tokens_per_s", "hw_tflops_per_gpu",
                          "megatron_tflops_per_gpu", "a2a_q_bytes_per_rank", "a2a_kv_bytes_per_rank"})
      header_.emplace_back(c);
    for (const auto& p : phases_) header_.push_back(p + "_s");
  }
  std::string header() const { return reports::csv_row(header_); }
  bool missed() const { return missed_; }
  std::vector<std::string> all_phases() const {
    std::vector<std::string> all = phases_;
    for (const auto& e : extra_) all.push_back(e);
    return all;
  }

  void row(const SweepPoint& pt, std::string& out) {
    for (std::size_t a = 0; a < escaped_.size(); ++a) {
      out += escaped_[a][static_cast<std::size_t>(pt.value_index[a])];
      out += ',';
    }
    if (!pt.valid) {
      out += "0,";
      out += reports::csv_escape(pt.reason);
      out.append(13 + phases_.size(), ',');
      out += '\n';
      return;
    }
    const Prediction& p = *pt.prediction;
    out += "1,,";
    put_int(out, pt.seq_len), out += ',';
    put_int(out, pt.seq_len > 0 ? p.padded_seq_len : 0), out += ',';
    put_int(out, pt.seq_len > 0 ? p.s_local : 0), out += ',';
    put_double(out, core::to_GiB(p.gpu.total())), out += ',';
    put_double(out, core::to_GiB(p.host.total())), out += ',';
    out += pt.fits ? "true," : "false,";
    out += to_string(pt.binding), out += ',';
    put_double(out, p.step_time_s), out += ',';
    put_double(out, p.tokens_per_s), out += ',';
    put_double(out, p.hw_tflops_per_gpu), out += ',';
    put_double(out, p.megatron_tflops_per_gpu), out += ',';
    put_int(out, p.a2a_q_bytes_per_rank), out += ',';
    put_int(out, p.a2a_kv_bytes_per_rank);
    const bool same = p.step.n == static_cast<int>(phases_.size()) && [&] {
      for (int k = 0; k < p.step.n; ++k) {
        const char* name = p.step.phases[k].name;  // a string literal: usually the very same pointer
        if (name != literal_[static_cast<std::size_t>(k)] && phases_[static_cast<std::size_t>(k)] != name) return false;
      }
      return true;
    }();
    for (std::size_t k = 0; k < phases_.size(); ++k) {
      out += ',';
      put_double(out, same ? p.step.phases[k].time_s : p.step.get(phases_[k].c_str()));
    }
    out += '\n';
    if (!same) note_extra(p.step);
  }

 private:
  void note_extra(const PhaseTimes& t) {
    for (int k = 0; k < t.n; ++k) {
      if (std::find(phases_.begin(), phases_.end(), t.phases[k].name) != phases_.end()) continue;
      std::lock_guard lk(mu_);
      if (std::find(extra_.begin(), extra_.end(), t.phases[k].name) == extra_.end()) extra_.emplace_back(t.phases[k].name);
      missed_ = true;
    }
  }

  std::vector<std::string> phases_;
  std::vector<const char*> literal_;  // predict's own name pointers, when known
  std::vector<std::vector<std::string>> escaped_;
  std::vector<std::string> header_;
  std::mutex mu_;
  std::vector<std::string> extra_;
  std::atomic<bool> missed_{false};
};

class ProgressBar {
 public:
  ProgressBar() : on_(isatty(STDERR_FILENO) == 1) {}
  void operator()(std::int64_t done, std::int64_t total) {
    if (!on_ || total <= 0) return;
    const int width = 40, filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r[%s%s] %3d%% %lld/%lld points", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), static_cast<int>(100 * done / total),
                 static_cast<long long>(done), static_cast<long long>(total));
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool on_;
};

// --shard K/N, or auto: SLURM_PROCID/SLURM_NTASKS (srun), else RANK/WORLD_SIZE (torchrun).
Shard shard_of(const std::string& text) {
  if (text != "auto") return parse_shard(text, "--shard");
  for (const auto& [rank, size] : {std::pair{"SLURM_PROCID", "SLURM_NTASKS"}, std::pair{"RANK", "WORLD_SIZE"}}) {
    const char* r = std::getenv(rank);
    const char* n = std::getenv(size);
    if (!r || !n) continue;
    std::int64_t k = -1;
    const std::string rs = r;
    if (!rs.empty() && rs.size() < 8 && rs.find_first_not_of("0123456789") == std::string::npos) k = std::stoll(rs);
    if (k < 0) throw core::InputError("", "--shard auto", fmt::format("{}='{}' is not a rank (0, 1, ...)", rank, rs));
    return parse_shard(std::to_string(k + 1) + "/" + n, fmt::format("--shard auto ({}={}, {}={})", rank, r, size, n));
  }
  throw core::InputError("", "--shard auto", "needs SLURM_PROCID and SLURM_NTASKS (srun) or RANK and WORLD_SIZE (torchrun)");
}

int run_merge_cmd(int argc, char** argv) {
  po::options_description d("sweep merge options", kHelpColumns, kHelpDescColumn);
  d.add_options()("help,h", "this help")
      ("dirs", po::value<std::vector<std::string>>()->multitoken(), "folders holding the shards' outputs (positional)")
      ("out", po::value<std::string>(), "output folder for <name>.csv and <name>.summary.json (required)");
  po::positional_options_description pos;
  pos.add("dirs", -1);
  const auto vm = parse_args(argc, argv, d, &pos);
  if (vm.count("help")) {
    print_help(argv[0], "DIR... --out DIR",
               "Joins the shards of `ulysses sweep SPEC --shard K/N` (DIR/<name>.shard-K-of-N.csv and .summary.json)\n"
               "into <name>.csv and <name>.summary.json as one unsharded run writes them (byte for byte, but for\n"
               "elapsed_s, points_per_s and threads: summed compute time, its rate, the most threads of a shard).\n"
               "Every shard 1..N must be present exactly once, of the same spec fingerprint and tool version.",
               d);
    return core::kExitOk;
  }
  if (!vm.count("dirs")) throw core::InputError("", "DIR", "at least one folder of shard outputs is required");
  if (!vm.count("out")) throw core::InputError("", "--out", "required (the folder for the merged CSV and summary)");
  const auto r = reports::merge_sweep_shards(vm["dirs"].as<std::vector<std::string>>(), vm["out"].as<std::string>());
  std::cout << fmt::format("merged {} shards of sweep {}: {} points, {} valid\nwrote {} and {}\n", r.shards,
                           r.summary["name"].get<std::string>(), r.points, r.summary["valid"].get<std::int64_t>(),
                           r.csv_path, r.summary_path);
  reports::check_stdout();
  return core::kExitOk;
}

int run_sweep_cmd(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "merge") {
    std::string prog = std::string(argv[0]) + " merge";
    argv[1] = prog.data();
    return run_merge_cmd(argc - 1, argv + 1);
  }
  po::options_description d("sweep options", kHelpColumns, kHelpDescColumn);
  d.add_options()("help,h", "this help")
      ("spec", po::value<std::string>(), "sweep spec YAML (positional)")
      ("out", po::value<std::string>()->default_value("out"), "output folder for <name>.csv and <name>.summary.json")
      ("threads", po::value<int>()->default_value(0), "worker threads (0 = all cores)")
      ("shard", po::value<std::string>(),
       "K/N: run only the K-th of N contiguous slices of the points (1 <= K <= N), writing <name>.shard-K-of-N.csv and "
       ".summary.json; `auto`: K/N from SLURM_PROCID/SLURM_NTASKS or RANK/WORLD_SIZE. Join them with `ulysses sweep merge`")
      ("format", po::value<std::string>()->default_value("table"), "summary on stdout: table | json | csv (the points go to DIR/<name>.csv)");
  po::positional_options_description pos;
  pos.add("spec", 1);
  const auto vm = parse_args(argc, argv, d, &pos);
  if (vm.count("help")) {
    print_help(argv[0], "SPEC.yaml [--out DIR] [--threads N] [--shard K/N] | merge DIR... --out DIR",
               "Runs predict (mode: predict) or the longest-sequence search (mode: plan) over the cartesian\n"
               "product of the spec's axes on all cores. Invalid points are skipped and counted by reason.\n"
               "Writes DIR/<name>.csv (every point; skipped ones with valid=0 and their reason) and\n"
               "DIR/<name>.summary.json (points, valid, skipped by reason, elapsed_s, points_per_s).\n"
               "With dp_shard_size: auto (the default when the base scenario does not give it), the GPUs\n"
               "not taken by sp and dp_replicate form dp_shard at every point, as in `ulysses plan`.\n"
               "On a cluster: one `--shard K/N` per task, then `ulysses sweep merge DIR... --out DIR`\n"
               "(`ulysses sweep merge --help`).",
               d);
    return core::kExitOk;
  }
  if (!vm.count("spec")) throw core::InputError("", "SPEC", "a sweep spec file is required (ulysses sweep SPEC.yaml)");
  const Format format = format_of(vm);
  const int threads = vm["threads"].as<int>();
  if (threads < 0 || threads > kMaxThreads)
    throw core::InputError("", "--threads", fmt::format("must be 0 (all cores) .. {} (got {})", kMaxThreads, threads));
  const bool sharded = vm.count("shard") > 0;
  const Shard shard = sharded ? shard_of(vm["shard"].as<std::string>()) : Shard{};

  const SweepSpec spec = load_sweep(vm["spec"].as<std::string>());
  check_sweep_name(spec);  // the name becomes file names: never a path
  const std::int64_t total = sweep_points(spec);
  const auto [first, end] = shard_points(total, shard);
  const std::filesystem::path dir = vm["out"].as<std::string>();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw core::InputError("", "--out", "cannot create '" + dir.string() + "': " + ec.message());
  const std::string stem = reports::sweep_output_stem(spec.name, sharded ? &shard : nullptr);
  const auto csv_path = dir / (stem + ".csv");
  const auto summary_path = dir / (stem + ".summary.json");
  // One run per output name at a time; the outputs go to unique temporaries and are renamed only
  // when both are complete (CSV first, summary last); an interrupt or error renames nothing.
  const reports::LockFile lock((dir / (stem + ".lock")).string());
  const reports::StopOnSignals stop;
  auto interrupted = [&](int sig) {  // one line; the caller has dropped the temporaries
    std::cerr << (isatty(STDERR_FILENO) == 1 ? "\n" : "") << "ulysses: sweep " << spec.name << " interrupted by "
              << reports::signal_name(sig) << "; " << csv_path.string() << " and " << summary_path.string()
              << " not written\n";
    return reports::exit_code_of_signal(sig);
  };

  const std::vector<const char*> literals = first_phase_names(spec, 100000);  // of the whole sweep: every shard alike
  std::vector<std::string> phases(literals.begin(), literals.end());
  SweepStats stats;
  int passes = 0;
  std::unique_ptr<reports::AtomicFile> csv;
  try {
    for (;;) {
      ++passes;
      RowWriter writer(spec, phases, passes == 1 ? literals : std::vector<const char*>{});
      csv = std::make_unique<reports::AtomicFile>(csv_path.string());  // a second pass drops the first's
      csv->write(writer.header());
      ProgressBar bar;
      SweepOptions opt;
      opt.threads = threads;
      opt.first = first;
      opt.end = end;
      opt.row = [&](const SweepPoint& pt, std::string& out) { writer.row(pt, out); };
      opt.sink = [&](const std::string& rows) { csv->write(rows); };
      opt.progress = [&](std::int64_t done, std::int64_t n) { bar(done, n); };
      opt.stop = &reports::StopOnSignals::flag();
      stats = run_sweep(spec, opt);
      if (!writer.missed() || passes >= 2) break;
      phases = writer.all_phases();  // a point had a phase outside the columns: again with all of them
    }
  } catch (const SweepStopped& s) {
    csv.reset();  // removes the temporary; the previous CSV and summary stay as they were
    return interrupted(s.value);
  }

  reports::Json skipped = reports::Json::object();
  std::int64_t skipped_total = 0;
  for (const auto& [reason, n] : stats.skipped) skipped[reason] = n, skipped_total += n;
  reports::Json axes = reports::Json::array();
  for (const auto& a : spec.axes) axes.push_back({{"key", a.key}, {"values", a.values}});
  reports::Json summary = {{"name", spec.name},
                           {"spec", spec.path},
                           {"spec_fnv1a64", reports::fnv1a64_hex(sweep_spec_text(spec))},
                           {"version", reports::version_json()}};
  if (sharded)
    summary["shard"] = {{"index", shard.index}, {"count", shard.count}, {"first_point", first},
                        {"end_point", end}, {"points_total", total}};
  summary.update(reports::Json{{"mode", spec.mode},
                               {"granularity", spec.granularity},
                               {"axes", axes},
                               {"points", stats.points},
                               {"valid", stats.valid},
                               {"skipped_total", skipped_total},
                               {"skipped", skipped},
                               {"elapsed_s", stats.elapsed_s},
                               {"points_per_s", stats.points_per_s},
                               {"threads", stats.threads},
                               {"passes", passes},
                               {"dp_shard_auto", spec.base.plan.dp_shard_auto},
                               {"phase_columns", phases},
                               {"csv", csv_path.string()},
                               {"base", reports::scenario_json(spec.base)}});
  const std::string text = summary.dump(2) + "\n";
  if (const int sig = reports::StopOnSignals::stop_signal(); sig != 0) {
    csv.reset();
    return interrupted(sig);
  }
  reports::commit_sweep_outputs(*csv, summary_path.string(), text);

  if (format == Format::json) {
    std::cout << text;
    reports::check_stdout();
    return core::kExitOk;
  }
  if (format == Format::csv) {  // the summary's counts as one row (the points are in the CSV file)
    std::vector<std::string> header, row;
    for (const char* k : {"name", "mode", "points", "valid", "skipped_total", "elapsed_s", "points_per_s", "threads", "csv"}) {
      header.emplace_back(k);
      row.push_back(summary[k].is_string() ? summary[k].get<std::string>() : summary[k].dump());
    }
    std::cout << reports::csv_row(header) << reports::csv_row(row);
    reports::check_stdout();
    return core::kExitOk;
  }
  std::cout << fmt::format("sweep {}{} (mode {}): {} points, {} valid, {} skipped in {} ({:.0f} points/s on {} threads)\n",
                           spec.name, sharded ? fmt::format(" shard {}/{} ({} of {} points from point {})", shard.index, shard.count, end - first, total, first) : "",
                           spec.mode, stats.points, stats.valid, skipped_total, reports::human_time(stats.elapsed_s),
                           stats.points_per_s, stats.threads);
  for (const auto& [reason, n] : stats.skipped) std::cout << fmt::format("  skipped {:>8}: {}\n", n, reason);
  std::cout << "wrote " << csv_path.string() << " and " << summary_path.string() << "\n";
  reports::check_stdout();
  return core::kExitOk;
}

const RegisterCommand reg{"sweep", "predict or plan over the cartesian product of a spec's axes (CSV + summary)",
                          &run_sweep_cmd};

}  // namespace
}  // namespace ulysses::cli
