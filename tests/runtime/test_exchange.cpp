// The CPU exchange: seq->head equals a gather written out by hand (not through layout.hpp),
// and head->seq after seq->head is the identity, for P in {1, 2, 4} threads.
#include <catch2/catch.hpp>

#include <random>
#include <thread>
#include <vector>

#include "runtime/cpu/exchange.hpp"

using namespace ulysses::runtime::cpu;

namespace {

std::vector<bf16> random_bits(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<bf16> x(n);
  for (auto& e : x) e = static_cast<bf16>(g() & 0x7F7F);  // finite, varied bit patterns
  return x;
}

// Runs fn(rank) on P threads.
template <class F>
void on_ranks(int P, F fn) {
  std::vector<std::thread> t;
  for (int r = 0; r < P; ++r) t.emplace_back(fn, r);
  for (auto& x : t) x.join();
}

}  // namespace

TEST_CASE("seq->head exchange matches a hand-written gather, head->seq inverts it", "[runtime]") {
  for (int P : {1, 2, 4})
    for (std::int64_t H : {4, 8})
      for (std::int64_t B : {1, 2}) {
        const std::int64_t S = 16, D = 8, S_l = S / P, H_l = H / P;
        const Dims x{B, S, P, H, D};
        const std::vector<bf16> global = random_bits(B * S * H * D, 7 + P + H);  // [B,S,H,D]
        SharedExchange ex(P);
        std::vector<std::int64_t> wrong(P, 0), wrong_back(P, 0);
        on_ranks(P, [&](int r) {
          std::vector<bf16> x_seq(B * S_l * H * D);
          for (std::int64_t b = 0; b < B; ++b)
            for (std::int64_t i = 0; i < S_l * H * D; ++i) x_seq[b * S_l * H * D + i] = global[(b * S + r * S_l) * H * D + i];
          const std::int64_t chunk = B * S_l * H_l * D;
          std::vector<bf16> send(P * chunk), recv(P * chunk), x_head(B * S * H_l * D, kBf16NaN);
          pack_seq_to_head(x, x_seq.data(), send.data());
          ex.alltoall(r, send.data(), recv.data(), chunk);
          unpack_seq_to_head(x, recv.data(), x_head.data());
          for (std::int64_t b = 0; b < B; ++b)
            for (std::int64_t s = 0; s < S; ++s)
              for (std::int64_t h_l = 0; h_l < H_l; ++h_l)
                for (std::int64_t d = 0; d < D; ++d)
                  wrong[r] += x_head[((b * S + s) * H_l + h_l) * D + d] != global[((b * S + s) * H + r * H_l + h_l) * D + d];
          std::vector<bf16> back(x_seq.size(), kBf16NaN);
          pack_head_to_seq(x, x_head.data(), send.data());
          ex.alltoall(r, send.data(), recv.data(), chunk);
          unpack_head_to_seq(x, recv.data(), back.data());
          for (std::size_t i = 0; i < back.size(); ++i) wrong_back[r] += back[i] != x_seq[i];
        });
        for (int r = 0; r < P; ++r) {
          INFO("P=" << P << " H=" << H << " B=" << B << " rank " << r);
          CHECK(wrong[r] == 0);
          CHECK(wrong_back[r] == 0);
        }
      }
}

TEST_CASE("kv heads fewer than ranks: replicate and send_once deliver head r/R and sum gradients alike", "[runtime]") {
  const int P = 4;
  const std::int64_t H = 2, R = P / H, B = 1, S = 8, D = 4, S_l = S / P;
  const Dims kv{B, S, P, H, D}, rep{B, S, P, P, D};
  const std::vector<bf16> global = random_bits(B * S * H * D, 99);
  SharedExchange ex(P);
  std::vector<std::int64_t> wrong(P, 0), grad_mismatch(P, 0);
  on_ranks(P, [&](int r) {
    std::vector<bf16> x_seq(global.begin() + r * S_l * H * D, global.begin() + (r + 1) * S_l * H * D);
    const std::int64_t chunk = B * S_l * D;  // one head per rank
    std::vector<bf16> send(P * chunk), recv(P * chunk), head_once(B * S * D), head_rep(B * S * D), x_rep(B * S_l * P * D);
    pack_seq_to_head(kv, x_seq.data(), send.data());  // send_once
    ex.alltoall(r, send.data(), recv.data(), chunk);
    unpack_seq_to_head(kv, recv.data(), head_once.data());
    replicate_heads(kv, x_seq.data(), x_rep.data());  // ALST replication
    pack_seq_to_head(rep, x_rep.data(), send.data());
    ex.alltoall(r, send.data(), recv.data(), chunk);
    unpack_seq_to_head(rep, recv.data(), head_rep.data());
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t d = 0; d < D; ++d) {
        const bf16 want = global[(s * H + r / R) * D + d];
        wrong[r] += (head_once[s * D + d] != want) + (head_rep[s * D + d] != want);
      }
    // backward: send the received head back as a "gradient"; both strategies sum R copies
    std::vector<float> acc_once(B * S_l * H * D), acc_rep(B * S_l * H * D);
    std::vector<bf16> grad_rep(B * S_l * P * D);
    pack_head_to_seq(kv, head_once.data(), send.data());
    ex.alltoall(r, send.data(), recv.data(), chunk);
    unpack_head_to_seq_sum(kv, recv.data(), acc_once.data());
    pack_head_to_seq(rep, head_rep.data(), send.data());
    ex.alltoall(r, send.data(), recv.data(), chunk);
    unpack_head_to_seq(rep, recv.data(), grad_rep.data());
    reduce_replicas(kv, grad_rep.data(), acc_rep.data());
    for (std::size_t i = 0; i < acc_once.size(); ++i) {
      const float want = R * bf16_to_float(x_seq[i]);  // R replicas of the same value
      grad_mismatch[r] += (acc_once[i] != want) + (acc_rep[i] != want);
    }
  });
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r);
    CHECK(wrong[r] == 0);
    CHECK(grad_mismatch[r] == 0);
  }
}

TEST_CASE("bf16 rounding is round-to-nearest-even and keeps NaN", "[runtime]") {
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)) == 1.0f);               // tie -> even (down)
  CHECK(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)) == 1.0f + 4.0f / 256);  // tie -> even (up)
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST_CASE("a failed rank releases its peers from the barrier with an error, not a hang", "[runtime]") {
  SharedExchange ex(3);
  std::vector<int> threw(3, 0);
  on_ranks(3, [&](int r) {
    try {
      ex.barrier();            // all three meet once
      if (r == 2) ex.abort();  // rank 2 "fails" instead of entering the second barrier
      else ex.barrier();
    } catch (const PeerFailed&) {
      threw[r] = 1;
    }
  });
  CHECK(threw[0] == 1);
  CHECK(threw[1] == 1);
}
