// calib/op_fit.hpp: op bench rows -> efficiency curves and per-parameter optimizer times.
#include "calib/op_fit.hpp"

#include <algorithm>
#include <cmath>
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

// Least-squares line t = a + b x through the points; a single x: the line through the origin.
struct Line {
  double intercept = 0, slope = 0;
};
Line fit_line(const std::vector<std::pair<double, double>>& pts) {
  double mx = 0, my = 0;
  for (const auto& [x, y] : pts) mx += x, my += y;
  mx /= double(pts.size()), my /= double(pts.size());
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : pts) sxx += (x - mx) * (x - mx), sxy += (x - mx) * (y - my);
  if (!(sxx > 0)) return {0, my / mx};
  const double slope = sxy / sxx;
  return {my - slope * mx, slope};
}

// The eager rows -> effective bytes per element (the slope of time over elements, times hbm); the
// intercept (launch overhead) is reported, not kept. The embedding's backward: slope per token
// element, intercept per element of the dense gradient [V, h] (embed.grad).
void apply_eager(const std::vector<runtime::deepspeed::OpBench::Eager>& rows, double hbm_Bps, Calibration& c,
                 std::vector<std::string>& out) {
  std::map<std::string, std::pair<std::vector<std::pair<double, double>>, std::vector<std::pair<double, double>>>> by_op;
  std::map<std::string, double> extra;
  for (const auto& r : rows) {
    auto& [f, bw] = by_op[r.op];
    f.emplace_back(r.elems, r.fwd_s);
    bw.emplace_back(r.elems, r.bwd_s);
    extra[r.op] = r.extra_elems;
  }
  const auto file = [&](const std::string& key, double bytes, const std::string& how) {
    const int i = eager_rate_index(key);
    if (!(bytes > 0) || !std::isfinite(bytes))
      throw std::runtime_error(fmt::format("op bench: eager {}: {} gives {:.3g} bytes per element (must be positive)", key, how, bytes));
    c.eager_bytes_per_elem[static_cast<std::size_t>(i)] = bytes;
    out.push_back(fmt::format("eager_bytes_per_elem.{}: {:.2f} ({})", key, bytes, how));
  };
  for (const auto& [op, pts] : by_op) {
    const bool known = eager_rate_index(op + ".fwd") >= 0;
    if (!known) throw std::runtime_error(fmt::format("op bench: eager op '{}' is not one of the model's passes", op));
    const Line lf = fit_line(pts.first);
    file(op + ".fwd", lf.slope * hbm_Bps, fmt::format("{} points, intercept {:.1f} us", pts.first.size(), lf.intercept * 1e6));
    if (op == "add") continue;  // its backward passes the gradient through (no kernel)
    const Line lb = fit_line(pts.second);
    file(op + ".bwd", lb.slope * hbm_Bps, fmt::format("{} points, intercept {:.1f} us", pts.second.size(), lb.intercept * 1e6));
    if (op == "embed") {
      if (pts.second.size() < 2 || !(extra[op] > 0))
        throw std::runtime_error("op bench: eager embed: the dense gradient's part needs two token counts or more");
      file("embed.grad", lb.intercept / extra[op] * hbm_Bps, fmt::format("the backward's intercept over {:.4g} gradient elements", extra[op]));
    }
  }
}

// ZeRO-3's step per parameter, on the GPU with either optimizer (torch AdamW, DeepSpeed's FusedAdam)
// and offloaded; the offload's gradient copies = its backward less a GPU run's, per parameter.
void apply_zero_step(const std::vector<runtime::deepspeed::OpBench::ZeroStep>& rows, Calibration& c,
                     std::vector<std::string>& out) {
  const runtime::deepspeed::OpBench::ZeroStep *torch_gpu = nullptr, *fused_gpu = nullptr, *off = nullptr;
  for (const auto& r : rows) (r.offload_optimizer ? off : r.torch_adam ? torch_gpu : fused_gpu) = &r;
  if (torch_gpu) {
    c.zero3_torch_adamw_step_s_per_param = torch_gpu->step_s / torch_gpu->params;
    out.push_back(fmt::format("zero3_torch_adamw_step_ns_per_param: {:.4g} (engine.step(), {:.4g} parameters)",
                              c.zero3_torch_adamw_step_s_per_param * 1e9, torch_gpu->params));
  }
  if (fused_gpu) {
    c.zero3_fused_adam_step_s_per_param = fused_gpu->step_s / fused_gpu->params;
    out.push_back(fmt::format("zero3_fused_adam_step_ns_per_param: {:.4g} (engine.step() with FusedAdam, {:.4g} parameters)",
                              c.zero3_fused_adam_step_s_per_param * 1e9, fused_gpu->params));
  }
  const runtime::deepspeed::OpBench::ZeroStep* gpu = torch_gpu ? torch_gpu : fused_gpu;
  if (off) {
    c.zero3_offload_step_s_per_param = off->step_s / off->params;
    out.push_back(fmt::format("zero3_offload_step_ns_per_param: {:.4g} (engine.step() with offload_optimizer, {:.4g} parameters)",
                              c.zero3_offload_step_s_per_param * 1e9, off->params));
  }
  if (off && gpu && gpu->params == off->params) {
    const double extra = off->bwd_s - gpu->bwd_s;
    if (extra > 0) {
      c.zero3_offload_grads_s_per_param = extra / off->params;
      out.push_back(fmt::format("zero3_offload_grads_ns_per_param: {:.4g} (backward {:.4g} s offloaded - {:.4g} s on the GPU)",
                                c.zero3_offload_grads_s_per_param * 1e9, off->bwd_s, gpu->bwd_s));
    } else {
      out.push_back(fmt::format("zero3_offload_grads_ns_per_param: not filed (backward offloaded {:.4g} s <= on the GPU {:.4g} s)",
                                off->bwd_s, gpu->bwd_s));
    }
  }
}

}  // namespace

std::vector<std::string> apply_op_bench(const runtime::deepspeed::OpBench& b, double peak, double hbm_GBps, Calibration& c) {
  if (!(peak > 0)) throw std::runtime_error("op bench: the profile's bf16 peak must be positive");
  if (!(hbm_GBps > 0)) throw std::runtime_error("op bench: the profile's hbm_GBps must be positive");
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
  if (!b.eager.empty()) apply_eager(b.eager, hbm_GBps * 1e9, c, out);
  if (!b.zero_step.empty()) apply_zero_step(b.zero_step, c, out);
  return out;
}

}  // namespace ulysses::calib
