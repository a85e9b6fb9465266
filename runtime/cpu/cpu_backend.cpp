#include "runtime/cpu/cpu_backend.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "runtime/cpu/cpu_step.hpp"
#include "runtime/cpu/exchange.hpp"
#include "runtime/cpu/tracked.hpp"
#include "runtime/reference_attention.hpp"
#include "sim/block_memory.hpp"
#include "core/phases.hpp"
#include "core/stats.hpp"

namespace ulysses::runtime::cpu {
namespace {

using Clock = std::chrono::steady_clock;
using core::chunk_elems;
using core::heads_per_rank;
constexpr int kPhases = static_cast<int>(core::BlockPhase::count);

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The state of one rank for one iteration: its tracker, its phase clocks, its trace events.
struct RankCtx {
  RankCtx(const BlockShape& s_, int r_, SharedExchange& ex_, Clock::time_point origin_)
      : s(s_), r(r_), ex(ex_), origin(origin_) {}
  const BlockShape& s;
  int r;
  SharedExchange& ex;
  Clock::time_point origin;
  MemoryTracker mem;
  std::array<double, kPhases> phase_s{};
  std::array<std::int64_t, kPhases> phase_peak{};
  void begin_phase() { mem.open_window(); }
  void end_phase(core::BlockPhase p) { phase_peak[static_cast<int>(p)] = std::max(phase_peak[static_cast<int>(p)], mem.window_peak); }
  std::vector<TraceEvent>* trace = nullptr;  // set on the traced iteration
  std::array<double, kPhases> span_begin_us{}, span_end_us{};  // traced iteration: first..last segment
  bool timing = true;                        // false for the untimed inverse check

