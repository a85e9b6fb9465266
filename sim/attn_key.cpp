#include "sim/attn_key.hpp"

#include <charconv>

namespace ulysses {
namespace {

// Reads a positive integer at the start of s; advances s past it.
bool read_int(std::string_view& s, std::int64_t& v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data() || v <= 0) return false;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return true;
}

bool eat(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

}  // namespace

bool parse_attn_curve_key(std::string_view key, AttnCurveKey& out) {
  out = AttnCurveKey{};
  const std::size_t at = key.find('@');
  out.impl = key.substr(0, at);
  if (out.impl.empty()) return false;
  if (at == std::string_view::npos) return true;
  std::string_view s = key.substr(at + 1);
  if (!eat(s, "d") || !read_int(s, out.D)) return false;
  if (eat(s, ".causal")) out.causal = 1;
  else if (eat(s, ".full")) out.causal = 0;
  else return false;
  if (s.empty()) return true;
  if (eat(s, ".kv")) return read_int(s, out.kv_local) && s.empty();
  return eat(s, ".h") && read_int(s, out.h_local) && s.empty();
}

bool parse_a2a_phase_key(std::string_view key, std::string_view& phase, std::int64_t& P) {
  const std::size_t at = key.find('@');
  if (at == std::string_view::npos) return false;
  phase = key.substr(0, at);
  if (phase != "a2a.qkv.fwd" && phase != "a2a.out.fwd" && phase != "a2a.out.bwd" && phase != "a2a.qkv.bwd") return false;
  std::string_view s = key.substr(at + 1);
  return eat(s, "p") && read_int(s, P) && P >= 2 && s.empty();
}

}  // namespace ulysses
