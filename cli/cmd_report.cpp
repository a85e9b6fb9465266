// ulysses report: renders the JSON of plan/predict and the CSV + summary of sweeps into PNG
// plots (matplotlib scripts in reports/) and a Markdown summary (DIR/summary.md, and stdout).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "reports/file_out.hpp"
#include "reports/json_in.hpp"
#include "reports/format.hpp"
#include "reports/json_out.hpp"
#include "sim/config.hpp"
#include "sim/errors.hpp"

namespace ulysses::cli {
namespace {

namespace fs = std::filesystem;
using reports::Json;

struct Inputs {
  std::vector<Json> results;   // plan / predict JSON
  std::vector<Json> sweeps;    // sweep summaries (with "csv")
};

void load_input(const fs::path& p, Inputs& in) {
  Json j = reports::read_json_file(p.string());  // depth- and size-checked: one line, never a crash
  if (!j.is_object()) throw InputError(p.string(), "JSON", "expected an object written by ulysses plan, predict or sweep");
  if (j.contains("command")) {
    reports::check_result_json(j, p.string());
    j["source_file"] = p.string();
    in.results.push_back(std::move(j));
  } else if (j.contains("points") && j.contains("csv")) {
    reports::check_sweep_summary_json(j, p.string());
    fs::path csv = j["csv"].get<std::string>();
    std::error_code ec;
    if (!fs::exists(csv, ec)) csv = p.parent_path() / csv.filename();  // moved together with its summary
    if (!fs::exists(csv, ec)) throw InputError(p.string(), "csv", "'" + csv.string() + "' does not exist");
    j["csv"] = csv.string();
    j["summary_file"] = p.string();
    in.sweeps.push_back(std::move(j));
  } else {
    throw InputError(p.string(), "command", "not the JSON of ulysses plan/predict (--format json) or a sweep summary");
  }
}

Inputs load_inputs(const std::vector<std::string>& args) {
  Inputs in;
  for (const auto& a : args) {
    const fs::path p = a;
    if (fs::is_directory(p)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) load_input(f, in);
    } else if (fs::is_regular_file(p)) {
      if (p.extension() == ".csv") {
        fs::path summary = p;
        summary.replace_extension(".summary.json");
        if (!fs::exists(summary)) throw InputError(p.string(), "summary", "needs its sweep summary " + summary.string());
        load_input(summary, in);
      } else {
        load_input(p, in);
      }
    } else {
      throw InputError(a, "input", "no such file or folder");
    }
  }
  return in;
}

// Markdown: the GPU memory terms (GiB) at the longest sequence, one column per label, at 8 GPUs
// (or the largest count planned) of each (model, profile) group.
std::string memory_markdown(const std::map<std::string, std::vector<const Json*>>& groups,
                            const std::vector<std::string>& order) {
  std::string md;
  for (const auto& g : order) {
    std::set<std::int64_t> gpus;
    for (const Json* j : groups.at(g)) gpus.insert((*j)["scenario"]["gpus"].get<std::int64_t>());
    const std::int64_t n = gpus.count(8) ? 8 : *gpus.rbegin();
    std::vector<const Json*> cols;
    for (const Json* j : groups.at(g))
      if ((*j)["scenario"]["gpus"] == n && (*j)["seq_len"].get<std::int64_t>() > 0) cols.push_back(j);
    if (cols.empty()) continue;
    std::vector<std::string> terms;  // in the model's order, without those zero in every column
    for (const Json* j : cols)
      for (auto it = (*j)["gpu_memory_bytes"].begin(); it != (*j)["gpu_memory_bytes"].end(); ++it)
        if (it.key() != "total" && std::find(terms.begin(), terms.end(), it.key()) == terms.end()) terms.push_back(it.key());
    std::erase_if(terms, [&](const std::string& t) {
      return std::all_of(cols.begin(), cols.end(), [&](const Json* j) { return (*j)["gpu_memory_bytes"].value(t, std::int64_t{0}) == 0; });
    });
    terms.push_back("total");
    md += fmt::format("\n### GPU memory at the longest sequence (GiB): {}, {} GPUs\n\n| term |", g, n);
    for (const Json* j : cols) md += fmt::format(" {} ({}) |", j->value("label", std::string("plan")),
                                                 reports::human_tokens((*j)["seq_len"].get<std::int64_t>()));
    md += "\n|---|";
    for (std::size_t i = 0; i < cols.size(); ++i) md += "---:|";
    md += "\n";
    for (const auto& t : terms) {
      md += "| " + t + " |";
      for (const Json* j : cols)
        md += fmt::format(" {:.2f} |", (*j)["gpu_memory_bytes"].value(t, std::int64_t{0}) / kGiB);
      md += "\n";
    }
    md += "| host RAM per node (total) |";
    for (const Json* j : cols)
      md += fmt::format(" {:.1f} |", (*j)["host_memory_bytes_per_node"]["total"].get<std::int64_t>() / kGiB);
    md += "\n";
  }
  return md;
}

// Markdown: the longest sequence per (model, profile), gpus x label, from plan results.
std::string ablation_markdown(const std::vector<Json>& results) {
  std::map<std::string, std::vector<const Json*>> groups;
  std::vector<std::string> group_order;
  for (const auto& j : results) {
    if (j["command"] != "plan") continue;
    const std::string key = fmt::format("{} on {}", j["scenario"]["model"]["name"].get<std::string>(),
                                        j["scenario"]["profile"]["name"].get<std::string>());
    if (!groups.count(key)) group_order.push_back(key);
    groups[key].push_back(&j);
  }
  std::string md;
  for (const auto& g : group_order) {
    std::vector<std::string> labels;
    std::set<std::int64_t> gpus;
    std::map<std::pair<std::int64_t, std::string>, const Json*> cell;
    for (const Json* j : groups[g]) {
      const std::string label = j->value("label", std::string("plan"));
      if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
      const std::int64_t n = (*j)["scenario"]["gpus"].get<std::int64_t>();
      gpus.insert(n);
      cell[{n, label}] = j;
    }
    md += fmt::format("\n### Longest sequence: {}\n\n| GPUs |", g);
    for (const auto& l : labels) md += " " + l + " |";
    md += "\n|---:|";
    for (std::size_t i = 0; i < labels.size(); ++i) md += "---:|";
    md += "\n";
    for (std::int64_t n : gpus) {
      md += fmt::format("| {} |", n);
      for (const auto& l : labels) {
        auto it = cell.find({n, l});
        if (it == cell.end()) {
          md += " |";
          continue;
        }
        const Json& j = *it->second;
        const std::string b = j["binding"] == "host_ram" ? "host" : j["binding"] == "gpu_hbm" ? "gpu" : "-";
        const std::int64_t seq = j["seq_len"].get<std::int64_t>();
        md += fmt::format(" {} ({}, sp {}) |", seq > 0 ? reports::human_tokens(seq) : "none fits", b,
                          j["scenario"]["plan"]["sp_size"].get<std::int64_t>());
      }
      md += "\n";
    }
  }
  md += memory_markdown(groups, group_order);
  if (!md.empty())
    md = "## Longest sequence that fits\n\nEach cell: the longest sequence (K = 10^3, M = 10^6 tokens), what binds one step "
         "further (gpu = HBM, host = host RAM per node) and the sp size.\n" + md;
  return md;
}

// Markdown: one row per predict result.
std::string predict_markdown(const std::vector<Json>& results) {
  std::string md;
  for (const auto& j : results) {
    if (j["command"] != "predict") continue;
    const auto& sc = j["scenario"];
    md += fmt::format("| {} | {} | {} | {} | {} | {:.2f} | {:.1f} | {} | {} | {:.1f} |\n", j.value("label", sc["name"].get<std::string>()),
                      sc["model"]["name"].get<std::string>(), sc["profile"]["name"].get<std::string>(),
                      sc["gpus"].get<std::int64_t>(), j["seq_len"].get<std::int64_t>(),
                      j["gpu_memory_bytes"]["total"].get<double>() / kGiB,
                      j["host_memory_bytes_per_node"]["total"].get<double>() / kGiB, j["binding"].get<std::string>(),
                      reports::human_time(j["step_time_s"].get<double>()), j["megatron_tflops_per_gpu"].get<double>());
  }
  if (md.empty()) return md;
  return "\n## Predictions\n\n| scenario | model | profile | GPUs | S | GPU GiB | host GiB/node | does not fit | step | "
         "TFLOP/s/GPU (Megatron) |\n|---|---|---|---:|---:|---:|---:|---|---:|---:|\n" + md;
}

std::string sweep_markdown(const std::vector<Json>& sweeps) {
  if (sweeps.empty()) return "";
  std::string md = "\n## Sweeps\n\n| sweep | mode | points | valid | skipped | points/s | threads |\n|---|---|---:|---:|---:|---:|---:|\n";
  for (const auto& s : sweeps)
    md += fmt::format("| {} | {} | {} | {} | {} | {:.0f} | {} |\n", s["name"].get<std::string>(), s["mode"].get<std::string>(),
                      s["points"].get<std::int64_t>(), s["valid"].get<std::int64_t>(), s["skipped_total"].get<std::int64_t>(),
                      s["points_per_s"].get<double>(), s["threads"].get<int>());
  for (const auto& s : sweeps)
    for (auto it = s["skipped"].begin(); it != s["skipped"].end(); ++it)
      md += fmt::format("\n- {}: skipped {} points: {}", s["name"].get<std::string>(), it.value().get<std::int64_t>(), it.key());
  return md + "\n";
}

// A python3 that imports matplotlib: `python3`, then /usr/bin/python3.
std::string find_python() {
  for (const char* py : {"python3", "/usr/bin/python3"})
    if (std::system(fmt::format("{} -c 'import matplotlib' >/dev/null 2>&1", py).c_str()) == 0) return py;
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
               "summary: the longest sequence vs GPU count per label (e.g. feature ablations), stacked memory\n"
               "breakdowns at that length, and sweep plots. Plots need a python3 with matplotlib.",
               d);
    return kExitOk;
  }
  if (!vm.count("inputs")) throw InputError("", "INPUT", "at least one input file or folder is required");
  const Inputs in = load_inputs(vm["inputs"].as<std::vector<std::string>>());
  if (in.results.empty() && in.sweeps.empty()) throw InputError("", "INPUT", "no plan/predict JSON or sweep summary found");
  const fs::path dir = vm["out"].as<std::string>();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError("", "--out", "cannot create '" + dir.string() + "': " + ec.message());

  // A failed report leaves no summary.md: an older one goes first (the plots are rewritten below).
  const fs::path summary_path = dir / "summary.md";
  if (std::remove(summary_path.c_str()) != 0 && errno != ENOENT)
    throw std::runtime_error("cannot replace '" + summary_path.string() + "': " + std::strerror(errno));
  Json data = {{"results", in.results}, {"sweeps", in.sweeps}};
  const fs::path data_path = dir / "report_data.json";
  reports::write_file_atomic(data_path.string(), data.dump(1) + "\n");

  std::vector<std::string> pngs;
  if (!vm["no-plots"].as<bool>()) {
    const std::string py = find_python();
    if (py.empty())
      throw std::runtime_error("no python3 with matplotlib found (tried python3, /usr/bin/python3); "
                               "install python3-matplotlib or pass --no-plots");
    const fs::path script = fs::path(repo_dir()) / "reports" / "plot_report.py";
    if (!fs::exists(script)) throw std::runtime_error("plot script " + script.string() + " is missing");
    const std::string cmd = fmt::format("MPLBACKEND=Agg {} {} {} {}", py, quote(script.string()), quote(data_path.string()),
                                        quote(dir.string()));
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("cannot run " + cmd);
    char line[4096];
    while (std::fgets(line, sizeof line, p)) {
      std::string s = line;
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      if (!s.empty()) pngs.push_back(s);
    }
    const int rc = pclose(p);
    if (rc != 0) throw std::runtime_error("plot script failed (" + cmd + ")");
  }

  std::string md = "# " + vm["title"].as<std::string>() + "\n\n";
  if (vm.count("note")) md += vm["note"].as<std::string>() + "\n\n";
  md += ablation_markdown(in.results);
  md += predict_markdown(in.results);
  md += sweep_markdown(in.sweeps);
  if (!pngs.empty()) {
    md += "\n## Plots\n\n";
    for (const auto& png : pngs) md += fmt::format("- {}\n", (dir / png).string());
  }
  reports::write_file_atomic(summary_path.string(), md);
  std::cout << md;
  reports::check_stdout();
  return kExitOk;
}

const RegisterCommand reg{"report", "PNG plots and a Markdown summary from plan/predict JSON and sweep results", &run_report};

}  // namespace
}  // namespace ulysses::cli
