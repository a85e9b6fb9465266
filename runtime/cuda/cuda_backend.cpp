#include "runtime/cuda/cuda_backend.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>
#include <chrono>

#include <fmt/format.h>

#include "core/bf16.hpp"
#include "kernels/pack.cuh"
#include "kernels/testdata.cuh"
#include "runtime/backend_registry.hpp"
#include "runtime/checks.hpp"
#include "runtime/cuda/block_runner.hpp"
#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/step_run.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/env.hpp"
#include "runtime/cuda/tracing.hpp"
#include "runtime/verify.hpp"
#include "core/errors.hpp"
#include "core/phases.hpp"
#include "core/stats.hpp"

namespace ulysses::runtime::cuda {
namespace {

// Full-sequence inputs from the same generator the ranks use on the device.
BlockInputs host_inputs(const BlockShape& s, std::uint64_t seed) {
  auto fill = [&](std::int64_t heads, std::uint32_t t) {
    std::vector<core::bf16> x(static_cast<std::size_t>(s.B * s.S * heads * s.D));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = core::float_to_bf16(kernels::seeded_value(seed, t, i));
    return x;
  };
  BlockInputs in;
  in.q = fill(s.H, kernels::kTensorQ), in.k = fill(s.H_kv, kernels::kTensorK), in.v = fill(s.H_kv, kernels::kTensorV);
  in.dout = fill(s.H, kernels::kTensorDout);
  return in;
}

// a2a.qkv.fwd, a2a.out.fwd, a2a.out.bwd, a2a.qkv.bwd (BlockPhase order)
bool is_exchange_phase(int p) { return p == 0 || p == 2 || p == 3 || p == 5; }

bool small_enough_for_host(const BlockShape& s) {
  return static_cast<double>(s.B) * s.S * s.S * s.H * s.D <= 2147483648.0;
}

std::string rank_main(RankCtx& ctx, const BlockShape& s, const RunOptions& opt, const CudaRunConfig& cfg, bool keep) {
  DeviceArena arena(ctx.device);
  RankReport rep;
  rep.rank = ctx.rank;
  BlockRunner run(ctx, arena, s, parse_kernel_choice(s.attn_implementation), cfg.slices);
  run.fill_inputs(opt.seed);
  arena.sample_device_used();

  // 1. validating iteration
  if (opt.verify) {
    run.poison_outputs();
    run.barrier();
    for (int p = 0; p < kPhases; ++p) {
      NvtxRange r(std::string(core::kBlockPhaseNames[p]).c_str());
      run.phase(p);
    }
    ctx.wait(ctx.stream, "the validating iteration");
    arena.sample_device_used();
    if (keep) rep.result = run.download(), rep.kept = true;
    rep.checks = run.device_checks(opt.seed, keep);
    if (keep) rep.result.q_roundtrip = run.roundtrip();
  }
  // 2. warm-up and timed iterations. Every exchange phase starts from a barrier (an excluded
  // 1-element all-reduce), as nccl-tests times collectives: otherwise the faster rank's wait for
  // the slower rank's attention (GPUs differ by 1-2%) would be charged to the exchange that
  // follows attention. Each phase has its own start and end event.
  std::vector<cudaEvent_t> ev0(kPhases), ev1(kPhases);
  for (auto* v : {&ev0, &ev1})
    for (auto& e : *v) CUDA_CHECK(cudaEventCreate(&e));
  for (int it = 0; it < opt.warmup + opt.iters; ++it) {
    run.poison_outputs();
    for (int p = 0; p < kPhases; ++p) {
      if (is_exchange_phase(p) && cfg.exchange_gap_ms > 0) {
        ctx.wait(ctx.stream, "the GPU before an exchange gap");
        std::this_thread::sleep_for(std::chrono::microseconds(static_cast<std::int64_t>(cfg.exchange_gap_ms * 1000)));
      }
      if (is_exchange_phase(p)) run.barrier();
      NvtxRange r(std::string(core::kBlockPhaseNames[p]).c_str());
      CUDA_CHECK(cudaEventRecord(ev0[p], ctx.stream));
      run.phase(p);
      CUDA_CHECK(cudaEventRecord(ev1[p], ctx.stream));
    }
    ctx.wait(ctx.stream, fmt::format("iteration {}", it));
    if (it < opt.warmup) continue;
    std::array<double, kPhases> t{};
    for (int p = 0; p < kPhases; ++p) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, ev0[p], ev1[p]));
      t[p] = ms * 1e-3;
    }
    rep.phase_s.push_back(t);
  }
  for (auto* v : {&ev0, &ev1})
    for (auto& e : *v) cudaEventDestroy(e);
  arena.sample_device_used();

  // 3. traced iteration: phases one after another, each inside its CUPTI time window
  Cupti& cupti = Cupti::get();
  const std::uint32_t tid = static_cast<std::uint32_t>(::syscall(SYS_gettid)), ptid = static_cast<std::uint32_t>(pthread_self());
  run.poison_outputs();
  run.barrier();
  ctx.wait(ctx.stream, "the traced iteration's start");
  std::array<std::pair<std::uint64_t, std::uint64_t>, kPhases> win{};
  rep.origin_ns = Cupti::now_ns();
  for (int p = 0; p < kPhases; ++p) {
    win[p].first = Cupti::now_ns();
    {
      NvtxRange r(std::string(core::kBlockPhaseNames[p]).c_str());
      run.phase(p);
      ctx.wait(ctx.stream, std::string("phase ") + std::string(core::kBlockPhaseNames[p]));
    }
    win[p].second = Cupti::now_ns();
  }
  const std::string rank_track = fmt::format("rank {}", ctx.rank);
  auto us = [&](std::uint64_t ns) { return (static_cast<double>(ns) - static_cast<double>(rep.origin_ns)) * 1e-3; };
  for (int p = 0; p < kPhases; ++p)
    rep.trace.push_back({std::string(core::kBlockPhaseNames[p]), ctx.rank, rank_track, us(win[p].first),
                         (win[p].second - win[p].first) * 1e-3});
  if (cupti.enabled()) {
    const auto recs = cupti.take(static_cast<std::uint32_t>(ctx.device), win[0].first, win[kPhases - 1].second);
    std::array<std::vector<std::pair<std::uint64_t, std::uint64_t>>, kPhases> iv;
    for (const auto& r : recs) {
      if (r.kind == ActivityRecord::marker) {
        if (r.thread == tid || r.thread == ptid)
          rep.trace.push_back({r.name, ctx.rank, rank_track + " nvtx", us(r.start_ns), (r.end_ns - r.start_ns) * 1e-3});
        continue;
      }
      for (int p = 0; p < kPhases; ++p)
        if (r.start_ns >= win[p].first && r.start_ns <= win[p].second) iv[p].push_back({r.start_ns, r.end_ns});
      rep.trace.push_back({r.name, ctx.rank, fmt::format("rank {} stream {}", ctx.rank, r.stream), us(r.start_ns),
                           (r.end_ns - r.start_ns) * 1e-3});
    }
    for (int p = 0; p < kPhases; ++p) rep.traced_busy_s[p] = busy_s(iv[p]);
  }
  rep.kernel = run.kernel_name();
  rep.exchange = run.exchanger().transport() == "p2p" ? "p2p (direct stores)"
                                                      : "nccl (p2p: " + run.exchanger().p2p_unavailable_reason() + ")";
  rep.arena_peak_bytes = arena.peak_bytes();
  rep.device_used_peak_bytes = arena.peak_device_used();
  return serialize(rep);
}

