// runtime/cuda/step_run.hpp: the step's phases timed with CUDA events at every boundary, collected
// per phase name, and the StepMeasurement around them.
#include "runtime/cuda/step_run.hpp"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/stats.hpp"
#include "kernels/testdata.cuh"
#include "runtime/cuda/block_runner.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/cuda_events.hpp"
#include "runtime/cuda/device_info.hpp"
#include "runtime/cuda/step_run_parts.hpp"
#include "runtime/cuda/step_runner.hpp"
#include "runtime/cuda/tracing.hpp"
#include "runtime/power_sampler.hpp"
#include "runtime/reference_layer.hpp"
#include "runtime/step_plan.hpp"

namespace ulysses::runtime::cuda {
namespace {

// The traced step's marks: the host waits for the stream at every phase boundary, so a phase's window on CUPTI's
// clock holds its GPU work on that stream; work of other streams (the checkpoint copies) counts where it runs.
class TracedMarks : public PhaseMarks {
 public:
  struct Window { std::string phase; std::uint64_t begin_ns = 0, end_ns = 0; };
  TracedMarks() = default;
  TracedMarks(const TracedMarks&) = delete;
  TracedMarks& operator=(const TracedMarks&) = delete;
  ~TracedMarks() {  // a step that threw inside a phase leaves its NVTX range open
    if (!windows_.empty() && windows_.back().end_ns == 0) nvtxRangePop();
  }
  void begin(std::string_view phase, cudaStream_t s) override {
    close(s);
    windows_.push_back({std::string(phase), Cupti::now_ns(), 0});
    nvtxRangePushA(windows_.back().phase.c_str());
  }
  void end(cudaStream_t s) { close(s); }
  const std::vector<Window>& windows() const { return windows_; }

