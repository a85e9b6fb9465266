#include "runtime/cuda/report.hpp"

namespace ulysses::runtime::cuda {
namespace {

std::vector<std::vector<std::uint16_t>*> tensors(RankResult& r) {
  return {&r.q_head, &r.k_head, &r.v_head, &r.o_head, &r.o_seq, &r.dout_head, &r.dq_head,
          &r.dk_head, &r.dv_head, &r.dq_seq, &r.dk_seq, &r.dv_seq, &r.q_roundtrip};
}

}  // namespace

std::string serialize(const RankReport& r) {
  Writer w;
  w.pod(r.rank);
  w.str(r.kernel);
  w.str(r.exchange);
  w.vec(r.phase_s);
  w.pod(r.traced_busy_s);
  w.pod(r.arena_peak_bytes), w.pod(r.device_used_peak_bytes);
  w.pod<std::uint64_t>(r.checks.size());
  for (const auto& c : r.checks) w.str(c.name), w.pod(c.wrong), w.pod(c.max_abs_err), w.pod(c.tolerance), w.pod(c.passed);
  w.pod<std::uint64_t>(r.trace.size());
  for (const auto& e : r.trace) w.str(e.name), w.pod(e.rank), w.str(e.track), w.pod(e.start_us), w.pod(e.dur_us);
  w.pod(r.origin_ns);
  w.pod(r.kept);
  if (r.kept)
    for (auto* t : tensors(const_cast<RankResult&>(r.result))) w.vec(*t);
  return std::move(w.out);
}

RankReport deserialize(const std::string& s) {
  Reader rd(s);
  RankReport r;
  r.rank = rd.pod<int>();
  r.kernel = rd.str();
  r.exchange = rd.str();
  r.phase_s = rd.vec<std::array<double, kPhases>>();
  r.traced_busy_s = rd.pod<std::array<double, kPhases>>();
  r.arena_peak_bytes = rd.pod<std::int64_t>(), r.device_used_peak_bytes = rd.pod<std::int64_t>();
  const auto nc = rd.pod<std::uint64_t>();
  for (std::uint64_t i = 0; i < nc; ++i) {
    Check c;
    c.name = rd.str(), c.wrong = rd.pod<std::int64_t>(), c.max_abs_err = rd.pod<double>(), c.tolerance = rd.pod<double>();
    c.passed = rd.pod<bool>();
    r.checks.push_back(c);
  }
  const auto ne = rd.pod<std::uint64_t>();
  for (std::uint64_t i = 0; i < ne; ++i) {
    TraceEvent e;
    e.name = rd.str(), e.rank = rd.pod<int>(), e.track = rd.str(), e.start_us = rd.pod<double>(), e.dur_us = rd.pod<double>();
    r.trace.push_back(e);
  }
  r.origin_ns = rd.pod<std::uint64_t>();
  r.kept = rd.pod<bool>();
  if (r.kept)
    for (auto* t : tensors(r.result)) *t = rd.vec<std::uint16_t>();
  return r;
}

}  // namespace ulysses::runtime::cuda
