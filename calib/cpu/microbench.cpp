// CPU microbenchmarks (calib/cpu/microbench.hpp): threads as ranks, timed after a common barrier.
#include "calib/cpu/microbench.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "runtime/cpu/exchange.hpp"
#include "runtime/cpu/tracked.hpp"
#include "core/stats.hpp"

namespace ulysses::calib::cpu {

using namespace runtime;  // the CPU backend's exchange, pack and attention
using namespace runtime::cpu;

namespace {

using Clock = std::chrono::steady_clock;

// Runs prepare(rank) (untimed) then body(rank) on `threads` threads; returns per iteration the
// max over threads of the time body took (after a common barrier), then the median over iterations.
template <class Prepare, class Body>
double timed_on_threads(int threads, int iters, Prepare prepare, Body body) {
  SharedExchange ex(threads);
  std::vector<std::vector<double>> t(threads, std::vector<double>(iters));
  std::vector<std::thread> pool;
  for (int r = 0; r < threads; ++r)
    pool.emplace_back([&, r] {
      for (int i = 0; i < iters; ++i) {
        prepare(r);
        ex.barrier();  // twice, as in run_block: the second finds every thread awake
        ex.barrier();
        const auto t0 = Clock::now();
        body(r, ex);
        t[r][i] = std::chrono::duration<double>(Clock::now() - t0).count();
      }
    });
  for (auto& p : pool) p.join();
  std::vector<double> per_iter(iters, 0);
  for (int i = 0; i < iters; ++i)
    for (int r = 0; r < threads; ++r) per_iter[i] = std::max(per_iter[i], t[r][i]);
  return core::median(per_iter);
}
template <class Body>
double timed_on_threads(int threads, int iters, Body body) {
  return timed_on_threads(threads, iters, [](int) {}, body);
}

std::vector<bf16> random_bf16(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<bf16> x(n);
  for (auto& e : x) e = float_to_bf16(d(g));
  return x;
}

}  // namespace

double alltoall_time_s(int P, std::int64_t bytes_per_rank, int iters) {
  const std::int64_t chunk = std::max<std::int64_t>(1, bytes_per_rank / kBf16Bytes / P);
  std::vector<std::vector<bf16>> send(P, std::vector<bf16>(P * chunk, 1)), recv(P, std::vector<bf16>(P * chunk));
  // As in run_block, the sender has just written its send buffer (a pack), so peers read lines
  // that are dirty in the sender's cache rather than copies left in their own by the last round.
  std::vector<int> round(P, 0);
  auto prepare = [&](int r) { std::fill(send[r].begin(), send[r].end(), static_cast<bf16>(++round[r])); };
  auto body = [&](int r, SharedExchange& ex) { ex.alltoall(r, send[r].data(), recv[r].data(), chunk); };
  timed_on_threads(P, 2, prepare, body);
  return timed_on_threads(P, iters, prepare, body);
}

double exchange_time_s(int P, std::int64_t bytes_per_rank, int iters) {
  const std::int64_t H = 4 * P, D = 64;  // 4 heads per rank after the exchange
  const std::int64_t S_l = std::max<std::int64_t>(1, bytes_per_rank / kBf16Bytes / (H * D));
  const Dims x{1, S_l * P, P, H, D};
  const std::int64_t n = S_l * H * D, chunk = core::chunk_elems(x);
  std::vector<std::vector<bf16>> x_seq(P, std::vector<bf16>(n));
  std::vector<Buffer<bf16>> send(P), x_head(P);
  std::vector<int> round(P, 0);
  auto prepare = [&](int r) {
    std::fill(x_seq[r].begin(), x_seq[r].end(), static_cast<bf16>(++round[r]));
    send[r] = Buffer<bf16>(nullptr, P * chunk);
    x_head[r] = Buffer<bf16>(nullptr, x.S * (H / P) * D);
  };
  auto body = [&](int r, SharedExchange& ex) {
    pack_seq_to_head(x, x_seq[r].data(), send[r].data());
    ex.alltoall(r, send[r].data(), x_head[r].data(), chunk);
  };
  timed_on_threads(P, 2, prepare, body);
  return timed_on_threads(P, iters, prepare, body);
}

double pack_GBps(std::int64_t bytes, int threads, int iters) {
  // [B=1, S_l, H=8, D=64] sequence-sharded over P = 2, as a q shard of the tiny scenario
  const std::int64_t H = 8, D = 64, P = 2;
  const std::int64_t S_l = std::max<std::int64_t>(1, bytes / kBf16Bytes / (H * D));
  const Dims x{1, S_l * P, P, H, D};
  const std::int64_t n = S_l * H * D;
  std::vector<std::vector<bf16>> src(threads), dst(threads);
  for (int r = 0; r < threads; ++r) src[r] = random_bf16(n, r), dst[r].resize(n);
  auto body = [&](int r, SharedExchange&) { pack_seq_to_head(x, src[r].data(), dst[r].data()); };
  timed_on_threads(threads, 2, body);
  const double t = timed_on_threads(threads, iters, body);
  return 2.0 * double(n * kBf16Bytes) / t / 1e9;
}

AttnTimes attention_time_s(const AttnDims& a, int threads, int iters) {
  const std::int64_t nq = a.B * a.S * a.H * a.D, nkv = a.B * a.S * a.H_kv * a.D;
  struct Data {
    std::vector<bf16> q, k, v, dout, o;
    std::vector<float> lse;
  };
  std::vector<Data> d(threads);
  for (int r = 0; r < threads; ++r) {
    d[r] = {random_bf16(nq, 10 * r + 1), random_bf16(nkv, 10 * r + 2), random_bf16(nkv, 10 * r + 3),
            random_bf16(nq, 10 * r + 4), std::vector<bf16>(nq), std::vector<float>(a.B * a.H * a.S)};
  }
  auto widen = [](const std::vector<bf16>& x) {
    std::vector<float> y(x.size());
    widen_to_float(x.data(), y.data(), std::int64_t(x.size()));
    return y;
  };
  auto fwd = [&](int r, SharedExchange&) {
    const auto q = widen(d[r].q), k = widen(d[r].k), v = widen(d[r].v);
    std::vector<float> o(nq);
    attention_forward<float>(a, q.data(), k.data(), v.data(), o.data(), d[r].lse.data());
    round_to_bf16(o.data(), d[r].o.data(), nq);
  };
  auto bwd = [&](int r, SharedExchange&) {
    const auto q = widen(d[r].q), k = widen(d[r].k), v = widen(d[r].v), o = widen(d[r].o), dout = widen(d[r].dout);
    std::vector<float> dq(nq), dk(nkv), dv(nkv);
    attention_backward<float>(a, q.data(), k.data(), v.data(), o.data(), d[r].lse.data(), dout.data(), dq.data(),
                              dk.data(), dv.data());
    std::vector<bf16> out(nq);
    round_to_bf16(dq.data(), out.data(), nq);
  };
  AttnTimes t;
  t.fwd_s = timed_on_threads(threads, iters, fwd);
  t.bwd_s = timed_on_threads(threads, iters, bwd);
  return t;
}

}  // namespace ulysses::calib::cpu
