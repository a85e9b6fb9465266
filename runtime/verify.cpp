// The checks of one validated block run (either backend). Exchange results are compared bit for bit with tensors
// gathered directly through the layout maps from the global inputs (or from the peers' other
// layout), never through the pack/unpack code under test. Attention results are compared with
// an fp64 single-rank oracle over the full sequence within kBf16AttentionTol:
//   |x - ref| <= 2^-6 * (|ref| + rms(ref))
// Why 2^-6: o, dq, dk, dv are stored in bf16 (one rounding, <= 2^-8 relative); dk, dv with
// P > H_kv sum R bf16-rounded replica gradients (another <= 2^-8 of each partial, bounded by
// the rms term). The oracle's backward reads o rounded to bf16, as the backends do (see below).
// fp32 accumulation adds ~1e-6. So the expected worst case is about 2 * 2^-8 = 2^-7; 2^-6
// leaves a 2x margin, while a wrong head, position or mask gives errors of order 1 here.
// With P > H_kv, dk and dv are sums of R = P/H_kv partial gradients, each rounded to bf16 on its
// rank before the exchange; where the partials cancel, that rounding (2^-8 of each |partial|) is
// large against the sum. The oracle therefore also computes the R partials in fp64 (the
// backward restricted to each rank's query heads) and the rule for dk, dv adds sum_c |partial_c|
// to the scale:  |x - ref| <= 2^-6 * (|ref| + rms(ref) + sum_c |partial_c|).
#include "runtime/verify.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "runtime/checks.hpp"
#include "core/layout.hpp"
#include "runtime/reference_attention.hpp"

