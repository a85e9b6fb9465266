// runtime/cuda/step_run.hpp at sp = P > 1: P ranks, each a StepRunner holding S / P tokens and 1 / P of every
// parameter (ZeRO-3), over GPUs (the Cluster: one thread per GPU, or one process per rank under a launcher; NcclRank)
// or as logical ranks of one GPU (LoopbackRank; StepRunOptions::ranks_on_one_gpu: a check of the command, whose
// collectives are device copies between host barriers). Each rank times its own phases with events and returns
// them as JSON; the merge takes, per timed step, each phase's max over ranks and the max of the ranks' step totals.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/stats.hpp"
#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/device_info.hpp"
#include "runtime/cuda/env.hpp"
#include "runtime/cuda/launcher.hpp"
#include "runtime/cuda/loopback_ranks.hpp"
#include "runtime/cuda/nccl_ranks.hpp"
#include "runtime/cuda/step_run.hpp"
#include "runtime/cuda/step_run_parts.hpp"
#include "runtime/cuda/tracing.hpp"
#include "runtime/power_sampler.hpp"

namespace ulysses::runtime::cuda {
namespace {

struct RankJob {
  const StepShape& shape;
  const StepBatch& whole;
  std::int64_t valid = 0;  // the whole sequence's valid labels: every rank's loss divisor
  const StepRunOptions& opt;
  kernels::AttnKernel kind;
};

// How a rank waits for its stream (over GPUs: RankCtx::wait, the watchdog), and the ranks' agreement that every
// runner was built before any collective is queued (over GPUs: a host all-gather, bounded by the timeout and the
// abort flag; logical ranks need none: a failed peer aborts their group's barriers).
struct RankSync {
  std::function<void(cudaStream_t, const char*)> wait;
  std::function<void()> agree;
};

// One rank's steps: {"steps": [[[phase, s], ...] per timed step], "loss_sums": [per step], "peak": bytes,
// "pinned": bytes, "energy_j": the timed steps' joules (-1: not measured; null: not counted by this rank)}. Every
// rank runs every step (no early stop on a non-finite loss: the ranks' collectives must stay in step). staging: the
// transport's buffers (NCCL).
std::string rank_steps(const RankJob& job, int r, int device, LayerExchange& ex, StepCollectives& coll, cudaStream_t s,
                       const DeviceArena* staging, bool count_energy, const RankSync& sync) {
  CUDA_CHECK(cudaSetDevice(device));
  const int P = ex.ranks();
  DeviceArena arena(device);
  Gemm gemm(true, Gemm::sustained_window_from_env());
  StepPlan plan = plan_of(job.shape);
  // the host optimizer: the host's cores shared by its P ranks (threads of this process, or processes of one node
  // under a launcher: the sp group within a node, as the model's gpus_on_node)
  plan.host_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / P);
  StepRunner run(job.shape.dims, plan, arena, gemm, job.opt.seed, job.kind, &ex, &coll);
  const StepBatch mine = rank_rows(job.whole, r, P);
  run.set_batch(mine.tokens, mine.labels, mine.cos, mine.sin, job.valid);
  sync.wait(s, "the runner's set-up");
  sync.agree();
  const EnergyCounter energy(count_energy ? pci_bus_id(device) : std::string());
  double joules0 = -1;
  EventMarks marks;
  Json steps = Json::array(), losses = Json::array();
  for (int it = 0; it < 1 + job.opt.warmup + job.opt.iters; ++it) {
    const bool timed = it > job.opt.warmup;
    if (it == job.opt.warmup + 1) joules0 = energy.joules();
    marks.start();
    run.step(s, timed ? &marks : nullptr);
    if (timed) marks.end(s);
    sync.wait(s, "a step");
    losses.push_back(run.loss_sum());  // NaN and inf are written as null
    if (!timed) continue;
    Json line = Json::array();
    for (const auto& [name, sec] : marks.segments()) line.push_back(Json::array({name, sec}));
    steps.push_back(line);
  }
  const double joules1 = energy.joules();
  const std::int64_t peak = arena.peak_bytes() + (staging ? staging->peak_bytes() : 0) + static_cast<std::int64_t>(Gemm::kWorkspaceBytes);
  return Json{{"steps", steps},
              {"loss_sums", losses},
              {"peak", peak},
              {"device_used", arena.sample_device_used()},
              {"pinned", run.host_pinned_bytes()},
              {"energy_j", !count_energy ? Json(nullptr) : Json(joules0 >= 0 && joules1 >= joules0 ? joules1 - joules0 : -1.0)}}
      .dump();
}

// Every rank's JSON into one measurement: per timed step, each phase's max over ranks (rank 0's phase order) and
// the max of the ranks' totals; the loss of a step the ranks' summed token losses over the valid labels.
StepMeasurement merge_ranks(const std::vector<std::string>& per_rank, std::int64_t valid) {
  std::vector<Json> rk;
  for (const std::string& s : per_rank) rk.push_back(Json::parse(s));
  StepMeasurement m;
  const std::size_t n_steps = rk[0]["steps"].size(), n_all = rk[0]["loss_sums"].size();
  for (std::size_t it = 0; it < n_all; ++it) {
    double sum = 0;
    for (const Json& j : rk) sum += j["loss_sums"][it].is_number() ? j["loss_sums"][it].get<double>() : NAN;
    m.losses.push_back(sum / double(std::max<std::int64_t>(valid, 1)));
  }
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> per_step;  // phase -> its max over ranks in each timed step
  std::vector<double> steps;
  double energy = 0;
  int counted = 0;
  std::int64_t peak = 0, used = 0;
  for (const Json& j : rk) {
    peak = std::max(peak, j["peak"].get<std::int64_t>()), used = std::max(used, j["device_used"].get<std::int64_t>());
    if (j["energy_j"].is_null()) continue;  // another rank counts this GPU
    const double e = j["energy_j"].get<double>();
    energy = energy < 0 || e < 0 ? -1 : energy + e, ++counted;
  }
  if (!counted) energy = -1;
  for (std::size_t k = 0; k < n_steps; ++k) {
    std::map<std::string, double> worst;
    double total = 0;
    for (const Json& j : rk) {
      std::map<std::string, double> sum;
      double t = 0;
      for (const Json& seg : j["steps"][k]) {
        const std::string name = seg[0].get<std::string>();
        if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
        sum[name] += seg[1].get<double>(), t += seg[1].get<double>();
      }
      for (const auto& [name, sec] : sum) worst[name] = std::max(worst[name], sec);
      total = std::max(total, t);
    }
    for (const std::string& n : order) per_step[n].push_back(worst[n]);
    steps.push_back(total);
  }
  for (const Json& j : rk) {  // each rank's last timed step
    std::vector<StepMeasurement::Segment> line;
    double t0 = 0;
    if (n_steps)
      for (const Json& seg : j["steps"][n_steps - 1]) {
        line.push_back({seg[0].get<std::string>(), t0, seg[1].get<double>()});
        t0 += seg[1].get<double>();
      }
    m.timeline.push_back(line);
  }
  for (const std::string& n : order) {
    const auto& v = per_step[n];
    StepPhase p;
    p.name = n, p.median_s = core::median(v);
    p.min_s = *std::min_element(v.begin(), v.end()), p.max_s = *std::max_element(v.begin(), v.end());
    p.alloc_start_bytes = peak, p.peak_bytes = peak, p.peak_reserved_bytes = peak;  // allocated up front
    m.phases.push_back(p);
  }
  if (!steps.empty()) {
    m.step_median_s = core::median(steps);
    m.step_min_s = *std::min_element(steps.begin(), steps.end()), m.step_max_s = *std::max_element(steps.begin(), steps.end());
    if (energy >= 0) m.energy_j_per_step = energy / double(steps.size());
  }
  m.max_memory_allocated = m.max_memory_reserved = peak;
  m.peak_at = "construction";
  m.device_used_bytes = used;
  m.pinned_bytes = rk[0]["pinned"].get<std::int64_t>();
  return m;
}

}  // namespace

