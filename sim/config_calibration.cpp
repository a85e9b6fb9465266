// The optional `calibrated:` section of a hardware profile: measured curves and values that
// override the datasheet figures (docs/INPUTS.md). Parsing and the section's YAML text here (a
// scenario's to_yaml emits it too); writing it into a profile file in calib/profile_out.cpp.
#include <algorithm>

#include <fmt/format.h>

#include "sim/attn_key.hpp"
#include "sim/gemm_key.hpp"
#include "sim/config.hpp"
#include "sim/config_internal.hpp"

namespace ulysses {

namespace {

const std::vector<std::string> kCalibrationKeys = {
    "provenance", "a2a_busbw_GBps", "allgather_busbw_GBps", "reduce_scatter_busbw_GBps", "a2a_alpha_us", "attn_fwd_eff", "attn_bwd_eff", "gemm_eff",
    "host_link_h2d_GBps", "host_link_d2h_GBps", "host_link_h2d_busy_GBps", "host_link_d2h_busy_GBps", "cuda_context_GiB", "nccl_buffer_GiB", "pack_GBps",
    "a2a_alpha_per_tensor_us", "a2a_phase_GBps", "a2a_transport", "a2a_idle_penalty_us",
    "pytorch_context_GiB", "pytorch_nccl_buffer_GiB", "torch_adamw_ns_per_param", "cpu_adam_ns_per_param",
    "ulysses_host_adam_ns_per_param", "ulysses_gemm_eff", "pytorch_host_logits_tile_ms",
    "eager_bytes_per_elem", "ulysses_bytes_per_elem", "zero3_torch_adamw_step_ns_per_param", "zero3_fused_adam_step_ns_per_param",
    "zero3_offload_step_ns_per_param",
    "zero3_offload_grads_ns_per_param"};

// A curve: a list of [x, y] pairs, x > 0 strictly increasing; y checked by `y_rule`.
using YRule = double (*)(const Scalar&, const Where&);

Curve parse_curve(const YAML::Node& n, const Where& w, YRule y_rule) {
  if (!n.IsSequence() || n.size() == 0)
    w.fail("must be a non-empty list of [x, y] points");
  Curve c;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const Where wi{w.file, fmt::format("{}[{}]", w.key, i), w.dir};
    const YAML::Node& pt = n[i];
    if (!pt.IsSequence() || pt.size() != 2) wi.fail("must be a point [x, y]");
    const double x = positive_number(scalar_of(pt[0], wi, "a number"), wi);
    const double y = y_rule(scalar_of(pt[1], wi, "a number"), wi);
    if (!c.points.empty() && x <= c.points.back().first)
      wi.fail(fmt::format("x must increase strictly (got {} after {})", number(x), number(c.points.back().first)));
    c.points.emplace_back(x, y);
  }
  return c;
}

std::vector<std::pair<std::string, Curve>> parse_attn_curves(const YAML::Node& n, const Where& w) {
  std::vector<std::pair<std::string, Curve>> out;
  for (const auto& [key, v] : map_items(n, w)) {
    const Where wk = w.child(key);
    AttnCurveKey k;  // <impl>[@d<D>.<causal|full>[.h<H_l>]] (sim/attn_key.hpp)
    if (!parse_attn_curve_key(key, k))
      wk.fail("must be <attn_implementation>[@d<head_dim>.<causal|full>[.h<heads_per_rank>]], e.g. "
              "ulysses_flash@d128.causal.h16");
    parse_choice(Scalar{std::string(k.impl), false}, wk, attn_implementations());
    out.emplace_back(key, parse_curve(v, wk, &fraction));
  }
  return out;
}

std::string curve_text(const Curve& c) {
  std::string out = "[";
  for (const auto& [x, y] : c.points) out += fmt::format("{}[{}, {}]", out.size() > 1 ? ", " : "", number(x), number(y));
  return out + "]";
}

}  // namespace

