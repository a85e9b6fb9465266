#pragma once
// The ranks of a run and their NCCL communicators, in either process model (launcher.hpp):
//   single-process: P local GPUs, one std::thread per GPU, ncclCommInitAll;
//   launcher: this process is one rank; unique id over TCP (bootstrap.hpp), then
//     ncclCommInitRankConfig non-blocking, polled with ncclCommGetAsyncError until the deadline
//     (a missing rank or a wrong world size ends here, bounded); then ncclCommSplit into a
//     blocking communicator for the run (default; verified on 2x H200 under torchrun).
//   Then one small send/recv with every peer sets NCCL's connections up while all ranks live.
// Non-blocking communicators only with ULYSSES_NCCL_BLOCKING=0 (single-process mode:
// ncclCommInitRankConfig per GPU in one group): every NCCL call may return ncclInProgress and
// RankCtx::nccl() polls it to completion (bounded by timeout_s); measured ~5 ms per exchange.
// Watchdog: every host wait on GPU work goes through RankCtx::wait, which polls the stream and
// the communicator's async error; past timeout_s (or when another rank of this process failed)
// it calls ncclCommAbort and throws one line naming the rank and what it waited for. So a
// missing rank, a wrong world size or a stuck collective ends with an error, never a hang.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "runtime/cuda/launcher.hpp"

namespace ulysses::runtime::cuda {

struct HostBoard;  // single-process all-gather among the rank threads (cluster.cpp)

struct RankCtx {
  int rank = 0, world = 1, device = 0;
  ncclComm_t comm = nullptr;          // null when world == 1
  cudaStream_t stream = nullptr;      // pack, attention, unpack
  cudaStream_t comm_stream = nullptr; // NCCL
  double timeout_s = 300;
  std::atomic<bool>* abort_flag = nullptr;  // set when any rank of this process failed
  bool* comm_aborted = nullptr;
  HostBoard* board = nullptr;               // single-process mode with P > 1
  const volatile int* p2p_timeout = nullptr;  // host-mapped: 1 + the rank a p2p exchange waited for in vain (p2p.hpp)

  // Blocks until all work queued on s is done; the watchdog described above.
  void wait(cudaStream_t s, const std::string& what);
  // ncclGroupEnd, then (non-blocking communicator) polls until the group is enqueued.
  void group_end(const std::string& what);
  // Completes an NCCL call's result: polls ncclInProgress to the deadline, throws on errors.
  void nccl(ncclResult_t r, const std::string& what);
  // Aborts the communicator (idempotent).
  void abort_comm();
  // Every rank's string, indexed by rank, on every rank: a collective of all ranks (threads in
  // single-process mode, NCCL in launcher mode). Bounded by timeout_s and the abort flag.
  std::vector<std::string> allgather(const std::string& mine);
};

class Cluster {
 public:
  // P ranks. Launcher mode: world size must equal P. Single-process: P visible GPUs needed.
  // Communicators are cached per P for the life of the process (init costs ~1 s).
  static std::shared_ptr<Cluster> acquire(int P, double timeout_s);

  // Runs fn on every local rank (threads in single-process mode) and returns every rank's
  // string, indexed by rank, on every rank (launcher mode: NCCL all-gather). An exception in
  // any rank is rethrown (launcher mode: on every rank, naming the failing rank).
  std::vector<std::string> run(const std::function<std::string(RankCtx&)>& fn);

  bool launcher_mode() const { return launch_.launched; }
  int world() const { return world_; }
  int my_rank() const { return launch_.launched ? launch_.rank : 0; }  // rank that reports (0 in single mode)
  std::string describe() const;  // "2x NVIDIA H200 (single process, 2 threads)"
  double timeout_s = 300;

  ~Cluster();

 private:
  Cluster() = default;
  void init(int P);
  void connect_all();
  LaunchInfo launch_;
  int world_ = 1;
  std::vector<RankCtx> ranks_;  // local ranks
  std::vector<int> devices_;
  std::atomic<bool> abort_{false};
  std::vector<char> aborted_;   // per local rank
  std::unique_ptr<HostBoard> board_;
  bool broken_ = false;
};

// All-gather of one byte string per rank over NCCL (launcher mode helper, exposed for tests).
std::vector<std::string> allgather_strings(RankCtx& ctx, const std::string& mine);

}  // namespace ulysses::runtime::cuda
