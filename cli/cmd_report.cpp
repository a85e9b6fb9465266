// ulysses report: renders the JSON of plan/predict and the CSV + summary of sweeps into PNG
// plots (reports/plot_report.py) and a Markdown summary (reports/report_md: DIR/summary.md, and stdout).
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <sys/wait.h>

#include <fmt/format.h>

#include "sim/fs_query.hpp"
#include "cli/options.hpp"
#include "reports/file_out.hpp"
#include "reports/json_in.hpp"
#include "reports/format.hpp"
#include "reports/json_out.hpp"
#include "reports/report_md.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"

namespace ulysses::cli {
namespace {

namespace fs = std::filesystem;
using reports::Json;

using Inputs = reports::ReportInputs;

void load_input(const fs::path& p, Inputs& in) {
  Json j = reports::read_json_file(p.string());  // depth- and size-checked: one line, never a crash
  if (!j.is_object()) throw core::InputError(p.string(), "JSON", "expected an object written by ulysses plan, predict or sweep");
  if (j.contains("command")) {
    reports::check_result_json(j, p.string());
    reports::check_memory_terms(j, p.string());
    j["source_file"] = p.string();
    in.results.push_back(std::move(j));
  } else if (j.contains("points") && j.contains("csv")) {
    reports::check_sweep_summary_json(j, p.string());
    fs::path csv = j["csv"].get<std::string>();
    std::error_code ec;
    if (!fs::exists(csv, ec)) csv = p.parent_path() / csv.filename();  // moved together with its summary
    if (!fs::exists(csv, ec)) throw core::InputError(p.string(), "csv", "'" + csv.string() + "' does not exist");
    j["csv"] = csv.string();
    j["summary_file"] = p.string();
    in.sweeps.push_back(std::move(j));
  } else {
    throw core::InputError(p.string(), "command", "not the JSON of ulysses plan/predict (--format json) or a sweep summary");
  }
}

Inputs load_inputs(const std::vector<std::string>& args) {
  Inputs in;
  for (const auto& a : args) {
    const fs::path p = a;
    if (path_is_dir(p)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) load_input(f, in);
    } else if (path_is_file(p)) {
      if (p.extension() == ".csv") {
        fs::path summary = p;
        summary.replace_extension(".summary.json");
        if (!path_exists(summary)) throw core::InputError(p.string(), "summary", "needs its sweep summary " + summary.string());
        load_input(summary, in);
      } else {
        load_input(p, in);
      }
    } else {
      throw core::InputError(a, "input", "no such file or folder");
    }
  }
  return in;
}

// A python3 that imports matplotlib: `python3`, then /usr/bin/python3. A probe killed by SIGINT or
// SIGTERM (std::system ignores SIGINT in the caller while it waits) passes the signal on to this
// process, so that the caller's StopOnSignals sees it, and ends the search.
std::string find_python() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const int st = std::system(fmt::format("{} -c 'import matplotlib' >/dev/null 2>&1", py).c_str());
    if (st == 0) return py;
    if (st != -1 && WIFSIGNALED(st) && (WTERMSIG(st) == SIGINT || WTERMSIG(st) == SIGTERM)) {
      // a signal to the whole group reached this process too (SIGTERM: its handler has run and reset
      // itself: raising it again would kill without the cleanup); SIGINT, which std::system ignored
      if (reports::StopOnSignals::stop_signal() == 0) std::raise(WTERMSIG(st));
      return "";
    }
  }
  return "";
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int run_report(int argc, char** argv) {
  po::options_description d("report options", kHelpColumns, kHelpDescColumn);
  d.add_options()("help,h", "this help")
      ("inputs", po::value<std::vector<std::string>>()->multitoken(), "JSON of plan/predict, sweep summaries or CSVs, or folders of them (positional)")
      ("out", po::value<std::string>()->default_value("out/report"), "output folder for the PNG plots and summary.md")
      ("title", po::value<std::string>()->default_value("ulysses report"), "Markdown title")
      ("note", po::value<std::string>(), "a paragraph put under the title (e.g. what the labels mean)")
      ("no-plots", po::bool_switch(), "write the Markdown summary only");
  po::positional_options_description pos;
  pos.add("inputs", -1);
  const auto vm = parse_args(argc, argv, d, &pos);
  if (vm.count("help")) {
    print_help(argv[0], "INPUT... [--out DIR]",
               "Renders plan/predict JSON (--format json) and sweep results into PNG plots and a Markdown\n"
               "summary: the longest sequence vs GPU count per label (e.g. feature ablations) with step time\n"
               "and tokens/s, memory at that length by family (sim/memory_families.hpp) and by term, and sweep\n"
               "plots, embedded in DIR/summary.md by paths relative to DIR. Plots need a python3 with matplotlib.",
               d);
    return core::kExitOk;
  }
  if (!vm.count("inputs")) throw core::InputError("", "INPUT", "at least one input file or folder is required");
  const Inputs in = load_inputs(vm["inputs"].as<std::vector<std::string>>());
  if (in.results.empty() && in.sweeps.empty()) throw core::InputError("", "INPUT", "no plan/predict JSON or sweep summary found");
  const fs::path dir = vm["out"].as<std::string>();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw core::InputError("", "--out", "cannot create '" + dir.string() + "': " + ec.message());

  // A failed or interrupted report leaves no summary.md (an older one goes first) and none of the files
  // it wrote (report_data.json, the plots): SIGINT / SIGTERM set a flag while the plot script runs (it
  // gets the terminal's signal itself), and every way out before the summary removes them.
  const reports::StopOnSignals stop;
  const auto interrupted = [&](int sig) {  // one line; `written` below removes this run's files
    std::cerr << "ulysses: report interrupted by " << reports::signal_name(sig) << "; " << dir.string()
              << " holds no summary.md, report_data.json or plots of this run\n";
    return reports::exit_code_of_signal(sig);
  };
  const fs::path summary_path = dir / "summary.md";
  if (std::remove(summary_path.c_str()) != 0 && errno != ENOENT)
    throw std::runtime_error("cannot replace '" + summary_path.string() + "': " + std::strerror(errno));
  const Json data = reports::report_data_json(in);
  const fs::path data_path = dir / "report_data.json";
  std::vector<std::string> pngs;
  struct Written {  // what this run wrote, removed unless the summary follows
    const fs::path& dir;
    const fs::path& data;
    std::vector<std::string>& pngs;
    bool keep = false;
    ~Written() {
      if (keep) return;
      std::error_code e;
      fs::remove(data, e);
      for (const auto& line : pngs)  // "FILE<tab>TITLE" (reports/plot_report.py), FILE relative to the folder
        if (const auto tab = line.find('\t'); tab != std::string::npos && tab > 0) fs::remove(dir / line.substr(0, tab), e);
    }
  } written{dir, data_path, pngs};
  reports::write_file_atomic(data_path.string(), data.dump(1) + "\n");

  if (!vm["no-plots"].as<bool>()) {
    const std::string py = find_python();
    if (const int sig = reports::StopOnSignals::stop_signal(); sig != 0) return interrupted(sig);  // during the probe
    if (py.empty())
      throw std::runtime_error("no python3 with matplotlib found (tried python3, /usr/bin/python3); "
                               "install python3-matplotlib or pass --no-plots");
    const fs::path script = fs::path(repo_dir()) / "reports" / "plot_report.py";
    if (!path_exists(script)) throw std::runtime_error("plot script " + script.string() + " is missing");
    const std::string cmd = fmt::format("MPLBACKEND=Agg {} {} {} {}", py, quote(script.string()), quote(data_path.string()),
                                        quote(dir.string()));
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("cannot run " + cmd);
    char line[4096];
    for (;;) {  // every line the script prints, also across a signal that interrupts the read
      if (!std::fgets(line, sizeof line, p)) {
        if (std::ferror(p) && errno == EINTR) {
          std::clearerr(p);
          continue;
        }
        break;
      }
      std::string s = line;
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      if (!s.empty()) pngs.push_back(s);
    }
    const int rc = pclose(p);
    if (const int sig = reports::StopOnSignals::stop_signal(); sig != 0) return interrupted(sig);
    if (rc != 0) throw std::runtime_error("plot script failed (" + cmd + ")");
  }
  if (const int sig = reports::StopOnSignals::stop_signal(); sig != 0) return interrupted(sig);

  const std::string md = reports::report_markdown(in, vm["title"].as<std::string>(),
                                                   vm.count("note") ? vm["note"].as<std::string>() : "", pngs);
  reports::write_file_atomic(summary_path.string(), md);
  written.keep = true;
  std::cout << md;
  reports::check_stdout();
  return core::kExitOk;
}

const RegisterCommand reg{"report", "PNG plots and a Markdown summary from plan/predict JSON and sweep results", &run_report};

}  // namespace
}  // namespace ulysses::cli