// Per check name over ranks: wrong summed, worst error, passed only if passed everywhere.
std::vector<Check> merge_checks(const std::vector<RankReport>& reps) {
  std::vector<Check> out;
  std::map<std::string, std::size_t> at;
  for (const auto& r : reps)
    for (const auto& c : r.checks) {
      auto it = at.find(c.name);
      if (it == at.end()) {
        at[c.name] = out.size();
        out.push_back(c);
        continue;
      }
      Check& m = out[it->second];
      m.wrong += c.wrong, m.max_abs_err = std::max(m.max_abs_err, c.max_abs_err), m.passed = m.passed && c.passed;
    }
  return out;
}

}  // namespace

int default_slices() {
  const char* s = std::getenv("ULYSSES_A2A_SLICES");
  const int v = s ? std::atoi(s) : 1;
  return v >= 1 && v <= 64 ? v : 1;
}

ProbeResult CudaBackend::probe_steps(const Scenario& sc, const std::vector<std::int64_t>& seq_lens, std::int64_t ballast_bytes,
                                     const std::string& origin) {
  return cuda::probe_steps(sc, seq_lens, ballast_bytes, origin);
}

StepMeasurement CudaBackend::run_step(const Scenario& sc, const StepRunOptions& opt, const std::string& origin) {
  return cuda::run_step(sc, opt, origin);
}

Measurement CudaBackend::run_block(const BlockShape& shape, const RunOptions& opt) {
  CudaRunConfig cfg;
  cfg.slices = default_slices();
  RunOptions o = opt;
  // environment overrides for run/compare: the watchdog and the exchange-gap experiment knob
  if (const auto v = env_number("ULYSSES_TIMEOUT_S", 1e-6, 1e9, "a number of seconds > 0")) o.timeout_s = *v;
  if (const auto v = env_number("ULYSSES_EXCHANGE_GAP_MS", 0, 10000, "a number of milliseconds in 0..10000")) cfg.exchange_gap_ms = *v;
  const char* f = std::getenv("ULYSSES_FOLLOWERS_RETURN");
  cfg.followers_exit = !(f && std::string(f) == "1");
  return run_block_ex(shape, o, cfg);
}