namespace ulysses::runtime {
namespace {

using core::bf16;
using core::bf16_to_float;
using core::float_to_bf16;
using core::Dims;
using core::global_pos;
using core::head_index;
using core::heads_per_rank;
using core::seq_index;
using core::source_head;

// Expected x_head on rank r, straight from the global [B,S,H,D] tensor:
//   x_head[b][s][h_l][d] = global[b][s][source_head(x, r, h_l)][d]
std::vector<bf16> gather_head(const Dims& x, std::int64_t r, const std::vector<bf16>& global) {
  const Dims g{x.B, x.S, 1, x.H, x.D};  // P = 1: the seq layout is the global tensor
  const std::int64_t H_l = heads_per_rank(x.H, x.P);
  std::vector<bf16> out(x.B * x.S * H_l * x.D);
  for (std::int64_t b = 0; b < x.B; ++b)
    for (std::int64_t s = 0; s < x.S; ++s)
      for (std::int64_t h_l = 0; h_l < H_l; ++h_l)
        for (std::int64_t d = 0; d < x.D; ++d)
          out[head_index(x, b, s, h_l, d)] = global[seq_index(g, b, s, source_head(x, r, h_l), d)];
  return out;
}

// Expected x_seq on rank r from every rank's x_head (H >= P):
//   x_seq[b][s_l][h][d] = x_head_on(h / H_l)[b][global_pos(x, r, s_l)][h % H_l][d]
std::vector<bf16> gather_seq(const Dims& x, std::int64_t r, const std::vector<const std::vector<bf16>*>& heads) {
  const std::int64_t S_l = x.S / x.P, H_l = heads_per_rank(x.H, x.P);
  std::vector<bf16> out(x.B * S_l * x.H * x.D);
  for (std::int64_t b = 0; b < x.B; ++b)
    for (std::int64_t s_l = 0; s_l < S_l; ++s_l)
      for (std::int64_t h = 0; h < x.H; ++h)
        for (std::int64_t d = 0; d < x.D; ++d)
          out[seq_index(x, b, s_l, h, d)] = (*heads[h / H_l])[head_index(x, b, global_pos(x, r, s_l), h % H_l, d)];
  return out;
}

// Expected kv gradient on rank r when H < P: the fp32 sum over the R peers c (ascending) whose
// one head is g = c / R, rounded once:  dx_seq[b][s_l][g][d] = bf16(sum_c dx_head_on(c)[b][r*S_l+s_l][0][d])
std::vector<bf16> gather_seq_summed(const Dims& x, std::int64_t r, const std::vector<const std::vector<bf16>*>& heads) {
  const std::int64_t S_l = x.S / x.P, R = x.P / x.H;
  std::vector<bf16> out(x.B * S_l * x.H * x.D);
  for (std::int64_t b = 0; b < x.B; ++b)
    for (std::int64_t s_l = 0; s_l < S_l; ++s_l)
      for (std::int64_t g = 0; g < x.H; ++g)
        for (std::int64_t d = 0; d < x.D; ++d) {
          float acc = 0;
          for (std::int64_t c = g * R; c < (g + 1) * R; ++c)
            acc += bf16_to_float((*heads[c])[head_index(x, b, global_pos(x, r, s_l), 0, d)]);
          out[seq_index(x, b, s_l, g, d)] = float_to_bf16(acc);
        }
  return out;
}

// Bit-exact check of one tensor on every rank; wrong counts add up over ranks.
template <class Want>
Check bits_over_ranks(const std::string& name, std::int64_t P, Want want_of,
                      const std::vector<bf16> RankResult::*got, const std::vector<RankResult>& ranks) {
  Check total{name, 0, 0, 0, true};
  for (std::int64_t r = 0; r < P; ++r) {
    const std::vector<bf16> want = want_of(r);
    const std::vector<bf16>& g = ranks[r].*got;
    Check c = g.size() == want.size() ? check_bits(name, g.data(), want.data(), std::int64_t(want.size()))
                                      : Check{name, std::int64_t(want.size()), INFINITY, 0, false};
    total.wrong += c.wrong;
    total.max_abs_err = std::max(total.max_abs_err, c.max_abs_err);
    total.passed = total.passed && c.passed;
  }
  return total;
}

std::vector<const std::vector<bf16>*> column(const std::vector<RankResult>& ranks, const std::vector<bf16> RankResult::*f) {
  std::vector<const std::vector<bf16>*> v;
  for (auto& r : ranks) v.push_back(&(r.*f));
  return v;
}

// The global [B,S,H,D] tensor (as float) assembled from the ranks' seq shards.
std::vector<float> assemble(const Dims& x, const std::vector<RankResult>& ranks, const std::vector<bf16> RankResult::*f) {
  const std::int64_t S_l = x.S / x.P, row = x.H * x.D;
  std::vector<float> out(x.B * x.S * row);
  for (std::int64_t r = 0; r < x.P; ++r)
    for (std::int64_t b = 0; b < x.B; ++b)
      for (std::int64_t i = 0; i < S_l * row; ++i)
        out[(b * x.S + r * S_l) * row + i] = bf16_to_float((ranks[r].*f)[b * S_l * row + i]);
  return out;
}

// Heads [h0, h0 + n) of a [B, S, H, D] tensor: [B, S, n, D].
std::vector<double> heads_of(const std::vector<double>& x, std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D,
                             std::int64_t h0, std::int64_t n) {
  std::vector<double> y(B * S * n * D);
  for (std::int64_t bs = 0; bs < B * S; ++bs)
    std::copy_n(x.begin() + (bs * H + h0) * D, n * D, y.begin() + bs * n * D);
  return y;
}

// sum_c |partial_c| of dk and dv ([B, S, H_kv, D]) when P > H_kv: partial_c is the fp64 gradient
// that rank c's query heads [c*H_l, (c+1)*H_l) give its one kv head c / R.
struct PartialScale {
  std::vector<double> dk, dv;
};
PartialScale replica_partials(const BlockShape& s, const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, const std::vector<double>& o, const std::vector<double>& lse,
                              const std::vector<double>& dout) {
  const std::int64_t B = s.B, S = s.S, H = s.H, H_kv = s.H_kv, D = s.D, H_l = H / s.P, R = s.P / s.H_kv;
  PartialScale out{std::vector<double>(k.size(), 0.0), std::vector<double>(v.size(), 0.0)};
  const AttnDims sub{B, S, H_l, 1, D, s.causal};
  for (std::int64_t c = 0; c < s.P; ++c) {
    const std::int64_t g = c / R, h0 = c * H_l;
    const auto qc = heads_of(q, B, S, H, D, h0, H_l), oc = heads_of(o, B, S, H, D, h0, H_l);
    const auto doc = heads_of(dout, B, S, H, D, h0, H_l);
    const auto kg = heads_of(k, B, S, H_kv, D, g, 1), vg = heads_of(v, B, S, H_kv, D, g, 1);
    std::vector<double> lse_c(B * H_l * S);  // lse is [B, H, S]
    for (std::int64_t b = 0; b < B; ++b)
      std::copy_n(lse.begin() + (b * H + h0) * S, H_l * S, lse_c.begin() + b * H_l * S);
    std::vector<double> dq(qc.size()), dk(kg.size()), dv(vg.size());
    attention_backward<double>(sub, qc.data(), kg.data(), vg.data(), oc.data(), lse_c.data(), doc.data(), dq.data(),
                               dk.data(), dv.data());
    for (std::int64_t bs = 0; bs < B * S; ++bs)
      for (std::int64_t d = 0; d < D; ++d) {
        out.dk[(bs * H_kv + g) * D + d] += std::abs(dk[bs * D + d]);
        out.dv[(bs * H_kv + g) * D + d] += std::abs(dv[bs * D + d]);
      }
  }
  return out;
}

std::vector<double> to_double(const std::vector<bf16>& x) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = bf16_to_float(x[i]);
  return y;
}

}  // namespace

