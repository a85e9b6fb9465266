// summary.md and report_data.json of `ulysses report` (reports/report_md.hpp).
#include "reports/report_md.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/format.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/memory_families.hpp"
#include "core/units.hpp"

namespace ulysses::reports {

namespace {

using Group = std::vector<const Json*>;

std::string label_of(const Json& j) { return j.value("label", std::string("plan")); }
std::int64_t gpus_of(const Json& j) { return j["scenario"]["gpus"].get<std::int64_t>(); }

// Plan results grouped by "model on profile", in input order.
struct Groups {
  std::vector<std::string> order;
  std::map<std::string, Group> rows;
};

Groups plan_groups(const std::vector<Json>& results) {
  Groups g;
  for (const auto& j : results) {
    if (j["command"] != "plan") continue;
    const std::string key = fmt::format("{} on {}", j["scenario"]["model"]["name"].get<std::string>(),
                                        j["scenario"]["profile"]["name"].get<std::string>());
    if (!g.rows.count(key)) g.order.push_back(key);
    g.rows[key].push_back(&j);
  }
  return g;
}

std::vector<std::string> labels_in_order(const Group& rows) {
  std::vector<std::string> labels;
  for (const Json* j : rows)
    if (std::find(labels.begin(), labels.end(), label_of(*j)) == labels.end()) labels.push_back(label_of(*j));
  return labels;
}

// One GPUs x label table per group; cell(j) renders one plan result.
template <class Cell>
std::string gpus_by_label(const std::string& heading, const Group& rows, Cell cell) {
  const auto labels = labels_in_order(rows);
  std::set<std::int64_t> gpus;
  std::map<std::pair<std::int64_t, std::string>, const Json*> at;
  for (const Json* j : rows) {
    gpus.insert(gpus_of(*j));
    at[{gpus_of(*j), label_of(*j)}] = j;
  }
  std::string md = "\n### " + heading + "\n\n| GPUs |";
  for (const auto& l : labels) md += " " + l + " |";
  md += "\n|---:|";
  for (std::size_t i = 0; i < labels.size(); ++i) md += "---:|";
  md += "\n";
  for (std::int64_t n : gpus) {
    md += fmt::format("| {} |", n);
    for (const auto& l : labels) {
      auto it = at.find({n, l});
      md += it == at.end() ? " |" : " " + cell(*it->second) + " |";
    }
    md += "\n";
  }
  return md;
}

std::string seq_cell(const Json& j) {
  const std::string b = j["binding"] == "host_ram" ? "host" : j["binding"] == "gpu_hbm" ? "gpu" : "-";
  const std::int64_t seq = j["seq_len"].get<std::int64_t>();
  return fmt::format("{} ({}, sp {})", seq > 0 ? human_tokens(seq) : "nothing fits", b,
                     j["scenario"]["plan"]["sp_size"].get<std::int64_t>());
}

std::string speed_cell(const Json& j) {
  if (j["seq_len"].get<std::int64_t>() <= 0) return "-";
  return fmt::format("{}, {}/s", human_time(j["step_time_s"].get<double>()),
                     human_tokens(std::llround(j.value("tokens_per_s", 0.0))));
}

double gib(const Json& breakdown, const std::string& term) {
  return static_cast<double>(breakdown.value(term, std::int64_t{0})) / core::kGiB;
}

// Memory at the longest sequence, one column per label at 8 GPUs (or the largest count planned):
// GPU memory by family with its terms below it, then host RAM per node by family.
std::string memory_markdown(const std::string& group, const Group& rows) {
  std::set<std::int64_t> gpus;
  for (const Json* j : rows) gpus.insert(gpus_of(*j));
  const std::int64_t n = gpus.count(8) ? 8 : *gpus.rbegin();
  Group cols;
  for (const Json* j : rows)
    if (gpus_of(*j) == n && (*j)["seq_len"].get<std::int64_t>() > 0) cols.push_back(j);
  if (cols.empty()) return "";
  auto row = [&](const std::string& name, auto value) {
    std::string r = "| " + name + " |";
    for (const Json* j : cols) r += " " + value(*j) + " |";
    return r + "\n";
  };
  auto family_sum = [](const Json& breakdown, int f) {
    double s = 0;
    for (const auto& tf : kMemoryTermFamilies)
      if (static_cast<int>(tf.family) == f) s += gib(breakdown, tf.term);
    return s;
  };
  std::string md = fmt::format("\n### Memory at the longest sequence (GiB): {}, {} GPUs\n\n| family / term |", group, n);
  for (const Json* j : cols) md += fmt::format(" {} ({}) |", label_of(*j), human_tokens(std::llround((*j)["seq_len"].get<double>())));
  md += "\n|---|";
  for (std::size_t i = 0; i < cols.size(); ++i) md += "---:|";
  md += "\n";
  for (int f = 0; f < static_cast<int>(kMemoryFamilyNames.size()); ++f) {
    std::string terms;
    for (const auto& tf : kMemoryTermFamilies) {
      if (static_cast<int>(tf.family) != f) continue;
      const bool any = std::any_of(cols.begin(), cols.end(), [&](const Json* j) { return gib((*j)["gpu_memory_bytes"], tf.term) > 0; });
      if (any) terms += row(fmt::format("&nbsp;&nbsp;{}", tf.term), [&](const Json& j) { return fmt::format("{:.2f}", gib(j["gpu_memory_bytes"], tf.term)); });
    }
    if (terms.empty()) continue;
    md += row(fmt::format("**GPU: {}**", kMemoryFamilyNames[f]),
              [&](const Json& j) { return fmt::format("**{:.2f}**", family_sum(j["gpu_memory_bytes"], f)); });
    md += terms;
  }
  md += row("**GPU total (per GPU)**", [](const Json& j) { return fmt::format("**{:.2f}**", gib(j["gpu_memory_bytes"], "total")); });
  md += row("GPU capacity (HBM)", [](const Json& j) { return fmt::format("{:.2f}", j["gpu_capacity_bytes"].get<double>() / core::kGiB); });
  for (int f = 0; f < static_cast<int>(kMemoryFamilyNames.size()); ++f) {
    const bool any = std::any_of(cols.begin(), cols.end(), [&](const Json* j) { return family_sum((*j)["host_memory_bytes_per_node"], f) > 0; });
    if (any) md += row(fmt::format("host: {}", kMemoryFamilyNames[f]), [&](const Json& j) { return fmt::format("{:.1f}", family_sum(j["host_memory_bytes_per_node"], f)); });
  }
  md += row("**host RAM per node (total)**", [](const Json& j) { return fmt::format("**{:.1f}**", gib(j["host_memory_bytes_per_node"], "total")); });
  md += row("host RAM capacity per node", [](const Json& j) { return fmt::format("{:.1f}", j["host_capacity_bytes_per_node"].get<double>() / core::kGiB); });
  return md;
}

std::string ablation_markdown(const std::vector<Json>& results) {
  const Groups g = plan_groups(results);
  if (g.order.empty()) return "";
  std::string md = "## Longest sequence that fits\n\nEach cell: the longest sequence (decimal units: 1M = 1,000,000 "
                   "tokens), what binds one step further (gpu = HBM, host = host RAM per node) and the sp size.\n";
  for (const auto& k : g.order) md += gpus_by_label("Longest sequence: " + k, g.rows.at(k), seq_cell);
  md += "\n## Step time and throughput at the longest sequence\n\nEach cell: the predicted time of one optimizer "
        "step at the longest sequence that fits, and global tokens per second (\"-\": nothing fits).\n";
  for (const auto& k : g.order) md += gpus_by_label("Step time, tokens/s: " + k, g.rows.at(k), speed_cell);
  md += "\n## Memory by family\n\nThe terms of docs/MODEL.md grouped into families (sim/memory_families.hpp); "
        "bold rows are family sums.\n";
  for (const auto& k : g.order) md += memory_markdown(k, g.rows.at(k));
  return md;
}

std::string predict_markdown(const std::vector<Json>& results) {
  std::string md;
  for (const auto& j : results) {
    if (j["command"] != "predict") continue;
    const auto& sc = j["scenario"];
    md += fmt::format("| {} | {} | {} | {} | {} | {:.2f} | {:.1f} | {} | {} | {} | {:.1f} |\n",
                      j.value("label", sc["name"].get<std::string>()), sc["model"]["name"].get<std::string>(),
                      sc["profile"]["name"].get<std::string>(), sc["gpus"].get<std::int64_t>(),
                      human_tokens(std::llround(j["seq_len"].get<double>())), j["gpu_memory_bytes"]["total"].get<double>() / core::kGiB,
                      j["host_memory_bytes_per_node"]["total"].get<double>() / core::kGiB, j["binding"].get<std::string>(),
                      human_time(j["step_time_s"].get<double>()), human_tokens(std::llround(j.value("tokens_per_s", 0.0))),
                      j["megatron_tflops_per_gpu"].get<double>());
  }
  if (md.empty()) return md;
  return "\n## Predictions\n\n| scenario | model | profile | GPUs | S | GPU GiB | host GiB/node | does not fit | step time | "
         "tokens/s | TFLOP/s/GPU (Megatron) |\n|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|\n" + md;
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

}  // namespace

void check_memory_terms(const Json& result, const std::string& file) {
  for (const char* field : {"gpu_memory_bytes", "host_memory_bytes_per_node"})
    for (auto it = result[field].begin(); it != result[field].end(); ++it)
      if (it.key() != "total" && !memory_family_name(it.key()))
        throw core::InputError(file, std::string(field) + "." + it.key(),
                         "unknown memory term (not in the family table sim/memory_families.hpp)");
}

Json memory_families_json() {
  Json terms = Json::object();
  for (const auto& tf : kMemoryTermFamilies) terms[tf.term] = kMemoryFamilyNames[static_cast<int>(tf.family)];
  Json order = Json::array();
  for (const char* f : kMemoryFamilyNames) order.push_back(f);
  return {{"order", order}, {"terms", terms}};
}

Json report_data_json(const ReportInputs& in) {
  Json sweeps = Json::array();
  for (Json s : in.sweeps) {
    Json hbm = Json::object();
    hbm[s["base"]["profile"]["name"].get<std::string>()] = s["base"]["profile"]["hbm_bytes"];
    for (const auto& axis : s["axes"])
      if (axis["key"] == "profile" && axis.contains("values"))
        for (const auto& v : axis["values"]) hbm[v.get<std::string>()] = load_profile(v.get<std::string>()).hbm_bytes;
    s["hbm_bytes_by_profile"] = hbm;
    sweeps.push_back(std::move(s));
  }
  return {{"results", in.results}, {"sweeps", sweeps}, {"memory_families", memory_families_json()}};
}

std::string report_markdown(const ReportInputs& in, const std::string& title, const std::string& note,
                            const std::vector<std::string>& pngs) {
  std::string md = "# " + title + "\n\n";
  if (!note.empty()) md += note + "\n\n";
  md += ablation_markdown(in.results);
  md += predict_markdown(in.results);
  md += sweep_markdown(in.sweeps);
  if (!pngs.empty()) {
    md += "\n## Plots\n";
    for (const auto& line : pngs) {
      const auto tab = line.find('\t');
      const std::string file = line.substr(0, tab), caption = tab == std::string::npos ? file : line.substr(tab + 1);
      // embedded relative to summary.md's folder, where the plots are written
      if (file.empty() || std::filesystem::path(file).filename().string() != file || file == "..")
        throw std::runtime_error("plot script printed '" + file + "', not a file name in the report folder");
      md += fmt::format("\n### {}\n\n![{}]({})\n", caption, caption, file);
    }
  }
  return md;
}

}  // namespace ulysses::reports