Measurement CudaBackend::run_block_ex(const BlockShape& shape, const RunOptions& opt, const CudaRunConfig& cfg,
                                      std::vector<RankReport>* reports) {
  if (const std::string why = validate(shape); !why.empty()) throw std::invalid_argument(why);
  if (opt.iters < 1 || opt.warmup < 0) throw std::invalid_argument("iters must be >= 1 and warmup >= 0");
  if (shape.P > kernels::kMaxPeers) throw std::invalid_argument(fmt::format("sp_size {} exceeds {}", shape.P, kernels::kMaxPeers));
  if (shape.D % 8 != 0) throw std::invalid_argument("head_dim must be a multiple of 8 (16-byte vectors)");
  parse_kernel_choice(shape.attn_implementation);  // reject an unknown kernel before starting GPUs
  prepare_nvtx_injection();
  Cupti::get();
  auto cluster = Cluster::acquire(static_cast<int>(shape.P), opt.timeout_s);
  const bool host_verify = opt.verify && (cfg.host_verify == 1 || (cfg.host_verify == -1 && small_enough_for_host(shape)));
  const bool keep = cfg.keep_tensors || host_verify;
  const std::vector<std::string> raw = cluster->run([&](RankCtx& ctx) { return rank_main(ctx, shape, opt, cfg, keep); });
  std::vector<RankReport> reps;
  for (const auto& s : raw) reps.push_back(deserialize(s));

  Measurement m;
  m.backend = "cuda";
  m.device = cluster->describe() + ", attention kernel " + reps[0].kernel + ", exchange " + reps[0].exchange + ", " + Cupti::get().status();
  m.attn_kernel = reps[0].kernel.rfind("flash", 0) == 0 ? "ulysses_flash" : "ulysses_reference";
  m.shape = shape;
  for (int p = 0; p < kPhases; ++p) {
    PhaseStats st{std::string(core::kBlockPhaseNames[p]), 0, 1e300, 0};
    for (const auto& r : reps) {
      std::vector<double> v;
      for (const auto& t : r.phase_s) v.push_back(t[p]);
      st.median_s = std::max(st.median_s, core::median(v));
      st.min_s = std::min(st.min_s, *std::min_element(v.begin(), v.end()));
      st.max_s = std::max(st.max_s, *std::max_element(v.begin(), v.end()));
    }
    m.phases.push_back(st);
  }
  for (const auto& r : reps) m.peak_bytes_per_rank.push_back(r.arena_peak_bytes);
  const std::int64_t q_chunk = core::chunk_elems({shape.B, shape.S, shape.P, shape.H, shape.D});
  const std::int64_t kv_chunk = core::chunk_elems({shape.B, shape.S, shape.P, shape.H_kv, shape.D});
  m.a2a_q_bytes_per_rank = shape.P * q_chunk * 2;
  m.a2a_kv_bytes_per_rank = 2 * shape.P * kv_chunk * 2;
  m.checks = merge_checks(reps);
  if (host_verify) {
    std::vector<RankResult> kept;
    for (auto& r : reps) kept.push_back(r.result);
    for (Check c : verify_block(shape, host_inputs(shape, opt.seed), kept)) {
      c.name = "cpu reference: " + c.name;
      m.checks.push_back(c);
    }
  }
  m.correct = opt.verify && !m.checks.empty() &&
              std::all_of(m.checks.begin(), m.checks.end(), [](const Check& c) { return c.passed; });
  std::uint64_t origin = ~0ull;
  for (const auto& r : reps) origin = std::min(origin, r.origin_ns);
  for (const auto& r : reps)
    for (TraceEvent e : r.trace) {
      e.start_us += (static_cast<double>(r.origin_ns) - static_cast<double>(origin)) * 1e-3;
      m.trace.push_back(e);
    }
  if (reports) *reports = std::move(reps);
  if (cluster->launcher_mode() && cluster->my_rank() != 0 && cfg.followers_exit) {
    std::fflush(stdout), std::fflush(stderr);
    std::_Exit(m.correct || !opt.verify ? 0 : 1);
  }
  return m;
}

}  // namespace ulysses::runtime::cuda

namespace ulysses::runtime {
void register_cuda_backend() {
  register_backend("cuda", [] { return std::unique_ptr<Backend>(new cuda::CudaBackend); });
}
}  // namespace ulysses::runtime
