// The sequence-parallel ZeRO-3 step on P threads (runtime/cpu/sp_step.hpp): the ranks' collectives,
// the Ulysses attention of one layer, then the step rank by rank, top to bottom.
#include "runtime/cpu/sp_step.hpp"

#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/heads.hpp"
#include "core/layout.hpp"
#include "core/step_phases.hpp"
#include "runtime/cpu/exchange.hpp"
#include "runtime/reference_attention.hpp"

namespace ulysses::runtime::cpu {
namespace {

using Vec = std::vector<double>;
constexpr std::string_view kFwdBwd = "fwd_bwd";  // the CPU step's own: forward and backward with the exchanges

// ---- collectives among P threads: each rank publishes a pointer, a barrier, each rank reads its peers',
// a barrier (no buffer is reused while a peer still reads it); sums in ascending rank order ----
class Group {
 public:
  explicit Group(int P) : P_(P), bar_(P), slot_(static_cast<std::size_t>(P)) {}
  int size() const { return P_; }
  void abort() { bar_.abort(); }

  // recv [P, chunk] on r: chunk c = send [P, chunk] of rank c, its chunk r
  void all_to_all(int r, const Vec& send, Vec& recv, std::int64_t chunk) {
    recv.assign(static_cast<std::size_t>(P_ * chunk), 0.0);
    exchange(r, send.data(), [&](int c, const double* peer) {
      std::copy(peer + r * chunk, peer + (r + 1) * chunk, recv.begin() + c * chunk);
    });
  }
  // out [P, part] = the P ranks' parts, in rank order
  void all_gather(int r, const Vec& part, Vec& out) {
    const auto n = static_cast<std::int64_t>(part.size());
    out.assign(static_cast<std::size_t>(P_ * n), 0.0);
    exchange(r, part.data(), [&](int c, const double* peer) {
      std::copy(peer, peer + n, out.begin() + c * n);
    });
  }
  // out [part] = sum over ranks c (ascending) of full_c [r*part .. (r+1)*part)
  void reduce_scatter(int r, const Vec& full, Vec& out, std::int64_t part) {
    out.assign(static_cast<std::size_t>(part), 0.0);
    exchange(r, full.data(), [&](int, const double* peer) {
      for (std::int64_t i = 0; i < part; ++i) out[i] += peer[r * part + i];
    });
  }
  double all_reduce_sum(int r, double x) {
    double s = 0;
    exchange(r, &x, [&](int, const double* peer) { s += *peer; });
    return s;
  }