std::vector<Check> verify_block(const BlockShape& s, const BlockInputs& in, const std::vector<RankResult>& ranks) {
  const Dims qx{s.B, s.S, s.P, s.H, s.D}, kvx{s.B, s.S, s.P, s.H_kv, s.D};
  const std::int64_t P = s.P;
  std::vector<Check> checks;
  auto from_inputs = [](const Dims& x, const std::vector<bf16>& g) { return [&x, &g](std::int64_t r) { return gather_head(x, r, g); }; };
  checks.push_back(bits_over_ranks("a2a.qkv.fwd q bit-exact", P, from_inputs(qx, in.q), &RankResult::q_head, ranks));
  checks.push_back(bits_over_ranks("a2a.qkv.fwd k bit-exact", P, from_inputs(kvx, in.k), &RankResult::k_head, ranks));
  checks.push_back(bits_over_ranks("a2a.qkv.fwd v bit-exact", P, from_inputs(kvx, in.v), &RankResult::v_head, ranks));
  checks.push_back(bits_over_ranks(
      "a2a inverse: head->seq(seq->head(q)) == q", P,
      [&](std::int64_t r) {  // q_seq on rank r is rows r*S_l.. of the global q
        const std::int64_t S_l = s.S_l(), row = s.H * s.D;
        std::vector<bf16> shard;
        for (std::int64_t b = 0; b < s.B; ++b)
          shard.insert(shard.end(), in.q.begin() + (b * s.S + r * S_l) * row, in.q.begin() + (b * s.S + (r + 1) * S_l) * row);
        return shard;
      },
      &RankResult::q_roundtrip, ranks));
  const auto o_heads = column(ranks, &RankResult::o_head), dq_heads = column(ranks, &RankResult::dq_head);
  const auto dk_heads = column(ranks, &RankResult::dk_head), dv_heads = column(ranks, &RankResult::dv_head);
  checks.push_back(bits_over_ranks("a2a.out.fwd o bit-exact", P, [&](std::int64_t r) { return gather_seq(qx, r, o_heads); },
                                   &RankResult::o_seq, ranks));
  checks.push_back(bits_over_ranks("a2a.out.bwd dout bit-exact", P, from_inputs(qx, in.dout), &RankResult::dout_head, ranks));
  checks.push_back(bits_over_ranks("a2a.qkv.bwd dq bit-exact", P, [&](std::int64_t r) { return gather_seq(qx, r, dq_heads); },
                                   &RankResult::dq_seq, ranks));
  const bool summed = s.H_kv < s.P;
  auto kv_want = [&](const std::vector<const std::vector<bf16>*>& heads) {
    return [&, heads](std::int64_t r) { return summed ? gather_seq_summed(kvx, r, heads) : gather_seq(kvx, r, heads); };
  };
  const char* rule = summed ? "bit-exact (fp32 sum of replicas)" : "bit-exact";
  checks.push_back(bits_over_ranks(fmt::format("a2a.qkv.bwd dk {}", rule), P, kv_want(dk_heads), &RankResult::dk_seq, ranks));
  checks.push_back(bits_over_ranks(fmt::format("a2a.qkv.bwd dv {}", rule), P, kv_want(dv_heads), &RankResult::dv_seq, ranks));

  // Ulysses over P ranks vs single-rank fp64 attention over the full sequence.
  const AttnDims a{s.B, s.S, s.H, s.H_kv, s.D, s.causal};
  const std::vector<double> q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), dout = to_double(in.dout);
  std::vector<double> o(q.size()), lse(s.B * s.H * s.S), dq(q.size()), dk(k.size()), dv(v.size());
  attention_forward<double>(a, q.data(), k.data(), v.data(), o.data(), lse.data());
  // o crosses from forward to backward in bf16 on both backends (as in FlashAttention, whose
  // backward reads the stored bf16 O in dout.o); the oracle keeps that one rounding so the check
  // measures the Ulysses data movement, not the storage precision of the interface.
  std::vector<double> o_bf16(o.size());
  for (std::size_t i = 0; i < o.size(); ++i) o_bf16[i] = bf16_to_float(float_to_bf16(float(o[i])));
  attention_backward<double>(a, q.data(), k.data(), v.data(), o_bf16.data(), lse.data(), dout.data(), dq.data(), dk.data(), dv.data());
  const double tol = kBf16AttentionTol;
  auto close = [&](const std::string& name, const Dims& x, const std::vector<bf16> RankResult::*f,
                   const std::vector<double>& ref, const double* extra) {
    const std::vector<float> got = assemble(x, ranks, f);
    return check_close(name, got.data(), ref.data(), std::int64_t(ref.size()), tol, extra);
  };
  checks.push_back(close("o vs single-rank fp64", qx, &RankResult::o_seq, o, nullptr));
  checks.push_back(close("dq vs single-rank fp64", qx, &RankResult::dq_seq, dq, nullptr));
  if (summed) {
    const PartialScale ps = replica_partials(s, q, k, v, o_bf16, lse, dout);
    checks.push_back(close("dk vs single-rank fp64 (+ sum |replica partials|)", kvx, &RankResult::dk_seq, dk, ps.dk.data()));
    checks.push_back(close("dv vs single-rank fp64 (+ sum |replica partials|)", kvx, &RankResult::dv_seq, dv, ps.dv.data()));
  } else {
    checks.push_back(close("dk vs single-rank fp64", kvx, &RankResult::dk_seq, dk, nullptr));
    checks.push_back(close("dv vs single-rank fp64", kvx, &RankResult::dv_seq, dv, nullptr));
  }
  return checks;
}

}  // namespace ulysses::runtime
