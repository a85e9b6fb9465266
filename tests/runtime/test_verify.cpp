// The block checks both backends share (runtime/verify.hpp): exact rank results pass every
// check, and a flipped bit or a wrong gradient fails the check that names that tensor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/bf16.hpp"
#include "runtime/reference_attention.hpp"
#include "runtime/verify.hpp"

using namespace ulysses;
using namespace ulysses::runtime;

namespace {

std::vector<float> widen(const std::vector<core::bf16>& x) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = core::bf16_to_float(x[i]);
  return y;
}
std::vector<core::bf16> round(const std::vector<float>& x) {
  std::vector<core::bf16> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = core::float_to_bf16(x[i]);
  return y;
}

// P = 1: both layouts are the global tensor, so the one rank's exchange results are the inputs,
// and its attention results are fp32 attention rounded to bf16 (as the CPU backend computes them).
RankResult one_rank(const BlockShape& s, const BlockInputs& in) {
  RankResult r;
  r.q_head = r.q_roundtrip = in.q, r.k_head = in.k, r.v_head = in.v, r.dout_head = in.dout;
  const AttnDims a{s.B, s.S, s.H, s.H_kv, s.D, s.causal};
  const auto q = widen(in.q), k = widen(in.k), v = widen(in.v), dout = widen(in.dout);
  std::vector<float> o(q.size()), lse(s.B * s.H * s.S), dq(q.size()), dk(k.size()), dv(v.size());
  attention_forward<float>(a, q.data(), k.data(), v.data(), o.data(), lse.data());
  r.o_head = r.o_seq = round(o);
  const auto o_bf16 = widen(r.o_head);
  attention_backward<float>(a, q.data(), k.data(), v.data(), o_bf16.data(), lse.data(), dout.data(), dq.data(), dk.data(),
                            dv.data());
  r.dq_head = r.dq_seq = round(dq), r.dk_head = r.dk_seq = round(dk), r.dv_head = r.dv_seq = round(dv);
  return r;
}

std::vector<std::string> failed(const std::vector<Check>& checks) {
  std::vector<std::string> names;
  for (const Check& c : checks)
    if (!c.passed) names.push_back(c.name);
  return names;
}

}  // namespace

TEST_CASE("verify_block: exact rank results pass, a wrong tensor fails its own check", "[runtime][verify]") {
  BlockShape s;
  s.B = 2, s.S = 12, s.H = 4, s.H_kv = 2, s.D = 8, s.P = 1, s.causal = true;
  BlockInputs in;
  in.q = random_bf16(s.B * s.S * s.H * s.D, 1), in.k = random_bf16(s.B * s.S * s.H_kv * s.D, 2);
  in.v = random_bf16(s.B * s.S * s.H_kv * s.D, 3), in.dout = random_bf16(s.B * s.S * s.H * s.D, 4);
  const RankResult good = one_rank(s, in);

  const std::vector<Check> ok = verify_block(s, in, {good});
  CHECK(ok.size() == 13);
  CHECK(failed(ok).empty());

  RankResult bad = good;
  bad.k_head[5] ^= 1;  // one bit of one element
  auto checks = verify_block(s, in, {bad});
  REQUIRE(failed(checks) == std::vector<std::string>{"a2a.qkv.fwd k bit-exact"});
  CHECK(std::find_if(checks.begin(), checks.end(), [](const Check& c) { return !c.passed; })->wrong == 1);

  bad = good;
  bad.dv_seq[7] = core::float_to_bf16(core::bf16_to_float(bad.dv_seq[7]) + 1.0f);  // a gradient off by 1,
  bad.dv_head[7] = bad.dv_seq[7];  // moved faithfully (P = 1: the same index in both layouts)
  checks = verify_block(s, in, {bad});
  CHECK(failed(checks) == std::vector<std::string>{"dv vs single-rank fp64"});

  bad = good;
  bad.dq_head[0] ^= 0x40;  // the head-layout gradient no longer matches what arrived in seq layout
  CHECK(failed(verify_block(s, in, {bad})) == std::vector<std::string>{"a2a.qkv.bwd dq bit-exact"});
}
