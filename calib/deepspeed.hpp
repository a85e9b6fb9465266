#pragma once
// `ulysses calibrate --backend deepspeed`: the PyTorch process's fixed costs (device memory outside
// its caching allocator) measured by the deepspeed backend's worker, as calibrated.pytorch_context_GiB
// (one GPU) or calibrated.pytorch_nccl_buffer_GiB (P > 1 ranks: what they add on top of the
// calibrated context), keeping the profile's other calibrated keys (docs/DEEPSPEED_BACKEND.md).
#include <cstdint>
#include <string>
#include <vector>

#include "sim/scenario.hpp"

namespace ulysses::calib::deepspeed {

struct Setup {
  std::string model = "llama-3.1-8b", profile = "h200-sxm-141gb";  // presets (names or paths) of the set-up step
  std::int64_t layers = 1, seq_len = 4096;                          // its decoder layers and sequence length
  std::int64_t gpus = 1;  // ranks (torchrun): 1 measures the context, P > 1 the NCCL buffers
  // the set-up step's features (plan keys of the same names; off: the fixed costs' set-up as before). With them the
  // phase clock times the host's issue cost of the ops whose frees the allocator defers (issue 12): the logits tiles,
  // TiledMLP's shards, the checkpoints' copies to the host
  bool tiled_logits = false, tiled_mlp = false, offload_checkpoints = false;
  // with one GPU, after the fixed costs: the op bench (calib/op_fit.hpp) at these S (empty: none) on
  // the set-up model's heads, torch AdamW and CPU Adam over these many parameters (0: not timed)
  std::vector<std::int64_t> op_seq_lens = {4096, 16384, 32768, 65536};
  std::int64_t op_adam_params = 256'000'000, op_cpu_adam_params = 256'000'000;
};

struct Result {
  Calibration c;             // the profile's calibrated section with the measured key set
  std::string profile_name;  // the profile's name
  std::string what;          // one line: the value and how it was composed
  std::vector<std::string> ops;  // one line per key the op bench set (calib/op_fit.hpp)
  // The phase clock of the set-up's second step as a table (title, header, units row, one row per phase, by GPU
  // time): GPU and host seconds per phase. Measured, not a profile key yet (issue 12's two-clock model); empty when
  // the worker reported none.
  std::vector<std::string> phase_clock;
};
// Runs the worker; InputError keyed by the flag (--gpus, --layers, --model, ...) on bad setup.
Result calibrate(const Setup& s);

}  // namespace ulysses::calib::deepspeed