 private:
  template <class Read>
  void exchange(int r, const double* mine, Read read) {
    slot_[r] = mine;
    bar_.arrive_and_wait();
    for (int c = 0; c < P_; ++c) read(c, slot_[c]);
    bar_.arrive_and_wait();
  }
  int P_;
  AbortableBarrier bar_;
  std::vector<const double*> slot_;
};

// A rank's handle on the group with its own traffic counters.
struct RankComm {
  Group* g;
  int r;
  std::int64_t a2a_elems = 0, gathered_elems = 0;
  int P() const { return g->size(); }
  void all_to_all(const Vec& send, Vec& recv, std::int64_t chunk) {
    g->all_to_all(r, send, recv, chunk);
    for (int c = 0; c < P(); ++c) a2a_elems += c != r ? chunk : 0;
  }
  void all_gather(const Vec& part, Vec& out) {
    g->all_gather(r, part, out);
    gathered_elems += static_cast<std::int64_t>(part.size()) * (P() - 1);
  }
  void reduce_scatter(const Vec& full, Vec& out, std::int64_t part) { g->reduce_scatter(r, full, out, part); }
  double all_reduce_sum(double x) { return g->all_reduce_sum(r, x); }
};

// ---- the Ulysses exchange of one tensor, B = 1, with core/layout.hpp's maps ----
// x_seq [S_l, H, D] -> x_head [S, H_l, D]
Vec seq_to_head(RankComm& comm, const core::Dims& x, const Vec& x_seq) {
  const std::int64_t S_l = x.S / x.P, H_l = core::heads_per_rank(x.H, x.P), chunk = core::chunk_elems(x);
  Vec send(static_cast<std::size_t>(x.P * chunk)), recv;
  for (std::int64_t c = 0; c < x.P; ++c)
    for (std::int64_t s = 0; s < S_l; ++s)
      for (std::int64_t h = 0; h < H_l; ++h)
        for (std::int64_t d = 0; d < x.D; ++d)
          send[core::buf_index(x, c, 0, s, h, d)] = x_seq[core::seq_index(x, 0, s, core::source_head(x, c, h), d)];
  comm.all_to_all(send, recv, chunk);
  Vec x_head(static_cast<std::size_t>(x.S * H_l * x.D));
  for (std::int64_t c = 0; c < x.P; ++c)
    for (std::int64_t s = 0; s < S_l; ++s)
      for (std::int64_t h = 0; h < H_l; ++h)
        for (std::int64_t d = 0; d < x.D; ++d)
          x_head[core::head_index(x, 0, core::global_pos(x, c, s), h, d)] = recv[core::buf_index(x, c, 0, s, h, d)];
  return x_head;
}

// x_head [S, H_l, D] -> x_seq [S_l, H, D]; H < P: the chunks of the R = P/H receivers of a head summed in
// ascending rank order (the gradient of a replicated kv head)
Vec head_to_seq(RankComm& comm, const core::Dims& x, const Vec& x_head) {
  const std::int64_t S_l = x.S / x.P, H_l = core::heads_per_rank(x.H, x.P), chunk = core::chunk_elems(x);
  Vec send(static_cast<std::size_t>(x.P * chunk)), recv;
  for (std::int64_t c = 0; c < x.P; ++c)
    for (std::int64_t s = 0; s < S_l; ++s)
      for (std::int64_t h = 0; h < H_l; ++h)
        for (std::int64_t d = 0; d < x.D; ++d)
          send[core::buf_index(x, c, 0, s, h, d)] = x_head[core::head_index(x, 0, core::global_pos(x, c, s), h, d)];
  comm.all_to_all(send, recv, chunk);
  Vec x_seq(static_cast<std::size_t>(S_l * x.H * x.D), 0.0);
  for (std::int64_t c = 0; c < x.P; ++c)
    for (std::int64_t s = 0; s < S_l; ++s)
      for (std::int64_t h = 0; h < H_l; ++h)
        for (std::int64_t d = 0; d < x.D; ++d)
          x_seq[core::seq_index(x, 0, s, core::source_head(x, c, h), d)] += recv[core::buf_index(x, c, 0, s, h, d)];
  return x_seq;
}

// One layer's attention on one rank: q, k, v of its T_l tokens to its heads over all T positions, causal
// attention there, o back (and the inverse in the backward).
class UlyssesAttention : public LayerAttention {
 public:
  UlyssesAttention(RankComm& comm, const DecoderLayerDims& d, std::int64_t S)
      : comm_(comm), xq_{1, S, comm.P(), d.H, d.D}, xkv_{1, S, comm.P(), d.H_kv, d.D},
        a_{1, S, core::heads_per_rank(d.H, comm.P()), core::heads_per_rank(d.H_kv, comm.P()), d.D, true} {}
  Vec forward(const Vec& q, const Vec& k, const Vec& v) override {
    q_ = seq_to_head(comm_, xq_, q), k_ = seq_to_head(comm_, xkv_, k), v_ = seq_to_head(comm_, xkv_, v);
    o_.assign(q_.size(), 0.0), lse_.assign(static_cast<std::size_t>(a_.H * a_.S), 0.0);
    attention_forward<double>(a_, q_.data(), k_.data(), v_.data(), o_.data(), lse_.data());
    return head_to_seq(comm_, xq_, o_);
  }
  void backward(const Vec& dout, Vec& dq, Vec& dk, Vec& dv) override {
    const Vec dout_head = seq_to_head(comm_, xq_, dout);
    Vec dq_h(q_.size()), dk_h(k_.size()), dv_h(v_.size());
    attention_backward<double>(a_, q_.data(), k_.data(), v_.data(), o_.data(), lse_.data(), dout_head.data(), dq_h.data(), dk_h.data(),
                               dv_h.data());
    dq = head_to_seq(comm_, xq_, dq_h), dk = head_to_seq(comm_, xkv_, dk_h), dv = head_to_seq(comm_, xkv_, dv_h);
  }

