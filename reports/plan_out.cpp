// Text and JSON of plan's rung searches (reports/plan_out.hpp).
#include "reports/plan_out.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "reports/table.hpp"

namespace ulysses::reports {
namespace {

// Decimal, as --target-seq-len takes it: 3027968 -> "3.03M", 22528 -> "22.5K"
std::string tokens(std::int64_t n) {
  if (n >= 1000000) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1000) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{}", n);
}

std::string binds(Binding b) {
  return b == Binding::gpu_hbm ? "GPU HBM binds" : b == Binding::host_ram ? "host RAM binds" : "nothing binds";
}

std::string outcome(const RungCandidate& c) {
  if (!c.valid()) return "not a valid plan: " + c.invalid;
  if (c.cap.max_seq_len == 0) return "nothing fits (" + binds(c.cap.binding) + ")";
  return fmt::format("S = {} ({}), step {:.2f} s", tokens(c.cap.max_seq_len), binds(c.cap.binding), c.step_time_s());
}

std::string change_name(const RungEffect& e) {
  if (e.change == "gpus_x2") return "more GPUs: x2";
  return (e.adds ? "+ " : "- ") + e.change;
}

Json candidate_json(const RungCandidate& c) {
  Json j = {{"features", rung_set_name(c.set)}, {"valid", c.valid()}};
  if (!c.valid()) {
    j["invalid"] = c.invalid;
    return j;
  }
  j["seq_len"] = c.cap.max_seq_len;
  j["binding"] = to_string(c.cap.binding);
  j["step_time_s"] = c.step_time_s();
  return j;
}

Json effects_json(const std::vector<RungEffect>& effects) {
  Json a = Json::array();
  for (const auto& e : effects) {
    Json j = candidate_json(e.result);
    j["change"] = e.change;
    j["adds"] = e.adds;
    j["verdict"] = e.verdict;
    a.push_back(j);
  }
  return a;
}

// The largest terms of the breakdown that does not fit at q (GPU when both fail as CapacityResult says).
std::vector<NamedBytes> top_terms(const MemoryBreakdown& m, int n) {
  std::vector<NamedBytes> t(m.terms.begin(), m.terms.begin() + m.n);
  std::sort(t.begin(), t.end(), [](const NamedBytes& a, const NamedBytes& b) { return a.bytes > b.bytes; });
  if (static_cast<int>(t.size()) > n) t.resize(static_cast<std::size_t>(n));
  return t;
}

const MemoryBreakdown& bound(const CapacityResult& r, const Prediction& q) {
  return r.binding == Binding::host_ram ? q.host : q.gpu;
}

// "ulysses (on), tiled_mlp (off)"; "none"
std::string fixed_text(RungSet fixed, RungSet on) {
  std::string out;
  for (const auto& r : rungs())
    if (fixed & bit(r.rung)) out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", r.name, on & bit(r.rung) ? "on" : "off");
  return out.empty() ? "none" : out;
}

}  // namespace

std::string features_text(const RungSearch& s, RungSet fixed, const std::vector<RungEffect>& why) {
  const RungCandidate& c = s.chosen();
  std::string out = fmt::format("--all-features chose: {} (the longest S of {} feature sets, ties: the faster step; "
                                "fixed by flags: {})\n",
                                rung_set_name(c.set), s.candidates.size(), fixed_text(fixed, c.set));
  for (const auto& e : why)
    out += fmt::format("  {} {} ({}): {} it {}\n", e.change, e.adds ? "left out" : "kept", e.verdict,
                       e.adds ? "with" : "without", outcome(e.result));
  return out;
}

Json features_json(const RungSearch& s, RungSet fixed, const std::vector<RungEffect>& why) {
  Json searched = Json::array(), fixed_j = Json::array();
  for (const auto& r : rungs()) {
    if (s.free & bit(r.rung)) searched.push_back(r.name);
    if (fixed & bit(r.rung)) fixed_j.push_back({{"name", r.name}, {"on", (s.chosen().set & bit(r.rung)) != 0}});
  }
  return {{"chosen", rung_set_name(s.chosen().set)}, {"searched", searched}, {"fixed", fixed_j},
          {"sets_tried", s.candidates.size()}, {"why", effects_json(why)}};
}

std::string explain_text(const CapacityResult& r, const Prediction& q, const std::vector<RungEffect>& effects) {
  std::string out = "\nexplain: ";
  if (r.binding == Binding::none) out += "nothing binds below the longest length searched\n";
  else {
    const auto& m = bound(r, q);
    out += fmt::format("{} at S = {} ({:.2f} of {:.2f} GiB{}); largest terms:", binds(r.binding), q.seq_len, core::to_GiB(m.total()),
                       core::to_GiB(r.binding == Binding::host_ram ? q.host_capacity_bytes : q.gpu_capacity_bytes),
                       r.binding == Binding::host_ram ? " per node" : " per GPU");
    for (const auto& t : top_terms(m, 3)) out += fmt::format(" {} {:.2f} GiB,", t.name, core::to_GiB(t.bytes));
    out.back() = '\n';
  }
  Table t({{"change", "", Align::left}, {"longest S", "tokens"}, {"", ""}, {"step", "s"}, {"binds", "", Align::left},
           {"verdict", "", Align::left}});
  for (const auto& e : effects) {
    const auto& c = e.result;
    if (!c.valid()) {
      t.add_row({change_name(e), "-", "", "-", "-", "invalid: " + c.invalid});
      continue;
    }
    t.add_row({change_name(e), fmt::format("{}", c.cap.max_seq_len), tokens(c.cap.max_seq_len),
               c.cap.max_seq_len > 0 ? fmt::format("{:.2f}", c.step_time_s()) : "-", to_string(c.cap.binding), e.verdict});
  }
  return out + t.render();
}

