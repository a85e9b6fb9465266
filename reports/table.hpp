#pragma once
// Aligned text tables in the nccl-tests style: a '#' header row, a '#' units row, then rows.
//   #  term            GPU     share
//   #                (GiB)       (%)
//      weights        14.96      21.3
#include <string>
#include <vector>

#include "sim/prediction.hpp"
#include "sim/scenario.hpp"

namespace ulysses::reports {

enum class Align { left, right };

struct Column {
  std::string name;
  std::string unit;              // shown as "(unit)" in the units row; "" = blank
  Align align = Align::right;
};

class Table {
 public:
  explicit Table(std::vector<Column> columns);
  // Throws std::invalid_argument when the cell count differs from the column count.
  void add_row(std::vector<std::string> cells);
  std::size_t rows() const { return rows_.size(); }
  // Every line of the table has the same column start positions; lines end with '\n'.
  std::string render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace ulysses::reports

// Tables of one prediction (plan and predict print these).
namespace ulysses::reports {

// "llama-3.1-8b on 8 x h100-sxm-80gb (8 GPUs/node), host RAM 2048 GiB/node" and the plan line.
std::string describe_scenario(const Scenario& sc);
// term | GiB | share of total | plus a total row and the capacity. Terms of 0 bytes are left out
// (the JSON lists every term).
std::string memory_table(const MemoryBreakdown& m, core::bytes_t capacity, const std::string& where);
// phase | time (human_time: us, ms, s, h:mm:ss) | share of the step; phases of 0 s left out when omit_zero.
std::string phase_table(const PhaseTimes& p, bool omit_zero = true);
// step time, tokens/s, TFLOP/s (hardware count, Megatron-style count), each labelled.
std::string throughput_lines(const Prediction& p);

}  // namespace ulysses::reports
