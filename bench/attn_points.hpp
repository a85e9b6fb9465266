#pragma once
// The points of `ulysses bench attention --sweep | --quick | --points` (issue #5): one point is
// one GPU's local attention, B = 1, S full sequence, H query heads, H_kv kv heads, D head dim,
// causal or not. Header-only so the CPU tests (tests/cli/test_attn_points.cpp) call it directly.
//
//   --points S:H:HKV:D:CAUSAL[,...]   e.g. 32768:16:16:128:1,16384:32:8:64:0
//     S      integer 1 .. 4194304 (a K suffix multiplies by 1024: 32K = 32768)
//     H, HKV integers 1 .. 1024, H % HKV == 0 (GQA: q head h reads kv head h / (H/HKV))
//     D      64 or 128 (what the flash kernel supports)
//     CAUSAL 0 or 1
//   no point twice.
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.hpp"

namespace ulysses::bench {

struct AttnPoint {
  std::int64_t S = 0, H = 0, H_kv = 0, D = 0;
  bool causal = true;
  bool operator==(const AttnPoint&) const = default;
};

inline constexpr std::int64_t kAttnPointMaxSeq = 4194304;  // 4M: the largest S --points takes
inline constexpr std::int64_t kAttnPointMaxHeads = 1024;

// The issue's grid: S in {4K, 16K, 32K, 128K} x H in {16, 32} x H_kv in {H, 8} x D in {64, 128}
// x causal in {yes, no}: 64 points, in that (S-major) order.
inline std::vector<AttnPoint> attn_issue_grid() {
  std::vector<AttnPoint> g;
  for (std::int64_t S : {4096, 16384, 32768, 131072})
    for (std::int64_t H : {16, 32})
      for (std::int64_t H_kv : {H, std::int64_t{8}})
        for (std::int64_t D : {64, 128})
          for (bool causal : {true, false}) g.push_back({S, H, H_kv, D, causal});
  return g;
}

// --quick: S in {4K, 32K}, H = 16, H_kv in {16, 8}, D in {64, 128}, causal and not (16 points).
inline std::vector<AttnPoint> attn_quick_grid() {
  std::vector<AttnPoint> g;
  for (const AttnPoint& p : attn_issue_grid())
    if ((p.S == 4096 || p.S == 32768) && p.H == 16) g.push_back(p);
  return g;
}

namespace detail {

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur), cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// A decimal integer (with an optional K suffix when allow_k) in [lo, hi]; false otherwise.
inline bool parse_int(const std::string& s, std::int64_t lo, std::int64_t hi, bool allow_k, std::int64_t& out) {
  std::string digits = s;
  std::int64_t mult = 1;
  if (allow_k && !digits.empty() && (digits.back() == 'K' || digits.back() == 'k')) digits.pop_back(), mult = 1024;
  if (digits.empty() || digits.size() > 9) return false;
  std::int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  v *= mult;
  if (v < lo || v > hi) return false;
  out = v;
  return true;
}

}  // namespace detail

inline std::string attn_point_name(const AttnPoint& p) {
  return std::to_string(p.S) + ":" + std::to_string(p.H) + ":" + std::to_string(p.H_kv) + ":" + std::to_string(p.D) + ":" +
         (p.causal ? "1" : "0");
}

// Parses --points; InputError naming `flag`, the item and the rule on any bad input.
inline std::vector<AttnPoint> parse_attn_points(const std::string& text, const std::string& flag = "--points") {
  const std::string form = "each point is S:H:HKV:D:CAUSAL, e.g. 32768:16:16:128:1, points separated by commas";
  if (text.empty()) throw core::InputError("", flag, "is empty; " + form);
  std::vector<AttnPoint> out;
  const std::vector<std::string> items = detail::split(text, ',');
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    const std::string where = "point " + std::to_string(i + 1) + " '" + item + "'";
    const std::vector<std::string> f = detail::split(item, ':');
    if (f.size() != 5)
      throw core::InputError("", flag, where + " has " + std::to_string(item.empty() ? 0 : f.size()) + " fields, not 5; " + form);
    AttnPoint p;
    std::int64_t c = 0;
    if (!detail::parse_int(f[0], 1, kAttnPointMaxSeq, true, p.S))
      throw core::InputError("", flag, where + ": S must be an integer in 1.." + std::to_string(kAttnPointMaxSeq) + " (K suffix = x1024)");
    if (!detail::parse_int(f[1], 1, kAttnPointMaxHeads, false, p.H))
      throw core::InputError("", flag, where + ": H must be an integer in 1.." + std::to_string(kAttnPointMaxHeads));
    if (!detail::parse_int(f[2], 1, kAttnPointMaxHeads, false, p.H_kv))
      throw core::InputError("", flag, where + ": HKV must be an integer in 1.." + std::to_string(kAttnPointMaxHeads));
    if (p.H % p.H_kv != 0) throw core::InputError("", flag, where + ": H must be a multiple of HKV (GQA groups)");
    if (!detail::parse_int(f[3], 64, 128, false, p.D) || (p.D != 64 && p.D != 128))
      throw core::InputError("", flag, where + ": D must be 64 or 128 (the head dims of the flash kernel)");
    if (!detail::parse_int(f[4], 0, 1, false, c)) throw core::InputError("", flag, where + ": CAUSAL must be 0 or 1");
    p.causal = c == 1;
    for (const AttnPoint& q : out)
      if (q == p) throw core::InputError("", flag, where + " is given twice (" + attn_point_name(p) + ")");
    out.push_back(p);
  }
  return out;
}

}  // namespace ulysses::bench
