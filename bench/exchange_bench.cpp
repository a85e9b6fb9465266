// `ulysses bench exchange`: the q, k, v exchange (a2a.qkv.fwd: pack + one NCCL group + unpack,
// per slice count; the p2p transport where it runs) next to a bare ncclAlltoAll and a bare
// grouped ncclSend/ncclRecv of the same bytes per rank, each validated bit-exact first.
#include <stdexcept>

#include <fmt/format.h>

#include "bench/bench_common.hpp"
#include "kernels/testdata.cuh"
#include "runtime/cuda/tracing.hpp"

namespace ulysses::bench {
namespace {

using namespace ulysses::runtime;
using namespace ulysses::runtime::cuda;

std::string exchange_rank(RankCtx& ctx, const BlockShape& s, const RunOptions& opt, const std::vector<int>& slices) {
  DeviceArena arena(ctx.device);
  BlockRunner run(ctx, arena, s, {kernels::AttnKernel::reference, false}, 1);
  run.fill_inputs(opt.seed);
  const core::Dims qx{s.B, s.S, s.P, s.H, s.D}, kvx{s.B, s.S, s.P, s.H_kv, s.D};
  const core::Dims kv_travel = s.H_kv < s.P && s.kv_strategy == KvStrategy::replicate ? core::Dims{s.B, s.S, s.P, s.P, s.D} : kvx;
  const std::int64_t elems = s.P * (core::chunk_elems(qx) + 2 * core::chunk_elems(kv_travel));
  unsigned long long* w = run.counter();
  RankRows out;
  Exchanger& ex = run.exchanger();
  if (ex.transport() == "p2p") {
    run.poison_outputs();
    run.barrier();
    run.phase(0);
    const auto checks = run.device_checks(opt.seed, false);
    out.rows.push_back({"ulysses q,k,v p2p (fused pack + direct stores, one kernel)", elems * 2, 0, 0, 0,
                        checks[0].wrong + checks[1].wrong + checks[2].wrong, ""});
    out.times.push_back(time_it(ctx, run, opt, [&] { run.phase(0); }));
  }
  ex.force_nccl(true);  // the NCCL path next to it
  for (int k : slices) {
    run.set_slices(k);
    run.poison_outputs();
    run.barrier();
    run.phase(0);
    const auto checks = run.device_checks(opt.seed, false);  // q, k, v bit-exact are the first three
    std::int64_t wrong = checks[0].wrong + checks[1].wrong + checks[2].wrong;
    out.rows.push_back({fmt::format("ulysses q,k,v nccl (pack+group+unpack, slices={})", k), elems * 2, 0, 0, 0, wrong, ""});
    out.times.push_back(time_it(ctx, run, opt, [&] { run.phase(0); }));
  }
  ex.force_nccl(false);
  if (ctx.world > 1) {
    void* send = run.exchanger().send_buffer();
    void* recv = run.exchanger().recv_buffer();
    const std::int64_t count = elems / s.P;
    auto validate = [&](auto&& call) {
      CUDA_CHECK(kernels::fill_a2a_send_bf16(send, elems, ctx.rank, opt.seed, ctx.stream));
      CUDA_CHECK(cudaMemsetAsync(recv, 0xFF, static_cast<std::size_t>(elems * 2), ctx.stream));
      CUDA_CHECK(cudaMemsetAsync(w, 0, sizeof *w, ctx.stream));
      run.barrier();
      on_comm(ctx, call);
      CUDA_CHECK(kernels::count_wrong_a2a_bf16(recv, count, ctx.world, ctx.rank, opt.seed, w, ctx.stream));
      return read_counter(ctx, w);
    };
    auto a2a = [&] { run.exchanger().bare_alltoall(elems); };
    const std::int64_t w1 = validate(a2a);
    out.rows.push_back({"nccl ncclAlltoAll (bare, same bytes)", elems * 2, 0, 0, 0, w1, ""});
    out.times.push_back(time_it(ctx, run, opt, [&] { on_comm(ctx, a2a); }));
    auto grp = [&] { run.exchanger().bare_sendrecv(elems); };
    const std::int64_t w2 = validate(grp);
    out.rows.push_back({"nccl grouped send/recv (bare, same bytes)", elems * 2, 0, 0, 0, w2, ""});
    out.times.push_back(time_it(ctx, run, opt, [&] { on_comm(ctx, grp); }));
  }
  return pack_rows(out);
}

}  // namespace

BenchResult bench_exchange(const BlockShape& s, const RunOptions& opt, const std::vector<int>& slices) {
  if (const std::string why = runtime::validate(s); !why.empty()) throw std::invalid_argument(why);
  runtime::cuda::prepare_nvtx_injection();
  auto cl = runtime::cuda::Cluster::acquire(static_cast<int>(s.P), opt.timeout_s);
  return aggregate(*cl, cl->run([&](runtime::cuda::RankCtx& ctx) { return exchange_rank(ctx, s, opt, slices); }));
}

}  // namespace ulysses::bench
