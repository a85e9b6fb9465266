// The block predicted next to its run on a backend (eval/block_compare.hpp).
#include "eval/block_compare.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "eval/block_run.hpp"
#include "eval/block_validation.hpp"
#include "reports/table.hpp"
#include "reports/trace.hpp"
#include "core/phases.hpp"
#include "sim/predict.hpp"

namespace ulysses::eval {

using reports::Json;

AsRun prediction_as_run(const Scenario& sc, const Prediction& planned, const runtime::Measurement& m) {
  AsRun r{sc, planned, ""};
  if (!m.attn_kernel.empty() && m.attn_kernel != sc.plan.attn_implementation) {
    r.note = fmt::format("attention: plan.attn_implementation {} ran as {} on the {} backend; predicted as {}\n",
                         sc.plan.attn_implementation, m.attn_kernel, m.backend, m.attn_kernel);
    r.sc.plan.attn_implementation = m.attn_kernel;
    r.p = predict(r.sc);  // another scenario: the kernel that ran
  }
  return r;
}

namespace {
std::int64_t max_peak(const runtime::Measurement& m) {
  return m.peak_bytes_per_rank.empty() ? 0 : *std::max_element(m.peak_bytes_per_rank.begin(), m.peak_bytes_per_rank.end());
}
}  // namespace

Json block_comparison_json(const Scenario& sc, const Prediction& p, const runtime::Measurement& m) {
  Json j;
  j["scenario"] = sc.name;
  j["profile"] = sc.hw.name;
  j["calibrated"] = sc.hw.has_calibration;
  j["backend"] = m.backend;
  j["device"] = m.device;
  j["error_pct_convention"] = "(predicted - measured) / measured * 100; measured = median over iterations, max over ranks";
  j["phases"] = Json::array();
  double pred_total = 0, meas_total = 0;
  for (std::size_t i = 0; i < m.phases.size(); ++i) {
    const auto& ph = m.phases[i];
    const double pred = p.block[i];
    pred_total += pred, meas_total += ph.median_s;
    j["phases"].push_back({{"name", ph.name}, {"predicted_s", pred}, {"measured_s", ph.median_s},
                           {"error_pct", block_error_pct(pred, ph.median_s)}, {"measured_min_s", ph.min_s},
                           {"measured_max_s", ph.max_s}});
  }
  j["block_total"] = {{"predicted_s", pred_total}, {"measured_s", meas_total}, {"error_pct", block_error_pct(pred_total, meas_total)}};
  const std::int64_t peak = max_peak(m);
  const std::int64_t predicted_peak = predicted_block_peak(p, m.backend);
  j["peak_memory"] = {{"predicted_bytes", predicted_peak}, {"measured_bytes", peak},
                      {"error_pct", block_error_pct(double(predicted_peak), double(peak))},
                      {"allocation", m.backend == "cpu" ? "each buffer freed after its last use" : "every buffer up front"}};
  j["exchange_bytes_per_rank"] = {{"q", {{"predicted", p.a2a_q_bytes_per_rank}, {"measured", m.a2a_q_bytes_per_rank}}},
                                  {"kv", {{"predicted", p.a2a_kv_bytes_per_rank}, {"measured", m.a2a_kv_bytes_per_rank}}}};
  j["measurement"] = measurement_json(m);
  j["correct"] = m.correct;
  return j;
}

std::string block_comparison_table(const Scenario& sc, const Json& j) {
  std::string out = fmt::format("scenario {} on profile {} ({}), backend {}\n", sc.name, sc.hw.name,
                                sc.hw.has_calibration ? "calibrated" : "uncalibrated", j["backend"].get<std::string>());
  reports::Table t({{"phase", "", reports::Align::left}, {"predicted", "us"}, {"measured", "us"}, {"error", "%"},
                    {"meas. min", "us"}, {"meas. max", "us"}});
  auto row = [&](const std::string& name, const Json& e) {
    auto us = [&](const char* k) { return e.contains(k) ? fmt::format("{:.1f}", e[k].get<double>() * 1e6) : std::string("-"); };
    t.add_row({name, us("predicted_s"), us("measured_s"), fmt::format("{:+.1f}", e["error_pct"].get<double>()),
               us("measured_min_s"), us("measured_max_s")});
  };
  for (const auto& e : j["phases"]) row(e["name"].get<std::string>(), e);
  row("block total", j["block_total"]);
  out += t.render();
  const Json& pm = j["peak_memory"];
  reports::Table mt({{"", "", reports::Align::left}, {"predicted", "bytes"}, {"measured", "bytes"}, {"error", "%"}});
  mt.add_row({"peak memory per rank", fmt::format("{}", pm["predicted_bytes"].get<std::int64_t>()),
              fmt::format("{}", pm["measured_bytes"].get<std::int64_t>()), fmt::format("{:+.1f}", pm["error_pct"].get<double>())});
  for (const char* k : {"q", "kv"}) {
    const Json& e = j["exchange_bytes_per_rank"][k];
    const auto pr = e["predicted"].get<std::int64_t>(), me = e["measured"].get<std::int64_t>();
    mt.add_row({fmt::format("a2a {} bytes per rank", k), fmt::format("{}", pr), fmt::format("{}", me),
                fmt::format("{:+.1f}", block_error_pct(double(pr), double(me)))});
  }
  out += '\n';
  out += mt.render();
  std::int64_t failed = 0;
  for (const auto& c : j["measurement"]["checks"]) failed += !c["passed"].get<bool>();
  out += fmt::format("\nchecks: {} of {} passed; correct: {}\n", j["measurement"]["checks"].size() - failed,
                     j["measurement"]["checks"].size(), j["correct"].get<bool>() ? "true" : "false");
  out += "error = (predicted - measured) / measured; measured = median over iterations, max over ranks\n";
  return out;
}

Json block_comparison_trace(const Prediction& p, const runtime::Measurement& m, const Json& cmp) {
  reports::TraceProcess pred{"predicted (sim, every rank)", {{"predicted block", {}}}};
  double t = 0;
  for (std::size_t i = 0; i < m.phases.size(); ++i) {
    const Json& e = cmp["phases"][i];
    pred.threads[0].spans.push_back({m.phases[i].name, t, p.block[i] * 1e6, "phase",
                                     {{"predicted_us", p.block[i] * 1e6}, {"measured_median_us", m.phases[i].median_s * 1e6},
                                      {"error_pct", e["error_pct"]}}});
    t += p.block[i] * 1e6;
  }
  reports::TraceProcess meas{fmt::format("measured ({}, last timed iteration)", m.backend), {}};
  std::map<std::string, std::size_t> track_of;  // "rank 0" -> thread index, in first-seen order
  std::vector<runtime::TraceEvent> events = m.trace;
  std::stable_sort(events.begin(), events.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  for (const auto& e : events) {
    auto it = track_of.find(e.track);
    if (it == track_of.end()) {
      it = track_of.emplace(e.track, meas.threads.size()).first;
      meas.threads.push_back({e.track, {}});
    }
    const bool is_phase = std::find(core::kBlockPhaseNames.begin(), core::kBlockPhaseNames.end(), e.name) != core::kBlockPhaseNames.end();
    meas.threads[it->second].spans.push_back({e.name, e.start_us, e.dur_us, is_phase ? "phase" : "segment", {{"rank", e.rank}}});
  }
  // parents before children: by start, longer first, a phase before a segment of equal extent
  for (auto& th : meas.threads)
    std::stable_sort(th.spans.begin(), th.spans.end(), [](const reports::TraceSpan& a, const reports::TraceSpan& b) {
      if (a.start_us != b.start_us) return a.start_us < b.start_us;
      if (a.dur_us != b.dur_us) return a.dur_us > b.dur_us;
      return a.category == "phase" && b.category != "phase";
    });
  return reports::chrome_trace({pred, meas});
}

}  // namespace ulysses::eval
