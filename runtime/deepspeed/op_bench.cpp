// Reading the worker's op bench ("ops" in a calibrate result) into OpBench, every value checked.
#include "runtime/deepspeed/op_bench.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace ulysses::runtime::deepspeed {
namespace {

using Json = nlohmann::ordered_json;

const Json& need(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw std::runtime_error(fmt::format("op bench: {}: missing '{}'", where, key));
  return j.at(key);
}

// A finite number at j[key], > 0 (or >= 0 with zero_ok).
double number_at(const Json& j, const char* key, const std::string& where, bool zero_ok = false) {
  const Json& v = need(j, key, where);
  const double x = v.is_number() ? v.get<double>() : -1;
  if (!v.is_number() || !std::isfinite(x) || x < 0 || (x == 0 && !zero_ok))
    throw std::runtime_error(fmt::format("op bench: {}.{}: must be a {} number", where, key, zero_ok ? "non-negative" : "positive"));
  return x;
}

double positive(const Json& j, const char* key, const std::string& where) { return number_at(j, key, where); }

}  // namespace

OpBench op_bench_of(const Json& ops) {
  OpBench b;
  const Json& attn = need(ops, "attention", "ops");
  if (!attn.is_array() || attn.empty()) throw std::runtime_error("op bench: ops.attention: must be a non-empty list");
  for (std::size_t i = 0; i < attn.size(); ++i) {
    const std::string w = fmt::format("ops.attention[{}]", i);
    const Json& r = attn[i];
    OpBench::Attention a;
    if (!need(r, "impl", w).is_string()) throw std::runtime_error(fmt::format("op bench: {}.impl: must be a string", w));
    a.impl = r.at("impl").get<std::string>();
    a.S = static_cast<std::int64_t>(positive(r, "S", w));
    a.H = static_cast<std::int64_t>(positive(r, "H", w));
    a.H_kv = static_cast<std::int64_t>(positive(r, "H_kv", w));
    a.D = static_cast<std::int64_t>(positive(r, "D", w));
    if (!need(r, "causal", w).is_boolean()) throw std::runtime_error(fmt::format("op bench: {}.causal: must be true or false", w));
    a.causal = r.at("causal").get<bool>();
    a.fwd_s = positive(r, "fwd_s", w);
    a.bwd_s = number_at(r, "bwd_s", w, true);
    b.attention.push_back(a);
  }
  const Json& gemm = need(ops, "gemm", "ops");
  if (!gemm.is_array()) throw std::runtime_error("op bench: ops.gemm: must be a list");
  for (std::size_t i = 0; i < gemm.size(); ++i) {
    const std::string w = fmt::format("ops.gemm[{}]", i);
    const Json& r = gemm[i];
    OpBench::Gemm g;
    if (!need(r, "op", w).is_string()) throw std::runtime_error(fmt::format("op bench: {}.op: must be a string", w));
    g.op = r.at("op").get<std::string>();
    g.M = positive(r, "M", w), g.N = positive(r, "N", w), g.K = positive(r, "K", w), g.s = positive(r, "s", w);
    b.gemm.push_back(g);
  }
  if (ops.contains("eager")) {
    const Json& eager = ops.at("eager");
    if (!eager.is_array()) throw std::runtime_error("op bench: ops.eager: must be a list");
    for (std::size_t i = 0; i < eager.size(); ++i) {
      const std::string w = fmt::format("ops.eager[{}]", i);
      const Json& r = eager[i];
      OpBench::Eager e;
      if (!need(r, "op", w).is_string()) throw std::runtime_error(fmt::format("op bench: {}.op: must be a string", w));
      e.op = r.at("op").get<std::string>();
      e.T = positive(r, "T", w), e.elems = positive(r, "elems", w);
      e.extra_elems = number_at(r, "extra_elems", w, true);
      // a backward may take no time (an add passes its gradient through): >= 0; the fit checks its slope
      e.fwd_s = positive(r, "fwd_s", w), e.bwd_s = number_at(r, "bwd_s", w, true);
      b.eager.push_back(e);
    }
  }
  if (ops.contains("zero_step")) {
    const Json& zs = ops.at("zero_step");
    if (!zs.is_array()) throw std::runtime_error("op bench: ops.zero_step: must be a list");
    for (std::size_t i = 0; i < zs.size(); ++i) {
      const std::string w = fmt::format("ops.zero_step[{}]", i);
      const Json& r = zs[i];
      OpBench::ZeroStep z;
      for (const char* k : {"offload_optimizer", "torch_adam"})
        if (!need(r, k, w).is_boolean()) throw std::runtime_error(fmt::format("op bench: {}.{}: must be true or false", w, k));
      z.offload_optimizer = r.at("offload_optimizer").get<bool>();
      z.torch_adam = r.at("torch_adam").get<bool>();
      z.params = positive(r, "params", w), z.step_s = positive(r, "step_s", w), z.bwd_s = positive(r, "bwd_s", w);
      b.zero_step.push_back(z);
    }
  }
  if (ops.contains("adamw")) {
    const Json& a = ops.at("adamw");
    b.adamw_params = static_cast<std::int64_t>(positive(a, "params", "ops.adamw"));
    b.adamw_s = positive(a, "s", "ops.adamw");
    b.adamw_impl = a.value("impl", "");
  }
  if (ops.contains("cpu_adam")) {
    const Json& a = ops.at("cpu_adam");
    b.cpu_adam_params = static_cast<std::int64_t>(positive(a, "params", "ops.cpu_adam"));
    b.cpu_adam_s = positive(a, "s", "ops.cpu_adam");
    b.cpu_adam_threads = static_cast<int>(a.value("threads", 0));
  }
  return b;
}

}  // namespace ulysses::runtime::deepspeed