  Dims q_dims() const { return {s.B, s.S, s.P, s.H, s.D}; }
  Dims kv_dims() const { return {s.B, s.S, s.P, s.H_kv, s.D}; }
  Dims rep_dims() const { return {s.B, s.S, s.P, s.P, s.D}; }  // kv replica: P heads
  bool kv_fewer_than_ranks() const { return s.H_kv < s.P; }
};

bool kv_fewer_than_ranks_replicate(const RankCtx& c) {
  return c.kv_fewer_than_ranks() && c.s.kv_strategy == KvStrategy::replicate;
}

// One timed segment of a phase: all ranks enter together, then fn() runs on the clock.
// Two barriers: the first may put early ranks to sleep (waking them costs up to a scheduler
// slice on a busy host); the second finds every rank awake, so the clocks start together.
template <class F>
void timed(RankCtx& c, core::BlockPhase p, const std::string& what, F&& fn) {
  c.ex.barrier();
  c.ex.barrier();
  const auto t0 = Clock::now();
  fn();
  const auto t1 = Clock::now();
  if (!c.timing) return;
  c.phase_s[static_cast<int>(p)] += seconds_between(t0, t1);
  if (!c.trace) return;
  const double b_us = seconds_between(c.origin, t0) * 1e6, e_us = seconds_between(c.origin, t1) * 1e6;
  c.trace->push_back({what, c.r, fmt::format("rank {}", c.r), b_us, e_us - b_us});
  const int i = static_cast<int>(p);
  if (c.span_end_us[i] == 0) c.span_begin_us[i] = b_us;
  c.span_end_us[i] = e_us;
}

// The phase-level events of the traced iteration; the segments nest inside them.
void add_phase_spans(RankCtx& c) {
  for (int p = 0; p < kPhases; ++p)
    if (c.span_end_us[p] > 0)
      c.trace->push_back({std::string(core::kBlockPhaseNames[p]), c.r, fmt::format("rank {}", c.r), c.span_begin_us[p],
                          c.span_end_us[p] - c.span_begin_us[p]});
}

// With B = 1 one side of each exchange is the identity (core/layout.hpp): seq->head receives
// straight into x_head, head->seq sends straight from x_head; no buffer, no copy.
Buffer<bf16> seq_to_head(RankCtx& c, core::BlockPhase p, const std::string& what, const Dims& x, const bf16* x_seq) {
  const std::int64_t chunk = chunk_elems(x);
  const bool direct = x.B == 1;
  Buffer<bf16> send(&c.mem, x.P * chunk), recv(&c.mem, direct ? 0 : x.P * chunk);
  Buffer<bf16> x_head(&c.mem, x.B * x.S * heads_per_rank(x.H, x.P) * x.D);  // [B,S,H_l,D]
  timed(c, p, what, [&] {
    pack_seq_to_head(x, x_seq, send.data());
    c.ex.alltoall(c.r, send.data(), direct ? x_head.data() : recv.data(), chunk);
    if (!direct) unpack_seq_to_head(x, recv.data(), x_head.data());
  });
  return x_head;
}

Buffer<bf16> head_to_seq(RankCtx& c, core::BlockPhase p, const std::string& what, const Dims& x, const bf16* x_head) {
  const std::int64_t chunk = chunk_elems(x);
  const bool direct = x.B == 1;
  Buffer<bf16> send(&c.mem, direct ? 0 : x.P * chunk), recv(&c.mem, x.P * chunk);
  Buffer<bf16> x_seq(&c.mem, x.B * (x.S / x.P) * x.H * x.D);  // [B,S_l,H,D]
  timed(c, p, what, [&] {
    if (!direct) pack_head_to_seq(x, x_head, send.data());
    c.ex.alltoall(c.r, direct ? x_head : send.data(), recv.data(), chunk);
    unpack_head_to_seq(x, recv.data(), x_seq.data());
  });
  return x_seq;
}

// What k and v look like on the wire: like q with H_kv heads, or, when P > H_kv, one head per
// rank packed from the replica [B,S_l,P,D] (replicate) or straight from k_seq (send_once).
Dims kv_wire_dims(const RankCtx& c) {
  return c.kv_fewer_than_ranks() && c.s.kv_strategy == KvStrategy::replicate ? c.rep_dims() : c.kv_dims();
}

// a2a.qkv.fwd: q, k, v seq -> head in one grouped exchange (one pair of barriers, as the CUDA
// backend's NCCL group); with B = 1 each tensor is received straight into its x_head.
void qkv_seq_to_head(RankCtx& c, const bf16* q_seq, const bf16* k_seq, const bf16* v_seq, Buffer<bf16>& q_head,
                     Buffer<bf16>& k_head, Buffer<bf16>& v_head) {
  const BlockShape& s = c.s;
  const bool direct = s.B == 1, rep = kv_fewer_than_ranks_replicate(c);
  const Dims qx = c.q_dims(), kx = kv_wire_dims(c);
  const std::int64_t cq = chunk_elems(qx), ck = chunk_elems(kx), n_rep = s.B * s.S_l() * s.P * s.D;
  Buffer<bf16> k_rep(&c.mem, rep ? n_rep : 0), v_rep(&c.mem, rep ? n_rep : 0);  // [B,S_l,P,D]
  Buffer<bf16> q_send(&c.mem, s.P * cq), k_send(&c.mem, s.P * ck), v_send(&c.mem, s.P * ck);
  Buffer<bf16> q_recv(&c.mem, direct ? 0 : s.P * cq), k_recv(&c.mem, direct ? 0 : s.P * ck),
      v_recv(&c.mem, direct ? 0 : s.P * ck);
  q_head = Buffer<bf16>(&c.mem, s.B * s.S * heads_per_rank(qx.H, s.P) * s.D);  // [B,S,H_l,D]
  k_head = Buffer<bf16>(&c.mem, s.B * s.S * heads_per_rank(kx.H, s.P) * s.D);  // [B,S,H_kv_l,D]
  v_head = Buffer<bf16>(&c.mem, k_head.size());
  timed(c, core::BlockPhase::a2a_qkv_fwd, "q,k,v seq->head", [&] {
    if (rep) replicate_heads(c.kv_dims(), k_seq, k_rep.data()), replicate_heads(c.kv_dims(), v_seq, v_rep.data());
    pack_seq_to_head(qx, q_seq, q_send.data());
    pack_seq_to_head(kx, rep ? k_rep.data() : k_seq, k_send.data());
    pack_seq_to_head(kx, rep ? v_rep.data() : v_seq, v_send.data());
    c.ex.alltoall_group(c.r, {{q_send.data(), direct ? q_head.data() : q_recv.data(), cq},
                              {k_send.data(), direct ? k_head.data() : k_recv.data(), ck},
                              {v_send.data(), direct ? v_head.data() : v_recv.data(), ck}});
    if (!direct) {
      unpack_seq_to_head(qx, q_recv.data(), q_head.data());
      unpack_seq_to_head(kx, k_recv.data(), k_head.data());
      unpack_seq_to_head(kx, v_recv.data(), v_head.data());
    }
  });
}

// The seq-layout kv gradient from what arrived: H_kv >= P a plain unpack; P > H_kv the R replica
// gradients of each kv head summed (fp32, ascending peer) and rounded once, for both strategies.
void unpack_kv_grad(const RankCtx& c, const bf16* recv, bf16* dx_rep, float* acc, bf16* dx_seq) {
  const Dims kv = c.kv_dims();
  if (!c.kv_fewer_than_ranks()) return unpack_head_to_seq(kv, recv, dx_seq);
  if (c.s.kv_strategy == KvStrategy::send_once) {
    unpack_head_to_seq_sum(kv, recv, acc);
  } else {
    unpack_head_to_seq(c.rep_dims(), recv, dx_rep);
    reduce_replicas(kv, dx_rep, acc);
  }
  round_to_bf16(acc, dx_seq, kv.B * (kv.S / kv.P) * kv.H * kv.D);
}

// a2a.qkv.bwd: dq, dk, dv head -> seq in one grouped exchange; with B = 1 each is sent straight
// from its x_head.
void dqkv_head_to_seq(RankCtx& c, const bf16* dq_head, const bf16* dk_head, const bf16* dv_head, Buffer<bf16>& dq_seq,
                      Buffer<bf16>& dk_seq, Buffer<bf16>& dv_seq) {
  const BlockShape& s = c.s;
  const bool direct = s.B == 1, rep = kv_fewer_than_ranks_replicate(c), summed = c.kv_fewer_than_ranks();
  const Dims qx = c.q_dims(), kx = kv_wire_dims(c);
  const std::int64_t cq = chunk_elems(qx), ck = chunk_elems(kx), n_kv = s.B * s.S_l() * s.H_kv * s.D;
  Buffer<bf16> q_send(&c.mem, direct ? 0 : s.P * cq), k_send(&c.mem, direct ? 0 : s.P * ck),
      v_send(&c.mem, direct ? 0 : s.P * ck);
  Buffer<bf16> q_recv(&c.mem, s.P * cq), k_recv(&c.mem, s.P * ck), v_recv(&c.mem, s.P * ck);
  const std::int64_t n_rep = rep ? s.B * s.S_l() * s.P * s.D : 0;
  Buffer<bf16> dk_rep(&c.mem, n_rep), dv_rep(&c.mem, n_rep);  // [B,S_l,P,D], replicate only
  Buffer<float> k_acc(nullptr, summed ? n_kv : 0), v_acc(nullptr, summed ? n_kv : 0);  // a fused kernel's registers
  dq_seq = Buffer<bf16>(&c.mem, s.B * s.S_l() * s.H * s.D);
  dk_seq = Buffer<bf16>(&c.mem, n_kv);
  dv_seq = Buffer<bf16>(&c.mem, n_kv);
  timed(c, core::BlockPhase::a2a_qkv_bwd, "dq,dk,dv head->seq", [&] {
    if (!direct) {
      pack_head_to_seq(qx, dq_head, q_send.data());
      pack_head_to_seq(kx, dk_head, k_send.data());
      pack_head_to_seq(kx, dv_head, v_send.data());
    }
    c.ex.alltoall_group(c.r, {{direct ? dq_head : q_send.data(), q_recv.data(), cq},
                              {direct ? dk_head : k_send.data(), k_recv.data(), ck},
                              {direct ? dv_head : v_send.data(), v_recv.data(), ck}});
    unpack_head_to_seq(qx, q_recv.data(), dq_seq.data());
    unpack_kv_grad(c, k_recv.data(), dk_rep.data(), k_acc.data(), dk_seq.data());
    unpack_kv_grad(c, v_recv.data(), dv_rep.data(), v_acc.data(), dv_seq.data());
  });
}

AttnDims local_attn(const BlockShape& s) {
  return {s.B, s.S, heads_per_rank(s.H, s.P), heads_per_rank(s.H_kv, s.P), s.D, s.causal};
}

std::vector<float> widen(const Buffer<bf16>& x) {
  std::vector<float> y(x.size());
  widen_to_float(x.data(), y.data(), x.size());
  return y;
}

std::vector<bf16> keep(const Buffer<bf16>& x) { return {x.data(), x.data() + x.size()}; }

// Rank r's sequence shard of a global [B,S,Hx,D] tensor: shard[b][s_l] = global[b][r*S_l + s_l].
Buffer<bf16> shard_of(RankCtx& c, const std::vector<bf16>& global, std::int64_t Hx) {
  const BlockShape& s = c.s;
  const std::int64_t S_l = s.S_l(), row = Hx * s.D;
  Buffer<bf16> x(&c.mem, s.B * S_l * row);
  for (std::int64_t b = 0; b < s.B; ++b)
    std::copy_n(global.data() + (b * s.S + c.r * S_l) * row, S_l * row, x.data() + b * S_l * row);
  return x;
}

// One forward + backward of the block on rank c.r. keep_out: the validating iteration.
void iteration(RankCtx& c, const BlockInputs& in, RankResult* keep_out) {
  const BlockShape& s = c.s;
  const AttnDims a = local_attn(s);
  const Dims qx = c.q_dims();
  Buffer<bf16> q_seq = shard_of(c, in.q, s.H), k_seq = shard_of(c, in.k, s.H_kv), v_seq = shard_of(c, in.v, s.H_kv);

  c.begin_phase();
  Buffer<bf16> q_head, k_head, v_head;
  qkv_seq_to_head(c, q_seq.data(), k_seq.data(), v_seq.data(), q_head, k_head, v_head);
  c.end_phase(core::BlockPhase::a2a_qkv_fwd);

  c.begin_phase();

  Buffer<bf16> o_head(&c.mem, a.B * a.S * a.H * a.D);  // [B,S,H_l,D]
  Buffer<float> lse(&c.mem, a.B * a.H * a.S);          // [B,H_l,S]
  timed(c, core::BlockPhase::attn_fwd, fmt::format("attention fwd ({} heads)", a.H), [&] {
    const std::vector<float> q = widen(q_head), k = widen(k_head), v = widen(v_head);
    std::vector<float> o(o_head.size());
    attention_forward<float>(a, q.data(), k.data(), v.data(), o.data(), lse.data());
    round_to_bf16(o.data(), o_head.data(), o_head.size());
  });
  c.end_phase(core::BlockPhase::attn_fwd);
  c.begin_phase();
  Buffer<bf16> o_seq = head_to_seq(c, core::BlockPhase::a2a_out_fwd, "o head->seq", qx, o_head.data());

  c.end_phase(core::BlockPhase::a2a_out_fwd);

  Buffer<bf16> dout_seq = shard_of(c, in.dout, s.H);  // the incoming gradient, owned by the caller
  c.begin_phase();
  Buffer<bf16> dout_head = seq_to_head(c, core::BlockPhase::a2a_out_bwd, "dout seq->head", qx, dout_seq.data());
  c.end_phase(core::BlockPhase::a2a_out_bwd);
  c.begin_phase();
  Buffer<bf16> dq_head(&c.mem, q_head.size()), dk_head(&c.mem, k_head.size()), dv_head(&c.mem, v_head.size());
  timed(c, core::BlockPhase::attn_bwd, fmt::format("attention bwd ({} heads)", a.H), [&] {
    const std::vector<float> q = widen(q_head), k = widen(k_head), v = widen(v_head), o = widen(o_head),
                             dout = widen(dout_head);
    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
    attention_backward<float>(a, q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), dq.data(),
                              dk.data(), dv.data());
    round_to_bf16(dq.data(), dq_head.data(), dq.size());
    round_to_bf16(dk.data(), dk_head.data(), dk.size());
    round_to_bf16(dv.data(), dv_head.data(), dv.size());
  });
  c.end_phase(core::BlockPhase::attn_bwd);
  if (keep_out) {
    keep_out->q_head = keep(q_head), keep_out->k_head = keep(k_head), keep_out->v_head = keep(v_head);
    keep_out->o_head = keep(o_head), keep_out->o_seq = keep(o_seq), keep_out->dout_head = keep(dout_head);
    keep_out->dq_head = keep(dq_head), keep_out->dk_head = keep(dk_head), keep_out->dv_head = keep(dv_head);
  }
  // saved activations die with the backward
  q_head.release(), k_head.release(), v_head.release(), o_head.release(), lse.release(), dout_head.release();

