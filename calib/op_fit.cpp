// calib/op_fit.hpp: op bench rows -> efficiency curves and per-parameter optimizer times.
#include "calib/op_fit.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "core/flops.hpp"
#include "core/stats.hpp"

namespace ulysses::calib {
namespace {

double checked_eff(double flops, double t, double peak, const std::string& what) {
  const double eff = flops / (t * peak);
  if (!(eff > 0 && eff <= 1))
    throw std::runtime_error(fmt::format("op bench: {}: efficiency {:.3g} is outside (0, 1] of the profile's peak {:.4g} FLOP/s",
                                         what, eff, peak));
  return eff;
}

// Points sorted by x, equal x merged to the median of their y (a Curve wants x strictly increasing).
Curve curve_of(std::vector<std::pair<double, double>> pts) {
  std::sort(pts.begin(), pts.end());
  Curve c;
  for (std::size_t i = 0; i < pts.size();) {
    std::size_t j = i;
    std::vector<double> ys;
    while (j < pts.size() && pts[j].first == pts[i].first) ys.push_back(pts[j++].second);
    c.points.emplace_back(pts[i].first, core::median(ys));
    i = j;
  }
  return c;
}

void file_curve(std::vector<std::pair<std::string, Curve>>& curves, const std::string& key, Curve c) {
  const auto it = std::find_if(curves.begin(), curves.end(), [&](const auto& kc) { return kc.first == key; });
  if (it != curves.end()) it->second = std::move(c);
  else curves.emplace_back(key, std::move(c));
}

}  // namespace

std::vector<std::string> apply_op_bench(const runtime::deepspeed::OpBench& b, double peak, Calibration& c) {
  if (!(peak > 0)) throw std::runtime_error("op bench: the profile's bf16 peak must be positive");
  std::vector<std::string> out;
  // attention: one forward and one backward curve per (impl, D, mask, heads on the rank)
  using Shape = std::tuple<std::string, std::int64_t, bool, std::int64_t>;
  std::map<Shape, std::pair<std::vector<std::pair<double, double>>, std::vector<std::pair<double, double>>>> by_shape;
  for (const auto& a : b.attention) {
    const std::string what = fmt::format("attention {} S={}", a.impl, a.S);
    const double f = core::attention_flops(1, a.S, a.H, a.D, a.causal, core::Pass::fwd);
    const double fb = core::attention_flops(1, a.S, a.H, a.D, a.causal, core::Pass::bwd);
    auto& [fwd, bwd] = by_shape[{a.impl, a.D, a.causal, a.H}];
    fwd.emplace_back(double(a.S), checked_eff(f, a.fwd_s, peak, what + " forward"));
    if (a.bwd_s > 0) bwd.emplace_back(double(a.S), checked_eff(fb, a.bwd_s, peak, what + " backward"));
  }
  for (auto& [shape, curves] : by_shape) {
    const auto& [impl, D, causal, H] = shape;
    const std::string key = fmt::format("{}@d{}.{}.h{}", impl, D, causal ? "causal" : "full", H);
    const Curve fc = curve_of(curves.first);
    out.push_back(fmt::format("attn_fwd_eff.{}: {} points, {:.3f} .. {:.3f}", key, fc.points.size(), fc.points.front().second,
                              fc.points.back().second));
    file_curve(c.attn_fwd_eff, key, fc);
    if (!curves.second.empty()) {
      const Curve bc = curve_of(curves.second);
      out.push_back(fmt::format("attn_bwd_eff.{}: {} points, {:.3f} .. {:.3f}", key, bc.points.size(),
                                bc.points.front().second, bc.points.back().second));
      file_curve(c.attn_bwd_eff, key, bc);
    }
  }
  if (!b.gemm.empty()) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& g : b.gemm)
      pts.emplace_back(g.M * g.N * g.K, checked_eff(2 * g.M * g.N * g.K, g.s, peak, "gemm " + g.op));
    c.gemm_eff = curve_of(std::move(pts));
    out.push_back(fmt::format("gemm_eff: {} points over M*N*K {:.3g} .. {:.3g}, eff {:.3f} .. {:.3f}", c.gemm_eff.points.size(),
                              c.gemm_eff.points.front().first, c.gemm_eff.points.back().first,
                              std::min_element(c.gemm_eff.points.begin(), c.gemm_eff.points.end(),
                                               [](auto& x, auto& y) { return x.second < y.second; })->second,
                              std::max_element(c.gemm_eff.points.begin(), c.gemm_eff.points.end(),
                                               [](auto& x, auto& y) { return x.second < y.second; })->second));
  }
  if (b.adamw_s > 0 && b.adamw_params > 0) {
    c.torch_adamw_s_per_param = b.adamw_s / double(b.adamw_params);
    out.push_back(fmt::format("torch_adamw_ns_per_param: {:.4g} ({} over {} parameters)", c.torch_adamw_s_per_param * 1e9,
                              b.adamw_impl, b.adamw_params));
  }
  if (b.cpu_adam_s > 0 && b.cpu_adam_params > 0) {
    c.cpu_adam_s_per_param = b.cpu_adam_s / double(b.cpu_adam_params);
    out.push_back(fmt::format("cpu_adam_ns_per_param: {:.4g} (DeepSpeedCPUAdam, {} threads, {} parameters)",
                              c.cpu_adam_s_per_param * 1e9, b.cpu_adam_threads, b.cpu_adam_params));
  }
  return out;
}

}  // namespace ulysses::calib