 private:
  RankComm& comm_;
  core::Dims xq_, xkv_;
  AttnDims a_;
  Vec q_, k_, v_, o_, lse_;
};

// rank r's partition of x (zero padded)
Vec partition_of(const Vec& x, const Partition& part, int r) {
  Vec out(static_cast<std::size_t>(part.size), 0.0);
  const auto n = static_cast<std::int64_t>(x.size());
  for (std::int64_t i = 0; i < part.size && part.begin(r) + i < n; ++i) out[i] = x[part.begin(r) + i];
  return out;
}

template <class T>
std::vector<T> rows(const std::vector<T>& x, std::int64_t row, std::int64_t n_rows, std::int64_t width) {
  return std::vector<T>(x.begin() + row * width, x.begin() + (row + n_rows) * width);
}

// What one rank ends the step with.
struct RankOut {
  std::vector<std::pair<std::string, double>> phase_s;
  StepResult local;                  // its own forward/backward (loss sum, valid tokens)
  std::vector<Vec> grad_parts;       // its reduce-scattered gradient partitions
  std::vector<Vec> master_parts;     // its updated master partitions
  std::vector<Vec> gathered;         // every tensor's updated bf16 values (as doubles), all-gathered
  ClipResult clip;
  std::int64_t a2a_elems = 0, gathered_elems = 0;
};

// Seconds since the last lap, under `name`.
class Laps {
 public:
  explicit Laps(std::vector<std::pair<std::string, double>>& out) : out_(out) {}
  void lap(std::string_view name) {
    const auto now = std::chrono::steady_clock::now();
    out_.emplace_back(std::string(name), std::chrono::duration<double>(now - t_).count());
    t_ = now;
  }

 private:
  std::vector<std::pair<std::string, double>>& out_;
  std::chrono::steady_clock::time_point t_ = std::chrono::steady_clock::now();
};

void run_rank(const SpStepInput& in, RankComm& comm, RankOut& out) {
  const int P = comm.P(), r = comm.r;
  Laps laps(out.phase_s);
  const StepDims& d = in.dims;
  const std::int64_t T = d.layer.T, T_l = T / P, half_D = d.layer.D / 2;
  const auto params = param_tensors(d, in.params);
  // zero.allgather: each tensor from the ranks' partitions (the rank starts with its partition only)
  StepParams full = in.params;
  const auto full_tensors = param_tensors(d, full);
  std::vector<Partition> parts;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto n = static_cast<std::int64_t>(params[i]->size());
    parts.push_back(zero_partition(n, P));
    Vec gathered;
    comm.all_gather(partition_of(widen(*params[i]), parts[i], r), gathered);
    for (std::int64_t j = 0; j < n; ++j) (*full_tensors[i])[j] = core::float_to_bf16(static_cast<float>(gathered[j]));
  }
  laps.lap(core::kZeroAllgather);
  // the rank's tokens, its labels (shifted over the whole sequence first), its RoPE rows
  const std::vector<std::int64_t> labels_all = shift_labels(in.tokens);
  const auto tokens = rows(in.tokens, r * T_l, T_l, 1), labels = rows(labels_all, r * T_l, T_l, 1);
  const auto cos = rows(in.cos, r * T_l, T_l, half_D), sin = rows(in.sin, r * T_l, T_l, half_D);
  std::int64_t valid = 0;
  for (auto l : labels) valid += l != kIgnoreLabel;
  const auto valid_all = static_cast<std::int64_t>(comm.all_reduce_sum(double(valid)));
  StepDims local = d;
  local.layer.T = T_l;
  out.local = step_reference(local, full, tokens, labels, cos, sin, in.logits_shards, std::max<std::int64_t>(valid_all, 1),
                             [&] { return std::make_unique<UlyssesAttention>(comm, d.layer, T); });
  laps.lap(kFwdBwd);
  // zero.reduce_scatter, then the optimizer on the rank's partitions
  const auto grads = grad_tensors(d, out.local);
  double sq = 0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    Vec padded(static_cast<std::size_t>(P * parts[i].size), 0.0);
    std::copy(grads[i]->begin(), grads[i]->end(), padded.begin());
    Vec mine;
    comm.reduce_scatter(padded, mine, parts[i].size);
    for (double g : mine) sq += g * g;
    out.grad_parts.push_back(std::move(mine));
  }
  laps.lap(core::kZeroReduceScatter);
  out.clip = clip_of_norm(std::sqrt(comm.all_reduce_sum(sq)), in.adam.max_grad_norm);
  for (std::size_t i = 0; i < params.size(); ++i) {
    AdamState s = adam_state_from(partition_of(widen(*params[i]), parts[i], r));
    adamw_reference(s, out.grad_parts[i], out.clip.coef, 1, in.adam);
    Vec rounded(s.master.size());
    for (std::size_t j = 0; j < rounded.size(); ++j) rounded[j] = core::bf16_to_float(core::float_to_bf16(static_cast<float>(s.master[j])));
    Vec gathered;
    comm.all_gather(rounded, gathered);  // the bf16 parameters the next step reads
    gathered.resize(params[i]->size());
    out.gathered.push_back(std::move(gathered));
    out.master_parts.push_back(std::move(s.master));
  }
  laps.lap(core::kOptimizerStep);
  out.a2a_elems = comm.a2a_elems, out.gathered_elems = comm.gathered_elems;
}

}  // namespace

