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

std::string string_at(const Json& j, const char* key, const std::string& where) {
  if (!need(j, key, where).is_string()) throw std::runtime_error(fmt::format("op bench: {}.{}: must be a string", where, key));
  return j.at(key).get<std::string>();
}

bool bool_at(const Json& j, const char* key, const std::string& where) {
  if (!need(j, key, where).is_boolean()) throw std::runtime_error(fmt::format("op bench: {}.{}: must be true or false", where, key));
  return j.at(key).get<bool>();
}

// Each row of the list ops[key] read by `row(json, "ops.<key>[i]")` into `out`. An absent optional
// list leaves `out` empty; a present one must be a list (non-empty when `non_empty`).
template <class T, class Row>
void rows(const Json& ops, const char* key, bool required, bool non_empty, std::vector<T>& out, Row row) {
  if (!required && !ops.contains(key)) return;
  const Json& list = need(ops, key, "ops");
  if (!list.is_array() || (non_empty && list.empty()))
    throw std::runtime_error(fmt::format("op bench: ops.{}: must be a {}list", key, non_empty ? "non-empty " : ""));
  for (std::size_t i = 0; i < list.size(); ++i) out.push_back(row(list[i], fmt::format("ops.{}[{}]", key, i)));
}

}  // namespace

OpBench op_bench_of(const Json& ops) {
  OpBench b;
  rows(ops, "attention", true, true, b.attention, [](const Json& r, const std::string& w) {
    OpBench::Attention a;
    a.impl = string_at(r, "impl", w);
    a.S = static_cast<std::int64_t>(positive(r, "S", w));
    a.H = static_cast<std::int64_t>(positive(r, "H", w));
    a.H_kv = static_cast<std::int64_t>(positive(r, "H_kv", w));
    a.D = static_cast<std::int64_t>(positive(r, "D", w));
    a.causal = bool_at(r, "causal", w);
    a.fwd_s = positive(r, "fwd_s", w);
    a.bwd_s = number_at(r, "bwd_s", w, true);
    return a;
  });
  rows(ops, "gemm", true, false, b.gemm, [](const Json& r, const std::string& w) {
    OpBench::Gemm g;
    g.op = string_at(r, "op", w);
    g.M = positive(r, "M", w), g.N = positive(r, "N", w), g.K = positive(r, "K", w), g.s = positive(r, "s", w);
    return g;
  });
  rows(ops, "eager", false, false, b.eager, [](const Json& r, const std::string& w) {
    OpBench::Eager e;
    e.op = string_at(r, "op", w);
    e.T = positive(r, "T", w), e.elems = positive(r, "elems", w);
    e.extra_elems = number_at(r, "extra_elems", w, true);
    // a backward may take no time (an add passes its gradient through): >= 0; the fit checks its slope
    e.fwd_s = positive(r, "fwd_s", w), e.bwd_s = number_at(r, "bwd_s", w, true);
    return e;
  });
  rows(ops, "zero_step", false, false, b.zero_step, [](const Json& r, const std::string& w) {
    OpBench::ZeroStep z;
    z.offload_optimizer = bool_at(r, "offload_optimizer", w);
    z.torch_adam = bool_at(r, "torch_adam", w);
    z.params = positive(r, "params", w), z.step_s = positive(r, "step_s", w), z.bwd_s = positive(r, "bwd_s", w);
    return z;
  });
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
