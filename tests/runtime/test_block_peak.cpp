// The model's block peak for a backend that frees each buffer after its last use
// (sim/block_memory.cpp) equals the CPU backend's exactly tracked high-water mark, byte for byte,
// across batch 1 (identity exchange sides) and 2, MHA/GQA, and both kv strategies with P > H_kv.
#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>

#include "runtime/backend.hpp"
#include "sim/block_memory.hpp"

using namespace ulysses;

TEST_CASE("freeing block peak equals the cpu backend's measured peak", "[runtime][memory]") {
  for (auto [B, S, H, H_kv, D, P, strat] :
       {std::tuple<int, int, int, int, int, int, KvStrategy>{1, 256, 8, 2, 64, 2, KvStrategy::replicate},
        {2, 128, 4, 4, 32, 2, KvStrategy::replicate},
        {1, 128, 8, 1, 32, 4, KvStrategy::replicate},
        {2, 128, 8, 1, 32, 4, KvStrategy::replicate},
        {2, 128, 8, 2, 16, 4, KvStrategy::send_once},
        {1, 96, 6, 6, 16, 1, KvStrategy::replicate}}) {
    runtime::BlockShape s;
    s.B = B, s.S = S, s.H = H, s.H_kv = H_kv, s.D = D, s.P = P, s.causal = true, s.kv_strategy = strat;
    runtime::RunOptions o;
    o.warmup = 0, o.iters = 1;
    const runtime::Measurement m = runtime::make_backend("cpu")->run_block(s, o);
    REQUIRE(m.correct);
    Dims d;
    d.B = B, d.S = S, d.S_l = S / P, d.P = P, d.H = H, d.H_kv = H_kv, d.D = D;
    d.kv_wire = std::max(H_kv, P);
    d.kv_replica = P > H_kv && strat == KvStrategy::replicate;
    INFO("B=" << B << " S=" << S << " H=" << H << " H_kv=" << H_kv << " D=" << D << " P=" << P);
    const auto measured = *std::max_element(m.peak_bytes_per_rank.begin(), m.peak_bytes_per_rank.end());
    CHECK(block_peak_bytes_freeing(d) == measured);
  }
}