Partition zero_partition(std::int64_t n, int P) { return Partition{(n + P - 1) / P}; }

SpStepResult sp_step(const SpStepInput& in, int P) {
  const DecoderLayerDims& ld = in.dims.layer;
  if (P < 1 || ld.T % P != 0) throw std::invalid_argument("sp_step: the sequence length must be a multiple of the ranks");
  switch (core::head_rule(ld.H, ld.H_kv, P)) {
    case core::HeadRule::ok: break;
    case core::HeadRule::kv_heads_divide_heads: throw std::invalid_argument("sp_step: the kv heads must divide the heads");
    case core::HeadRule::heads_divisible_by_sp: throw std::invalid_argument("sp_step: the heads must be divisible by the ranks");
    case core::HeadRule::kv_heads_split_or_replicated:
      throw std::invalid_argument("sp_step: the kv heads must divide or be a multiple of the ranks");
  }
  if (static_cast<std::int64_t>(in.tokens.size()) != ld.T) throw std::invalid_argument("sp_step: tokens must have T entries");
  Group group(P);
  std::vector<RankOut> outs(static_cast<std::size_t>(P));
  std::vector<RankComm> comms;
  for (int r = 0; r < P; ++r) comms.push_back(RankComm{&group, r});
  std::exception_ptr first;
  std::mutex m;
  {
    std::vector<std::jthread> ranks;
    try {
      for (int r = 0; r < P; ++r)
        ranks.emplace_back([&, r] {
          try {
            run_rank(in, comms[r], outs[r]);
          } catch (const PeerFailed&) {
          } catch (...) {
            const std::lock_guard<std::mutex> lock(m);
            if (!first) first = std::current_exception();
            group.abort();
          }
        });
    } catch (...) {  // a thread could not start: release the started ones (they wait for it), then report
      group.abort();
      throw;
    }
  }
  if (first) std::rethrow_exception(first);
  // assemble what the ranks hold
  SpStepResult res;
  res.ranks = P;
  double loss_sum = 0;
  for (const RankOut& o : outs) {
    loss_sum += o.local.loss_sum;
    res.valid_tokens += o.local.valid_tokens;
    res.valid_tokens_per_rank.push_back(o.local.valid_tokens);
  }
  res.loss = loss_sum / double(std::max<std::int64_t>(res.valid_tokens, 1));
  res.clip = outs[0].clip;
  res.grads = outs[0].local;  // shapes; the values are replaced by the partitions below
  res.grads.loss_sum = loss_sum, res.grads.valid_tokens = res.valid_tokens, res.grads.loss = res.loss;
  res.updated = in.params;
  const auto grads = grad_tensors(in.dims, res.grads);
  const auto updated = param_tensors(in.dims, res.updated);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const auto n = static_cast<std::int64_t>(grads[i]->size());
    const Partition part = zero_partition(n, P);
    Vec master(static_cast<std::size_t>(n));
    for (std::int64_t j = 0; j < n; ++j) {
      const int owner = static_cast<int>(j / part.size);
      (*grads[i])[j] = outs[owner].grad_parts[i][j - part.begin(owner)];
      master[j] = outs[owner].master_parts[i][j - part.begin(owner)];
      (*updated[i])[j] = core::float_to_bf16(static_cast<float>(outs[0].gathered[i][j]));  // rank 0's all-gather
    }
    res.masters.push_back(std::move(master));
  }
  for (const RankOut& o : outs) res.phase_s.push_back(o.phase_s);
  res.a2a_elems_per_rank = outs[0].a2a_elems, res.gathered_elems_per_rank = outs[0].gathered_elems;
  return res;
}

}  // namespace ulysses::runtime::cpu
