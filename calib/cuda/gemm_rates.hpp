#pragma once
// `calibrate --backend cuda`: our runtime's cuBLASLt GEMMs (runtime/cuda/gemm.hpp, the calls the step runner
// makes) timed alone, per pass and weight shape over M, as the step model's calibrated.ulysses_gemm_eff
// (sim/gemm_key.hpp keys; eff = 2 M N K / t / bf16 dense peak). The shapes: the layer and loss-head GEMMs of
// the given models (sim/gemm_key.hpp layer_gemm_shapes), each distinct (N, K) once; M up to what keeps every
// operand within max_elems. Before any pass is timed, its output at the first M is checked at 16 sampled
// entries against an fp64 dot product of the same bf16 inputs (std::runtime_error when one is off by more
// than 2^-7 of the value plus 1e-4 of the sum of the products' magnitudes, or not finite). wgrad runs with
// beta = 0, wgrad_acc with beta = 1 (the shards after the first, untuned as the runtime runs them).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "calib/point_clocks.hpp"
#include "sim/scenario.hpp"

namespace ulysses::calib::cuda {

struct GemmCalibration {
  std::vector<std::pair<std::int64_t, std::int64_t>> NK;  // weight shapes [N, K], each once
  std::vector<std::int64_t> M = {1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
  std::int64_t max_elems = std::int64_t{1} << 31;        // per operand (bf16: 4 GiB)
  int warmup = 2, iters = 5;
  // What each call starts after, untimed (runtime/cuda/event_timer.hpp time_on_stream_after): with both 0, the
  // calls run back to back (the stream drained between them). idle_s: the GPU idle that long (the host asleep);
  // lead_fills: that many writes of a 256 MiB scratch buffer (memory-bound work, ~0.1 ms each on an H100) queued
  // just before the call, as the step's GEMMs follow its norms and elementwise kernels.
  double idle_s = 0;
  int lead_fills = 0;
};

// The distinct weight shapes of the models' layers and loss heads.
std::vector<std::pair<std::int64_t, std::int64_t>> gemm_shapes_of(const std::vector<ModelSpec>& models);

// One curve per pass and shape (key, curve); `report` gets one line per curve. With `clocks`, each point's timed
// calls run as the point gemm_point_name(key, M) (calib/point_clocks.hpp).
std::vector<std::pair<std::string, Curve>> ulysses_gemm_curves(double peak_flops, const GemmCalibration& g, std::string& report,
                                                               int device = 0, PointClocks* clocks = nullptr);
std::string gemm_point_name(const std::string& key, std::int64_t M);

}  // namespace ulysses::calib::cuda
