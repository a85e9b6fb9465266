#include "reports/table.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/format.hpp"
#include "reports/json_out.hpp"

namespace ulysses::reports {

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns_.size())
    throw std::invalid_argument("table row has " + std::to_string(cells.size()) + " cells, expected " +
                                std::to_string(columns_.size()));
  rows_.push_back(std::move(cells));
}

namespace {
void pad(std::string& line, const std::string& cell, std::size_t width, Align align) {
  const std::size_t fill = width > cell.size() ? width - cell.size() : 0;
  if (align == Align::right) line.append(fill, ' ');
  line += cell;
  if (align == Align::left) line.append(fill, ' ');
}
void trim_right(std::string& s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
}
}  // namespace

std::string Table::render() const {
  std::vector<std::string> units(columns_.size());
  std::vector<std::size_t> width(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    units[c] = columns_[c].unit.empty() ? "" : "(" + columns_[c].unit + ")";
    width[c] = std::max(columns_[c].name.size(), units[c].size());
    for (const auto& r : rows_) width[c] = std::max(width[c], r[c].size());
  }
  auto line_of = [&](char lead, auto cell_of) {
    std::string line(1, lead);
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      line += "  ";
      pad(line, cell_of(c), width[c], columns_[c].align);
    }
    trim_right(line);
    return line + "\n";
  };
  std::string out = line_of('#', [&](std::size_t c) { return columns_[c].name; });
  out += line_of('#', [&](std::size_t c) { return units[c]; });
  for (const auto& r : rows_) out += line_of(' ', [&](std::size_t c) { return r[c]; });
  return out;
}

}  // namespace ulysses::reports

namespace ulysses::reports {

std::string describe_scenario(const Scenario& sc) {
  const auto& p = sc.plan;
  std::string features;
  auto add = [&](bool on, const char* what) {
    if (on) features += std::string(features.empty() ? "" : ", ") + what;
  };
  add(p.offload_optimizer, "optimizer offload");
  add(p.offload_params, "parameter offload");
  add(p.activation_checkpointing && !p.offload_checkpoints, "activation checkpointing");
  add(p.activation_checkpointing && p.offload_checkpoints, "activation checkpointing offloaded to host");
  add(!p.activation_checkpointing, "no activation checkpointing");
  add(p.tiled_logits, "tiled logits/loss");
  add(p.tiled_mlp, "TiledMLP");
  return fmt::format(
      "model {} on {} x {} ({} GPUs/node), HBM {:.1f} GiB/GPU, host RAM {:.0f} GiB/node\n"
      "plan: sp {} x dp_replicate {} x dp_shard {}, ZeRO-{}, {}, {}, B={}, {}{}\n",
      sc.model.name, sc.gpus, sc.hw.name, resolved_gpus_per_node(sc), core::to_GiB(sc.hw.hbm_bytes),
      core::to_GiB(resolved_host_ram_bytes(sc)), p.sp_size, p.dp_replicate_size, p.dp_shard_size, p.zero_stage,
      features, p.attn_implementation, p.micro_batch_size, sc.workload.causal ? "causal" : "non-causal",
      p.kv_strategy == KvStrategy::send_once ? ", kv sent once" : "");
}

std::string memory_table(const MemoryBreakdown& m, core::bytes_t capacity, const std::string& where) {
  Table t({{where + " memory term", "", Align::left}, {"size", "GiB"}, {"share", "%"}});
  const core::bytes_t total = m.total();
  auto share = [&](core::bytes_t b) { return total > 0 ? fmt::format("{:.1f}", 100.0 * b / total) : "-"; };
  for (int i = 0; i < m.n; ++i)
    if (m.terms[i].bytes != 0)
      t.add_row({m.terms[i].name, fmt::format("{:.3f}", core::to_GiB(m.terms[i].bytes)), share(m.terms[i].bytes)});
  t.add_row({"total", fmt::format("{:.3f}", core::to_GiB(total)), share(total)});
  t.add_row({"capacity", fmt::format("{:.3f}", core::to_GiB(capacity)),
             capacity > 0 ? fmt::format("{:.1f}", 100.0 * total / capacity) : "-"});
  return t.render();
}

std::string phase_table(const PhaseTimes& p, bool omit_zero) {
  Table t({{"phase", "", Align::left}, {"time", ""}, {"share", "%"}});
  const double total = p.total();
  for (int i = 0; i < p.n; ++i)
    if (p.phases[i].time_s != 0 || !omit_zero)
      t.add_row({p.phases[i].name, human_time(p.phases[i].time_s),
               total > 0 ? fmt::format("{:.1f}", 100.0 * p.phases[i].time_s / total) : "-"});
  t.add_row({"step (sum)", human_time(total), total > 0 ? "100.0" : "-"});
  return t.render();
}

std::string throughput_lines(const Prediction& p) {
  return fmt::format(
      "step time: {}   tokens/s (global): {:.1f}\n"
      "TFLOP/s per GPU: {:.1f} hardware (FLOPs executed: causal halved, recompute counted), "
      "{:.1f} Megatron-style (papers' count: (2cNS + 4cLhS^2)*B, c=4 with checkpointing, non-causal)\n",
      human_time(p.step_time_s) + (p.step_time_s >= 60 ? fmt::format(" ({:.0f} s)", p.step_time_s) : ""), p.tokens_per_s, p.hw_tflops_per_gpu, p.megatron_tflops_per_gpu);
}

}  // namespace ulysses::reports
