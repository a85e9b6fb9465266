#pragma once
// `ulysses calibrate --backend cpu`: the CPU backend measured (exchange bus bandwidth vs bytes per
// rank for each sp size, attention efficiency vs S, pack bandwidth) into the `calibrated:` section
// of a hardware profile that predict() reads, with its provenance.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/scenario.hpp"

namespace ulysses::calib::cpu {

struct Setup {
  std::vector<std::int64_t> sp_sizes;  // thread-ranks of the exchange curves, each >= 2
  int threads = 2, iters = 5;          // threads running attention and pack at once; iterations per exchange / pack point
  std::int64_t heads = 4, kv_heads = 1, head_dim = 64;  // attention shape per thread
  bool causal = true;
  std::string impl = "ulysses_reference";  // the implementation name the attention curves are filed under
  bool quick = false;                      // fewer, smaller points (seconds; for tests)
};

struct Result {
  Calibration c;
  std::string report;  // the tables of what was measured
};
// Measures on this host; efficiencies against hw.bf16_dense_flops (InputError keyed
// bf16_dense_TFLOPs when a rate exceeds it). command: the command line, for the provenance.
Result calibrate(const Setup& s, const HardwareProfile& hw, const std::string& command);

}  // namespace ulysses::calib::cpu