  c.begin_phase();
  Buffer<bf16> dq_seq, dk_seq, dv_seq;
  dqkv_head_to_seq(c, dq_head.data(), dk_head.data(), dv_head.data(), dq_seq, dk_seq, dv_seq);
  dq_head.release(), dk_head.release(), dv_head.release();
  c.end_phase(core::BlockPhase::a2a_qkv_bwd);

  if (keep_out) {
    keep_out->dq_seq = keep(dq_seq), keep_out->dk_seq = keep(dk_seq), keep_out->dv_seq = keep(dv_seq);
    c.timing = false;  // the inverse identity, off the clock: head_to_seq(seq_to_head(q_seq)) == q_seq
    Buffer<bf16> back = head_to_seq(c, core::BlockPhase::a2a_out_fwd, "", qx, keep_out->q_head.data());
    keep_out->q_roundtrip = keep(back);
    c.timing = true;
  }
}

}  // namespace

BlockInputs make_inputs(const BlockShape& s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  auto fill = [&](std::int64_t heads) {
    std::vector<bf16> x(s.B * s.S * heads * s.D);
    for (auto& e : x) e = float_to_bf16(n01(gen));
    return x;
  };
  BlockInputs in;
  in.q = fill(s.H), in.k = fill(s.H_kv), in.v = fill(s.H_kv), in.dout = fill(s.H);
  return in;
}