 private:
  void close(cudaStream_t s) {
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (windows_.empty() || windows_.back().end_ns != 0) return;
    nvtxRangePop();
    windows_.back().end_ns = Cupti::now_ns();
  }
  std::vector<Window> windows_;
};

// One more step traced by CUPTI: per phase name, the GPU busy time inside its windows (StepPhase::kernel_s: every
// record's interval clipped to each window it overlaps, so a copy that runs on into the next phases counts there),
// and every record as a span of m.traced (tracks "phases", "stream N", "nvtx"). CUPTI is paused afterwards. A step
// whose records did not arrive leaves kernel_s at -1 (not traced).
void traced_step(StepRunner& run, cudaStream_t s, StepMeasurement& m) {
  Cupti& cupti = Cupti::get();
  if (!cupti.enabled()) return;
  struct Pause {
    Cupti& c;
    ~Pause() { c.pause(); }
  } pause{cupti};
  CUDA_CHECK(cudaStreamSynchronize(s));
  TracedMarks marks;
  const std::uint64_t origin = Cupti::now_ns();
  run.step(s, &marks);
  marks.end(s);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto& win = marks.windows();
  if (win.empty()) return;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const auto recs = cupti.take(static_cast<std::uint32_t>(device), win.front().begin_ns, win.back().end_ns);
  auto rel = [&](std::uint64_t ns) { return (static_cast<double>(ns) - static_cast<double>(origin)) * 1e-9; };
  std::vector<StepMeasurement::Span> spans;
  for (const auto& w : win) spans.push_back({w.phase, "phases", rel(w.begin_ns), (w.end_ns - w.begin_ns) * 1e-9});
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint64_t>>> busy;  // phase -> its clipped intervals
  bool any = false;
  for (const auto& r : recs) {
    if (r.kind == ActivityRecord::marker) {
      spans.push_back({r.name, "nvtx", rel(r.start_ns), (r.end_ns - r.start_ns) * 1e-9});
      continue;
    }
    any = true;
    spans.push_back({r.name, fmt::format("stream {}", r.stream), rel(r.start_ns), (r.end_ns - r.start_ns) * 1e-9});
    // the windows are in time order: from the last one that begins at or before the record's start
    auto w = std::upper_bound(win.begin(), win.end(), r.start_ns,
                              [](std::uint64_t t, const TracedMarks::Window& x) { return t < x.begin_ns; });
    if (w != win.begin()) --w;
    for (; w != win.end() && w->begin_ns <= r.end_ns; ++w) {
      const std::uint64_t a = std::max(r.start_ns, w->begin_ns), b = std::min(r.end_ns, w->end_ns);
      if (a < b) busy[w->phase].push_back({a, b});
    }
  }
  if (!any) return;
  m.traced = std::move(spans);
  for (StepPhase& p : m.phases) p.kernel_s = busy.count(p.name) ? busy_s(busy[p.name]) : 0.0;
}

std::int64_t proc_status_kib(const char* key) {  // /proc/self/status "VmRSS:  123 kB"; -1 when absent
  std::ifstream f("/proc/self/status");
  std::string k;
  while (f >> k) {
    if (k == key) {
      std::int64_t v = -1;
      f >> v;
      return v;
    }
    std::getline(f, k);
  }
  return -1;
}

}  // namespace

StepMeasurement run_step(const Scenario& sc, const StepRunOptions& opt, const std::string& origin) {
  const StepShape shape = step_shape_of(sc, origin);
  if (shape.sp > 1) return run_step_sp(shape, opt, origin);
  if (opt.ranks_on_one_gpu) throw core::InputError(origin, "plan.sp_size", "is 1: --ranks-on-one-gpu is for sp > 1");
  const KernelChoice kernel = kernel_of(shape, origin);
  const auto wall0 = std::chrono::steady_clock::now();
  prepare_nvtx_injection();
  const DeviceInfo info = device_info();
  CUDA_CHECK(cudaSetDevice(0));
  const StepDims& d = shape.dims;

  DeviceArena arena(0);
  Gemm gemm(true, Gemm::sustained_window_from_env());
  OneRank one;  // offload_params: ZeRO-3's parts and slots over this one rank
  StepRunner run(d, plan_of(shape), arena, gemm, opt.seed, kernel.kind, nullptr, shape.offload_params ? &one : nullptr);
  const StepBatch batch = seeded_batch(shape, opt.seed);
  run.set_batch(batch.tokens, batch.labels, batch.cos, batch.sin);

  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  StepMeasurement m;
  m.backend = "cuda";
  m.device = info.name;
  m.versions = Json{{"cuda_driver", info.driver}, {"cuda_runtime", info.runtime}, {"nccl", info.nccl}};
  m.ranks = 1, m.layers = d.L, m.seq_len = sc.plan.seq_len;
  const double divisor = double(std::max<std::int64_t>(run.valid_tokens(), 1));
  EventMarks marks;
  std::vector<std::string> order;                      // phases in first-seen order
  std::map<std::string, std::vector<double>> per_step;  // phase -> its time in each timed step
  std::vector<double> steps;
  const std::string bus = pci_bus_id(0);  // empty: no handle, the energy "not measured" (the step itself goes on)
  const EnergyCounter energy(bus);        // the timed steps' joules (runtime/power_sampler.hpp)
  double joules0 = -1;
  // each phase's SM clock: NVML sampled every 10 ms over the timed steps, the samples matched to the phases' windows
  // on the host's clock; the GPU's clock is tied to it by an event recorded on the idle stream before each step
  PowerSampler sampler(10);
  const int nvml_gpu = bus.empty() ? -1 : sampler.index_of(bus);  // -1: no clock per phase
  std::vector<ClockWindow> windows;
  const Events anchor_event(1);
  const cudaEvent_t anchor = anchor_event.e[0];
  for (int it = 0; it < 1 + opt.warmup + opt.iters; ++it) {
    const bool timed = it > opt.warmup;
    if (it == opt.warmup + 1) {
      joules0 = energy.joules();  // the steps before it ended with a synchronize
      if (nvml_gpu >= 0) sampler.start();
    }
    marks.start();
    CUDA_CHECK(cudaEventRecord(anchor, s));  // the stream is idle: it completes at once
    const double anchor_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sampler.started_at()).count();
    run.step(s, timed ? &marks : nullptr);
    if (timed) marks.end(s);
    CUDA_CHECK(cudaStreamSynchronize(s));
    m.losses.push_back(run.loss_sum() / divisor);
    if (it == 0 && !std::isfinite(m.losses.back())) break;  // the step did not train: correct() says so
    if (!timed) continue;
    float lead_ms = 0;  // the anchor to the step's first phase
    if (marks.first()) CUDA_CHECK(cudaEventElapsedTime(&lead_ms, anchor, marks.first()));
    const std::vector<std::pair<std::string, double>> segments = marks.segments();
    std::map<std::string, double> sum;
    double total = 0, t0 = 0;
    std::vector<StepMeasurement::Segment> line;
    for (const auto& [name, sec] : segments) {
      if (!sum.count(name) && !per_step.count(name)) order.push_back(name);
      sum[name] += sec, total += sec;
      line.push_back({name, t0, sec});
      t0 += sec;
    }
    for (ClockWindow& w : windows_after(anchor_s + lead_ms * 1e-3, segments)) windows.push_back(std::move(w));
    for (const std::string& n : order) per_step[n].push_back(sum[n]);
    steps.push_back(total);
    m.timeline = {line};
  }
  (void)sampler.stop();
  const std::map<std::string, WindowClock> clocks = clock_in_windows(sampler.samples(), nvml_gpu, windows);
  const std::int64_t peak = arena.peak_bytes() + static_cast<std::int64_t>(Gemm::kWorkspaceBytes);
  for (const std::string& n : order) {
    const auto& v = per_step[n];
    StepPhase p;
    p.name = n;
    if (const auto c = clocks.find(n); c != clocks.end()) p.sm_mhz = c->second.sm_mhz_median, p.sm_samples = c->second.samples;
    p.median_s = core::median(v);
    p.min_s = *std::min_element(v.begin(), v.end()), p.max_s = *std::max_element(v.begin(), v.end());
    p.alloc_start_bytes = peak, p.peak_bytes = peak, p.peak_reserved_bytes = peak;  // allocated up front
    m.phases.push_back(p);
  }
  if (const double joules1 = energy.joules(); !steps.empty() && joules0 >= 0 && joules1 >= joules0)
    m.energy_j_per_step = (joules1 - joules0) / double(steps.size());
  if (!steps.empty()) {
    m.step_median_s = core::median(steps);
    m.step_min_s = *std::min_element(steps.begin(), steps.end()), m.step_max_s = *std::max_element(steps.begin(), steps.end());
  }
  m.max_memory_allocated = peak, m.max_memory_reserved = peak;
  m.peak_at = "construction";
  // what the timed steps used, before the traced step adds CUPTI's buffers and records
  m.device_used_bytes = arena.sample_device_used();
  m.host_rss_bytes = proc_status_kib("VmRSS:") * 1024, m.host_rss_peak_bytes = proc_status_kib("VmHWM:") * 1024;
  m.pinned_bytes = run.host_pinned_bytes();
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  // after the timed steps: kernel_s and m.traced. The timed steps stand without it: a traced step that fails
  // says so on stderr and leaves kernel_s at -1. A CUDA error still pending (a sticky one, that breaks the
  // context) ends the run here; one the kernel wrappers already consumed does not (it broke nothing).
  if (std::isfinite(m.losses.back())) {
    try {
      traced_step(run, s, m);
    } catch (const std::exception& e) {
      for (StepPhase& p : m.phases) p.kernel_s = -1;
      m.traced.clear();
      std::fprintf(stderr, "warning: the traced step failed, no CUPTI attribution: %s\n", e.what());
      if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) {
        cudaStreamDestroy(s);
        throw;
      }
    }
  }
  CUDA_CHECK(cudaStreamDestroy(s));
  return m;
}

