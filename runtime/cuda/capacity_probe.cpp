#include "runtime/cuda/capacity_probe.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "runtime/cuda/block_runner.hpp"
#include "runtime/cuda/device_info.hpp"
#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/tracing.hpp"

namespace ulysses::runtime::cuda {
namespace {

// One rank: "<fits 0|1> <arena bytes> <free before> <free after> <phase seconds>\n<note>"
std::string probe_rank(RankCtx& ctx, const BlockShape& s, const std::vector<int>& phases, bool run) {
  const std::int64_t free_before = device_free_bytes(ctx.device);
  DeviceArena arena(ctx.device);
  bool fits = true;
  std::string note;
  double secs = 0;
  std::int64_t free_after = 0;
  try {
    BlockRunner r(ctx, arena, s, parse_kernel_choice(s.attn_implementation), default_slices());
    if (run) {
      r.fill_inputs(1);
      r.barrier();
      ctx.wait(ctx.stream, "capacity probe barrier");
      const auto t0 = std::chrono::steady_clock::now();
      for (int p : phases) r.phase(p);
      ctx.wait(ctx.stream, "capacity probe phases");
      ctx.wait(ctx.comm_stream, "capacity probe phases");
      secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    free_after = device_free_bytes(ctx.device);
  } catch (const OutOfMemory& e) {
    fits = false, note = e.what();
  }
  std::ostringstream o;
  o << (fits ? 1 : 0) << ' ' << arena.peak_bytes() << ' ' << free_before << ' ' << free_after << ' ' << secs << '\n' << note;
  return o.str();
}

}  // namespace

FitProbe probe_block_fit(const BlockShape& s, const std::vector<int>& run_phases, double timeout_s) {
  if (const std::string why = validate(s); !why.empty()) throw std::invalid_argument(why);
  prepare_nvtx_injection();
  auto cl = Cluster::acquire(static_cast<int>(s.P), timeout_s);
  auto parse = [](const std::vector<std::string>& all, FitProbe& out) {
    out = FitProbe{};
    out.fits = true;
    for (const auto& r : all) {
      std::istringstream in(r);
      int fits = 0;
      std::int64_t arena = 0, before = 0, after = 0;
      double secs = 0;
      in >> fits >> arena >> before >> after >> secs;
      std::string note;
      std::getline(in, note);
      std::getline(in, note);
      out.fits = out.fits && fits == 1;
      out.arena_bytes.push_back(arena), out.free_before_bytes.push_back(before), out.free_after_bytes.push_back(after);
      out.phases_s = std::max(out.phases_s, secs);
      if (!fits && out.note.empty()) out.note = note;
    }
  };
  FitProbe p;
  // 1. allocation only (no collective: a rank that fails cannot leave its peers waiting)
  parse(cl->run([&](RankCtx& ctx) { return probe_rank(ctx, s, {}, false); }), p);
  if (!p.fits || run_phases.empty()) return p;
  // 2. every rank fits: allocate again and run the phases
  parse(cl->run([&](RankCtx& ctx) { return probe_rank(ctx, s, run_phases, true); }), p);
  return p;
}

}  // namespace ulysses::runtime::cuda