std::string host_cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown cpu";
}

std::int64_t memory_estimate_bytes(const BlockShape& s) {
  ulysses::Dims d;  // the scenario's dimensions (sim/memory.hpp), not core::Dims
  d.B = s.B, d.S = s.S, d.S_l = s.S / s.P, d.P = s.P, d.H = s.H, d.H_kv = s.H_kv, d.D = s.D;
  d.kv_wire = std::max(s.H_kv, s.P);
  d.kv_replica = s.P > s.H_kv && s.kv_strategy == KvStrategy::replicate;
  const double ranks = static_cast<double>(s.P) * static_cast<double>(block_peak_bytes_freeing(d));
  const double full = static_cast<double>(s.H + s.H_kv) * s.B * s.S * s.D * (2 + 2 + 4 * 8);
  return static_cast<std::int64_t>(std::min(ranks + full, 9e18));
}

std::int64_t available_ram_bytes() {
  if (const char* g = std::getenv("ULYSSES_AVAILABLE_RAM_GiB"); g && *g) {
    char* end = nullptr;
    const double v = std::strtod(g, &end);
    if (end && *end == '\0' && v >= 0 && v < 1e9) return static_cast<std::int64_t>(v * double(1LL << 30));
  }
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::int64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return -1;
}

Measurement CpuBackend::run_block(const BlockShape& shape, const RunOptions& opt) {
  if (const std::string why = validate(shape); !why.empty()) throw std::invalid_argument(why);
  if (opt.iters < 1 || opt.warmup < 0) throw std::invalid_argument("iters must be >= 1 and warmup >= 0");
  const int P = static_cast<int>(shape.P);
  const BlockInputs in = make_inputs(shape, opt.seed);
  SharedExchange ex(P);
  const auto origin = Clock::now();
  const int n_iter = (opt.verify ? 1 : 0) + opt.warmup + opt.iters, first_timed = n_iter - opt.iters;

  std::vector<std::vector<std::array<double, kPhases>>> times(P);  // [rank][timed iter][phase]
  std::vector<std::int64_t> peak(P, 0);
  std::vector<std::array<std::int64_t, kPhases>> phase_peak(P);
  std::vector<std::vector<TraceEvent>> trace(P);
  std::vector<RankResult> kept(P);
  std::vector<std::exception_ptr> errors(P);
  auto rank_main = [&](int r) {
    try {
      for (int it = 0; it < n_iter; ++it) {
        RankCtx c{shape, r, ex, origin};
        if (it == n_iter - 1) c.trace = &trace[r];
        iteration(c, in, opt.verify && it == 0 ? &kept[r] : nullptr);
        if (c.trace) add_phase_spans(c);
        if (it >= first_timed) {
          times[r].push_back(c.phase_s);
          peak[r] = std::max(peak[r], c.mem.peak_bytes);
          for (int p = 0; p < kPhases; ++p) phase_peak[r][p] = std::max(phase_peak[r][p], c.phase_peak[p]);
        }
      }
    } catch (const PeerFailed&) {
      // another rank's failure is reported by that rank
    } catch (...) {
      errors[r] = std::current_exception();  // e.g. allocation failure
      ex.abort();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  Measurement m;
  m.backend = "cpu";
  m.device = fmt::format("{} ({} threads as ranks, {} hardware threads)", host_cpu_model(), P,
                         std::thread::hardware_concurrency());
  m.shape = shape;
  for (int p = 0; p < kPhases; ++p) {
    PhaseStats st{std::string(core::kBlockPhaseNames[p]), 0, 1e300, 0};
    for (int r = 0; r < P; ++r) {
      std::vector<double> v;
      for (auto& t : times[r]) v.push_back(t[p]);
      st.median_s = std::max(st.median_s, core::median(v));
      st.min_s = std::min(st.min_s, *std::min_element(v.begin(), v.end()));
      st.max_s = std::max(st.max_s, *std::max_element(v.begin(), v.end()));
    }
    m.phases.push_back(st);
  }
  m.peak_bytes_per_rank = peak;
  m.phase_peak_bytes.assign(kPhases, 0);
  for (int r = 0; r < P; ++r)
    for (int p = 0; p < kPhases; ++p) m.phase_peak_bytes[p] = std::max(m.phase_peak_bytes[p], phase_peak[r][p]);
  const std::int64_t q_chunk = chunk_elems({shape.B, shape.S, shape.P, shape.H, shape.D});
  const std::int64_t kv_chunk = chunk_elems({shape.B, shape.S, shape.P, shape.H_kv, shape.D});
  m.a2a_q_bytes_per_rank = shape.P * q_chunk * kBf16Bytes;
  m.a2a_kv_bytes_per_rank = 2 * shape.P * kv_chunk * kBf16Bytes;  // k and v; same for both kv strategies
  if (opt.verify) m.checks = verify_block(shape, in, kept);
  m.correct = opt.verify && !m.checks.empty() &&
              std::all_of(m.checks.begin(), m.checks.end(), [](const Check& c) { return c.passed; });
  // trace: segments of the last iteration, times relative to its first event
  double t0 = 1e300;
  for (auto& tr : trace)
    for (auto& e : tr) t0 = std::min(t0, e.start_us);
  for (auto& tr : trace)
    for (auto& e : tr) {
      e.start_us -= t0;
      m.trace.push_back(e);
    }
  return m;
}

StepMeasurement CpuBackend::run_step(const Scenario& sc, const StepRunOptions& opt, const std::string& origin) {
  return run_cpu_step(sc, opt, origin);
}

}  // namespace ulysses::runtime::cpu