Calibration parse_calibration(const YAML::Node& n, const Where& w) {
  const auto items = map_items(n, w);
  reject_unknown(items, kCalibrationKeys, w);
  Calibration c;
  for (const auto& [k, v] : items) {
    const Where wk = w.child(k);
    const YAML::Node& node = v;  // clang 14 cannot capture a structured binding
    const auto num = [&](const char* what) { return scalar_of(node, wk, what); };
    if (k == "provenance") {
      c.provenance = parse_string(num("a text"), wk);
    } else if (k == "a2a_busbw_GBps" || k == "allgather_busbw_GBps" || k == "reduce_scatter_busbw_GBps") {
      auto& to = k == "a2a_busbw_GBps" ? c.a2a_busbw_GBps : k == "allgather_busbw_GBps" ? c.allgather_busbw_GBps
                                                                                       : c.reduce_scatter_busbw_GBps;
      for (const auto& [sp, curve] : map_items(v, wk)) {
        const Where ws = wk.child(sp);
        const std::int64_t P = parse_int(Scalar{sp, false}, ws, 2, INT64_MAX,
                                         k == "a2a_busbw_GBps" ? "an sp size >= 2 as the key" : "a number of ranks >= 2 as the key");
        to.emplace_back(P, parse_curve(curve, ws, &positive_number));
      }
    } else if (k == "a2a_alpha_us") {
      c.a2a_alpha_s = nonneg_number(num("a number"), wk) * kUs;
    } else if (k == "attn_fwd_eff") {
      c.attn_fwd_eff = parse_attn_curves(v, wk);
    } else if (k == "attn_bwd_eff") {
      c.attn_bwd_eff = parse_attn_curves(v, wk);
    } else if (k == "gemm_eff") {
      c.gemm_eff = parse_curve(v, wk, &fraction);
    } else if (k == "ulysses_gemm_eff") {
      for (const auto& [key, curve] : map_items(v, wk)) {
        const Where wg = wk.child(key);
        GemmPass p;
        std::int64_t N = 0, K = 0;
        if (!parse_gemm_curve_key(key, p, N, K)) wg.fail("must be <fwd|dgrad|wgrad|wgrad_acc>.<N>x<K>, e.g. fwd.4096x4096");
        c.ulysses_gemm_eff.emplace_back(key, parse_curve(curve, wg, &fraction));
      }
    } else if (k == "host_link_h2d_GBps") {
      c.host_link_h2d_GBps = positive_number(num("a number"), wk);
    } else if (k == "host_link_d2h_GBps") {
      c.host_link_d2h_GBps = positive_number(num("a number"), wk);
    } else if (k == "host_link_h2d_busy_GBps") {
      c.host_link_h2d_busy_GBps = positive_number(num("a number"), wk);
    } else if (k == "host_link_d2h_busy_GBps") {
      c.host_link_d2h_busy_GBps = positive_number(num("a number"), wk);
    } else if (k == "cuda_context_GiB") {
      c.cuda_context_bytes = gib_to_bytes(nonneg_gib(num("a number"), wk));
    } else if (k == "nccl_buffer_GiB") {
      c.nccl_buffer_bytes = gib_to_bytes(nonneg_gib(num("a number"), wk));
    } else if (k == "pytorch_context_GiB") {
      c.pytorch_context_bytes = gib_to_bytes(nonneg_gib(num("a number"), wk));
    } else if (k == "pytorch_nccl_buffer_GiB") {
      c.pytorch_nccl_buffer_bytes = gib_to_bytes(nonneg_gib(num("a number"), wk));
    } else if (k == "torch_adamw_ns_per_param") {
      c.torch_adamw_s_per_param = positive_number(num("a number"), wk) * 1e-9;
    } else if (k == "cpu_adam_ns_per_param") {
      c.cpu_adam_s_per_param = positive_number(num("a number"), wk) * 1e-9;
    } else if (k == "ulysses_host_adam_ns_per_param") {
      c.ulysses_host_adam_s_per_param = positive_number(num("a number"), wk) * 1e-9;
    } else if (k == "pytorch_host_logits_tile_ms") {
      c.pytorch_host_logits_tile_s = positive_number(num("a number"), wk) * 1e-3;
    } else if (k == "eager_bytes_per_elem" || k == "ulysses_bytes_per_elem") {
      auto& rates = k == "eager_bytes_per_elem" ? c.eager_bytes_per_elem : c.ulysses_bytes_per_elem;
      for (const auto& [op, rate] : map_items(v, wk)) {
        const Where wo = wk.child(op);
        parse_choice(Scalar{op, false}, wo, std::vector<std::string>(kEagerRateKeys.begin(), kEagerRateKeys.end()));
        const int i = eager_rate_index(op);
        rates[static_cast<std::size_t>(i)] = positive_number(scalar_of(rate, wo, "a number"), wo);
      }
    } else if (k == "zero3_torch_adamw_step_ns_per_param") {
      c.zero3_torch_adamw_step_s_per_param = positive_number(num("a number"), wk) * 1e-9;
    } else if (k == "zero3_fused_adam_step_ns_per_param") {
      c.zero3_fused_adam_step_s_per_param = positive_number(num("a number"), wk) * 1e-9;
    } else if (k == "zero3_offload_step_ns_per_param") {
      c.zero3_offload_step_s_per_param = positive_number(num("a number"), wk) * 1e-9;
    } else if (k == "zero3_offload_grads_ns_per_param") {
      c.zero3_offload_grads_s_per_param = positive_number(num("a number"), wk) * 1e-9;
    } else if (k == "pack_GBps") {
      c.pack_GBps = positive_number(num("a number"), wk);
    } else if (k == "a2a_idle_penalty_us") {
      c.a2a_idle_penalty_us = parse_curve(v, wk, &nonneg_number);
    } else if (k == "a2a_transport") {
      c.a2a_transport = parse_choice(num("a text"), wk, {"nccl", "p2p"});
    } else if (k == "a2a_alpha_per_tensor_us") {
      c.a2a_alpha_per_tensor_s = nonneg_number(num("a number"), wk) * kUs;
    } else if (k == "a2a_phase_GBps") {
      for (const auto& [key, curve] : map_items(v, wk)) {
        const Where wp = wk.child(key);
        std::string_view phase;
        std::int64_t P = 0;
        if (!parse_a2a_phase_key(key, phase, P))
          wp.fail("must be <a2a.qkv.fwd|a2a.out.fwd|a2a.out.bwd|a2a.qkv.bwd>@p<sp size >= 2>, e.g. a2a.qkv.fwd@p2");
        c.a2a_phase_GBps.emplace_back(key, parse_curve(curve, wp, &positive_number));
      }
    }
  }
  return c;
}