StepMeasurement run_step_sp(const StepShape& shape, const StepRunOptions& opt, const std::string& origin) {
  const int P = static_cast<int>(shape.sp);
  const KernelChoice kernel = kernel_of(shape, origin);
  const auto wall0 = std::chrono::steady_clock::now();
  prepare_nvtx_injection();
  const StepBatch whole = seeded_batch(shape, opt.seed);
  const RankJob job{shape, whole, valid_labels(whole.labels), opt, kernel.kind};
  const DeviceInfo info = device_info();
  std::vector<std::string> per_rank;
  std::string device;
  std::shared_ptr<Cluster> cluster;
  if (opt.ranks_on_one_gpu) {
    per_rank = run_loopback_ranks(P, [&](int r, LayerExchange& ex, StepCollectives& coll, cudaStream_t s) {
      const RankSync sync{[](cudaStream_t st, const char*) { CUDA_CHECK(cudaStreamSynchronize(st)); }, [] {}};
      return rank_steps(job, r, 0, ex, coll, s, nullptr, r == 0, sync);  // one GPU: its energy once
    });
    device = fmt::format("{} ({} logical ranks on one GPU: threads, collectives as device copies)", info.name, P);
  } else {
    const LaunchInfo launch = detect_launch();
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess) n_dev = 0, (void)cudaGetLastError();
    if (!launch.launched && n_dev < P)
      throw core::InputError(origin, "plan.sp_size",
                             fmt::format("is {} but this process sees {} GPU(s): run it on {} GPUs (one thread each, or "
                                         "torchrun/srun with one process per GPU), or as a check with `run --ranks-on-one-gpu` "
                                         "(the ranks as threads of one GPU)",
                                         P, n_dev, P));
    const double timeout = env_number("ULYSSES_TIMEOUT_S", 1e-6, 1e9, "a number of seconds > 0").value_or(300.0);
    cluster = Cluster::acquire(P, timeout);
    per_rank = cluster->run([&](RankCtx& ctx) -> std::string {
      DeviceArena staging(ctx.device);
      NcclRank rank(ctx, staging, NcclRank::exchange_capacity(shape.dims.layer, P));
      const RankSync sync{[&ctx](cudaStream_t st, const char* what) { ctx.wait(st, what); },
                          [&ctx] { (void)ctx.allgather("built"); }};
      return rank_steps(job, ctx.rank, ctx.device, rank, rank, ctx.stream, &staging, true, sync);
    });
    device = cluster->describe();
  }
  StepMeasurement m = merge_ranks(per_rank, job.valid);
  m.backend = "cuda";
  m.device = device;
  m.versions = Json{{"cuda_driver", info.driver}, {"cuda_runtime", info.runtime}, {"nccl", info.nccl}};
  m.ranks = P, m.layers = shape.dims.L, m.seq_len = shape.dims.layer.T * P;
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (cluster && cluster->launcher_mode() && cluster->my_rank() != 0) {  // rank 0 reports (as the block's run)
    std::fflush(stdout), std::fflush(stderr);
    std::_Exit(m.correct() ? 0 : 1);
  }
  return m;
}

}  // namespace ulysses::runtime::cuda