Json explain_json(const CapacityResult& r, const Prediction& q, const std::vector<RungEffect>& effects) {
  Json j = {{"binding", to_string(r.binding)}, {"at_seq_len", q.seq_len}};
  if (r.binding != Binding::none) {
    Json terms = Json::array();
    for (const auto& t : top_terms(bound(r, q), 3)) terms.push_back({{"term", t.name}, {"bytes", t.bytes}});
    j["largest_terms"] = terms;
  }
  j["changes"] = effects_json(effects);
  return j;
}

std::string target_text(const TargetResult& t, std::int64_t max_gpus, int max_options) {
  std::string out;
  if (t.reached) {
    out += fmt::format("target {} tokens ({}): fewest GPUs {}; {} feature set{} reach it there\n", t.target, tokens(t.target),
                       t.gpus, t.options.size(), t.options.size() == 1 ? "" : "s");
  } else {
    out += fmt::format("target {} tokens ({}): NOT REACHED with up to {} GPUs", t.target, tokens(t.target), max_gpus);
    for (const auto& s : t.scanned)
      if (s.gpus == t.gpus && s.best.valid())
        out += fmt::format("; the longest found: {} ({}) on {} GPUs with {}", s.best.cap.max_seq_len,
                           tokens(s.best.cap.max_seq_len), s.gpus, rung_set_name(s.best.set));
    out += "\n";
  }
  Table scan({{"GPUs", ""}, {"longest S", "tokens"}, {"", ""}, {"with", "", Align::left}});
  for (const auto& s : t.scanned)
    scan.add_row({fmt::format("{}", s.gpus), s.best.valid() ? fmt::format("{}", s.best.cap.max_seq_len) : "-",
                  s.best.valid() ? tokens(s.best.cap.max_seq_len) : "", s.best.valid() ? rung_set_name(s.best.set) : s.best.invalid});
  if (t.counts_tried <= 16) out += "\nGPU counts tried (the longest S, best set at each):\n" + scan.render();
  else out += fmt::format("\n{} GPU counts tried ({}..{}); the longest S searched at {} of them\n", t.counts_tried,
                          t.scanned.front().gpus, t.scanned.back().gpus, t.scanned.size());
  if (!t.reached) return out;
  Table opts({{"#", ""}, {"features", "", Align::left}, {"sp", ""}, {"step at target", "s"}, {"tokens/s", ""},
              {"longest S", "tokens"}, {"", ""}});
  int i = 0;
  for (const auto& o : t.options) {
    if (i == max_options) break;
    opts.add_row({fmt::format("{}", ++i), rung_set_name(o.plan.set), fmt::format("{}", o.at_target.padded_seq_len / std::max<std::int64_t>(o.at_target.s_local, 1)),
                  fmt::format("{:.2f}", o.at_target.step_time_s), fmt::format("{:.0f}", o.at_target.tokens_per_s),
                  fmt::format("{}", o.plan.cap.max_seq_len), tokens(o.plan.cap.max_seq_len)});
  }
  out += fmt::format("\nat {} GPUs, fastest first (step time at S = {}{}):\n", t.gpus, t.eval_seq_len,
                     t.options.size() > static_cast<std::size_t>(max_options)
                         ? fmt::format(", {} of {} shown", max_options, t.options.size()) : "");
  return out + opts.render();
}

Json target_json(const TargetResult& t, std::int64_t max_gpus) {
  Json j = {{"command", "plan"}, {"target_seq_len", t.target}, {"reached", t.reached}, {"gpus", t.gpus},
            {"max_gpus", max_gpus}};
  Json scanned = Json::array();
  for (const auto& s : t.scanned) {
    Json c = candidate_json(s.best);
    c["gpus"] = s.gpus;
    scanned.push_back(c);
  }
  j["scanned"] = scanned;
  j["counts_tried"] = t.counts_tried;
  if (!t.reached) return j;
  j["eval_seq_len"] = t.eval_seq_len;
  Json opts = Json::array();
  for (const auto& o : t.options) {
    Json c = candidate_json(o.plan);
    c["eval_seq_len"] = o.at_target.seq_len;
    c["step_time_s_at_target"] = o.at_target.step_time_s;
    c["tokens_per_s_at_target"] = o.at_target.tokens_per_s;
    opts.push_back(c);
  }
  j["options"] = opts;
  j["scenario"] = scenario_json(t.scenario);
  return j;
}

}  // namespace ulysses::reports