std::string calibration_yaml(const Calibration& c, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  std::string out;
  const auto line = [&](const std::string& k, const std::string& v) { out += fmt::format("{}{}: {}\n", pad, k, v); };
  if (!c.provenance.empty()) line("provenance", quote(c.provenance));
  for (const auto& [key, curves] : {std::pair{"a2a_busbw_GBps", &c.a2a_busbw_GBps}, std::pair{"allgather_busbw_GBps", &c.allgather_busbw_GBps},
                                    std::pair{"reduce_scatter_busbw_GBps", &c.reduce_scatter_busbw_GBps}}) {
    if (curves->empty()) continue;
    out += pad + key + ":\n";
    for (const auto& [P, curve] : *curves) out += fmt::format("{}  {}: {}\n", pad, P, curve_text(curve));
  }
  if (c.a2a_alpha_s >= 0) line("a2a_alpha_us", scaled(c.a2a_alpha_s, kUs));
  for (const auto& [key, curves] : {std::pair{"attn_fwd_eff", &c.attn_fwd_eff}, std::pair{"attn_bwd_eff", &c.attn_bwd_eff}}) {
    if (curves->empty()) continue;
    out += pad + key + ":\n";
    for (const auto& [impl, curve] : *curves) out += fmt::format("{}  {}: {}\n", pad, impl, curve_text(curve));
  }
  if (!c.gemm_eff.empty()) line("gemm_eff", curve_text(c.gemm_eff));
  if (!c.ulysses_gemm_eff.empty()) {
    out += pad + "ulysses_gemm_eff:\n";
    for (const auto& [key, curve] : c.ulysses_gemm_eff) out += fmt::format("{}  {}: {}\n", pad, key, curve_text(curve));
  }
  if (c.host_link_h2d_GBps > 0) line("host_link_h2d_GBps", number(c.host_link_h2d_GBps));
  if (c.host_link_d2h_GBps > 0) line("host_link_d2h_GBps", number(c.host_link_d2h_GBps));
  if (c.host_link_h2d_busy_GBps > 0) line("host_link_h2d_busy_GBps", number(c.host_link_h2d_busy_GBps));
  if (c.host_link_d2h_busy_GBps > 0) line("host_link_d2h_busy_GBps", number(c.host_link_d2h_busy_GBps));
  if (c.cuda_context_bytes >= 0) line("cuda_context_GiB", gib_text(c.cuda_context_bytes));
  if (c.nccl_buffer_bytes >= 0) line("nccl_buffer_GiB", gib_text(c.nccl_buffer_bytes));
  if (c.pytorch_context_bytes >= 0) line("pytorch_context_GiB", gib_text(c.pytorch_context_bytes));
  if (c.pytorch_nccl_buffer_bytes >= 0) line("pytorch_nccl_buffer_GiB", gib_text(c.pytorch_nccl_buffer_bytes));
  // seconds per parameter written in ns, exactly (scaled(): the text reads back to the same double)
  if (c.torch_adamw_s_per_param > 0) line("torch_adamw_ns_per_param", scaled(c.torch_adamw_s_per_param, 1e-9));
  if (c.cpu_adam_s_per_param > 0) line("cpu_adam_ns_per_param", scaled(c.cpu_adam_s_per_param, 1e-9));
  if (c.ulysses_host_adam_s_per_param > 0) line("ulysses_host_adam_ns_per_param", scaled(c.ulysses_host_adam_s_per_param, 1e-9));
  if (c.pytorch_host_logits_tile_s > 0) line("pytorch_host_logits_tile_ms", scaled(c.pytorch_host_logits_tile_s, 1e-3));
  for (const auto& [key, rates] : {std::pair{"eager_bytes_per_elem", &c.eager_bytes_per_elem},
                                   std::pair{"ulysses_bytes_per_elem", &c.ulysses_bytes_per_elem}}) {
    if (std::none_of(rates->begin(), rates->end(), [](double x) { return x > 0; })) continue;
    out += pad + key + ":\n";
    for (int i = 0; i < kEagerRates; ++i)
      if (const double x = (*rates)[static_cast<std::size_t>(i)]; x > 0)
        out += fmt::format("{}  {}: {}\n", pad, kEagerRateKeys[static_cast<std::size_t>(i)], number(x));
  }
  for (const auto& [key, v] : {std::pair{"zero3_torch_adamw_step_ns_per_param", c.zero3_torch_adamw_step_s_per_param},
                               std::pair{"zero3_fused_adam_step_ns_per_param", c.zero3_fused_adam_step_s_per_param},
                               std::pair{"zero3_offload_step_ns_per_param", c.zero3_offload_step_s_per_param},
                               std::pair{"zero3_offload_grads_ns_per_param", c.zero3_offload_grads_s_per_param}})
    if (v > 0) line(key, scaled(v, 1e-9));
  if (c.pack_GBps > 0) line("pack_GBps", number(c.pack_GBps));
  if (c.a2a_alpha_per_tensor_s >= 0) line("a2a_alpha_per_tensor_us", scaled(c.a2a_alpha_per_tensor_s, kUs));
  if (!c.a2a_transport.empty()) line("a2a_transport", c.a2a_transport);
  if (!c.a2a_idle_penalty_us.empty()) line("a2a_idle_penalty_us", curve_text(c.a2a_idle_penalty_us));
  if (!c.a2a_phase_GBps.empty()) {
    out += pad + "a2a_phase_GBps:\n";
    for (const auto& [key, curve] : c.a2a_phase_GBps) out += fmt::format("{}  {}: {}\n", pad, key, curve_text(curve));
  }
  return out;
}

}  // namespace ulysses

namespace ulysses {

std::string calibration_to_yaml(const Calibration& c) {
  const std::string body = calibration_yaml(c, 2);
  return body.empty() ? "calibrated: {}\n" : "calibrated:\n" + body;
}

}  // namespace ulysses
