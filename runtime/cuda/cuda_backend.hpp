#pragma once
// The "cuda" backend: the Ulysses attention block on P GPUs (runtime/cuda/block_runner.hpp),
// in single-process or launcher mode (cluster.hpp), traced with NVTX + CUPTI (tracing.hpp).
//
// One run_block, on every rank:
//   1. seeded inputs (kernels/testdata.cuh), outputs poisoned (NaN bits) before every iteration;
//   2. verify (opt.verify): one iteration, then the device checks (bit-exact exchange, round
//      trip, no poison left) and, at small sizes (B*S^2*H*D <= 2^31), the CPU reference's
//      checks (runtime/verify.hpp, as the CPU backend's: exchange vs a direct gather, Ulysses vs an fp64 single-rank
//      oracle for out, dq, dk, dv);
//   3. `warmup` iterations, then `iters` timed ones: CUDA events between phases on the compute
//      stream (ranks aligned by a 1-element all-reduce first); phase time = max over ranks of
//      the per-rank median (PhaseStats as the CPU backend);
//   4. one traced iteration: a host wait between phases, CUPTI records attributed to the phase
//      whose window holds them -> Measurement.trace (tracks "rank r" for phases, "rank r stream
//      N" for kernels and copies, "rank r nvtx" for the NVTX ranges CUPTI saw).
// Peak memory per rank = the rank's DeviceArena high-water mark (all block buffers, allocated
// once up front); the cudaMemGetInfo view is kept in the RankReport.
// ULYSSES_TIMEOUT_S (seconds) overrides RunOptions.timeout_s in run_block (the watchdog).
// Launcher mode: every rank returns the same Measurement; unless ULYSSES_FOLLOWERS_RETURN=1,
// ranks other than 0 then exit the process (status 0 when correct, else 1) so that only rank 0
// prints and writes files.
#include <memory>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/cuda/report.hpp"

namespace ulysses::runtime::cuda {

struct CudaRunConfig {
  int slices = 1;                  // exchange pipelining (B = 1): ULYSSES_A2A_SLICES overrides the default
  int host_verify = -1;            // -1: auto by size, 0: off, 1: on
  bool keep_tensors = false;       // fill RankReport::result (host copies) for tests
  bool followers_exit = true;      // launcher mode, ranks > 0 exit after the run (see above)
  // experiment knob (ULYSSES_EXCHANGE_GAP_MS): before each timed exchange phase the host waits for
  // the GPU and then idles this long, so the exchange does not start right after attention
  // (docs/VALIDATION.md finding 3); 0 = off (the default, and how every record was measured)
  double exchange_gap_ms = 0;
};

class CudaBackend : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  Measurement run_block(const BlockShape& shape, const RunOptions& opt) override;
  // --scope step: runtime/cuda/step_run.hpp
  StepMeasurement run_step(const Scenario& sc, const StepRunOptions& opt, const std::string& origin) override;
  ProbeResult probe_steps(const Scenario& sc, const std::vector<std::int64_t>& seq_lens, std::int64_t ballast_bytes,
                          const std::string& origin) override;
  Measurement run_block_ex(const BlockShape& shape, const RunOptions& opt, const CudaRunConfig& cfg,
                           std::vector<RankReport>* reports = nullptr);
};

int default_slices();  // ULYSSES_A2A_SLICES, else 1

}  // namespace ulysses::runtime::cuda