ProbeResult probe_steps(const Scenario& sc, const std::vector<std::int64_t>& seq_lens, std::int64_t ballast_bytes,
                        const std::string& origin) {
  std::vector<StepShape> shapes;  // every length checked before the first allocation
  for (std::int64_t S : seq_lens) {
    Scenario x = sc;
    x.plan.seq_len = S;
    shapes.push_back(step_shape_of(x, origin));
  }
  if (shapes.empty()) return {};
  if (shapes.front().sp > 1)
    throw core::InputError(origin, "plan.sp_size", "must be 1: capacity probes of our step run one GPU (sp > 1 runs with run/compare)");
  const KernelChoice kernel = kernel_of(shapes.front(), origin);
  CUDA_CHECK(cudaSetDevice(0));
  DeviceArena hold(0);  // the ballast: device memory the probes do not get
  DevBuf<unsigned char> ballast(hold, ballast_bytes);
  Gemm gemm;
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ProbeResult out;
  try {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      DeviceArena arena(0);
      try {
        OneRank one;
        StepRunner run(shapes[i].dims, plan_of(shapes[i]), arena, gemm, 1234, kernel.kind, nullptr,
                       shapes[i].offload_params ? &one : nullptr);
        const StepBatch batch = seeded_batch(shapes[i], 1234);
        run.set_batch(batch.tokens, batch.labels, batch.cos, batch.sin);
        run.step(s, nullptr);
        CUDA_CHECK(cudaStreamSynchronize(s));
        if (!std::isfinite(run.loss_sum()))
          throw std::runtime_error(fmt::format("capacity probe at S={}: the step's loss is not finite", seq_lens[i]));
      } catch (const OutOfMemory&) {
        out.oom_at = seq_lens[i];
        break;
      }
      const std::int64_t peak = arena.peak_bytes() + static_cast<std::int64_t>(Gemm::kWorkspaceBytes);
      out.fits.push_back({seq_lens[i], peak, peak});
    }
  } catch (...) {
    cudaStreamDestroy(s);
    throw;
  }
  CUDA_CHECK(cudaStreamDestroy(s));
  return out;
}

}  // namespace ulysses::runtime::cuda
