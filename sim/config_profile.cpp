// Hardware profiles (profiles/*.yaml) and inline `profile:` maps. Format: docs/INPUTS.md.
// File keys carry their unit (hbm_GiB, bf16_dense_TFLOPs, a2a_alpha_us); the struct holds
// bytes, FLOP/s and seconds (core/units.hpp).
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "sim/config.hpp"
#include "sim/config_internal.hpp"

namespace ulysses {

namespace {

struct ProfileField {
  const char* key;
  void (*set)(HardwareProfile&, const Scalar&, const Where&);
  std::string (*get)(const HardwareProfile&);
};

const std::vector<ProfileField>& profile_fields() {
  using P = HardwareProfile;
  using S = Scalar;
  using W = Where;
  static const std::vector<ProfileField> fields = {
      {"name", [](P& p, const S& s, const W& w) { p.name = parse_string(s, w); }, [](const P& p) { return quote(p.name); }},
      {"gpu", [](P& p, const S& s, const W& w) { p.gpu = parse_string(s, w); }, [](const P& p) { return quote(p.gpu); }},
      {"hbm_GiB", [](P& p, const S& s, const W& w) { p.hbm_bytes = gib_to_bytes(positive_gib(s, w)); },
       [](const P& p) { return gib_text(p.hbm_bytes); }},
      {"bf16_dense_TFLOPs", [](P& p, const S& s, const W& w) { p.bf16_dense_flops = positive_number(s, w) * core::kTFLOP; },
       [](const P& p) { return scaled(p.bf16_dense_flops, core::kTFLOP); }},
      {"hbm_GBps", [](P& p, const S& s, const W& w) { p.hbm_GBps = positive_number(s, w); },
       [](const P& p) { return number(p.hbm_GBps); }},
      {"nvlink_GBps", [](P& p, const S& s, const W& w) { p.nvlink_GBps = positive_number(s, w); },
       [](const P& p) { return number(p.nvlink_GBps); }},
      {"gpus_per_node", [](P& p, const S& s, const W& w) { p.gpus_per_node = positive_int(s, w); },
       [](const P& p) { return std::to_string(p.gpus_per_node); }},
      {"host_ram_GiB", [](P& p, const S& s, const W& w) { p.host_ram_bytes = gib_to_bytes(positive_gib(s, w)); },
       [](const P& p) { return gib_text(p.host_ram_bytes); }},
      {"host_link_GBps", [](P& p, const S& s, const W& w) { p.host_link_GBps = positive_number(s, w); },
       [](const P& p) { return number(p.host_link_GBps); }},
      {"nic_GBps", [](P& p, const S& s, const W& w) { p.nic_GBps = positive_number(s, w); },
       [](const P& p) { return number(p.nic_GBps); }},
      {"attn_fwd_eff", [](P& p, const S& s, const W& w) { p.attn_fwd_eff = fraction(s, w); },
       [](const P& p) { return number(p.attn_fwd_eff); }},
      {"attn_bwd_eff", [](P& p, const S& s, const W& w) { p.attn_bwd_eff = fraction(s, w); },
       [](const P& p) { return number(p.attn_bwd_eff); }},
      {"gemm_eff", [](P& p, const S& s, const W& w) { p.gemm_eff = fraction(s, w); },
       [](const P& p) { return number(p.gemm_eff); }},
      {"a2a_link_eff", [](P& p, const S& s, const W& w) { p.a2a_link_eff = fraction(s, w); },
       [](const P& p) { return number(p.a2a_link_eff); }},
      {"a2a_alpha_us", [](P& p, const S& s, const W& w) { p.a2a_alpha_s = nonneg_number(s, w) * kUs; },
       [](const P& p) { return scaled(p.a2a_alpha_s, kUs); }},
      {"cuda_context_GiB", [](P& p, const S& s, const W& w) { p.cuda_context_bytes = gib_to_bytes(nonneg_gib(s, w)); },
       [](const P& p) { return gib_text(p.cuda_context_bytes); }},
      {"nccl_buffer_GiB", [](P& p, const S& s, const W& w) { p.nccl_buffer_bytes = gib_to_bytes(nonneg_gib(s, w)); },
       [](const P& p) { return gib_text(p.nccl_buffer_bytes); }},
  };
  return fields;
}

std::mutex cache_mutex;
std::map<std::string, std::pair<std::string, HardwareProfile>> cache;  // path -> (file text, parsed)

std::vector<std::string> measured_keys() {  // profile keys that carry a figure (all but name)
  std::vector<std::string> k(profile_keys().begin() + 1, profile_keys().end());
  return k;
}

void parse_sources(HardwareProfile& p, const YAML::Node& n, const Where& w) {
  const auto items = map_items(n, w);
  reject_unknown(items, measured_keys(), w);
  for (const auto& [k, v] : items) {
    const Where wk = w.child(k);
    const std::string text = parse_string(scalar_of(v, wk, "a text naming the source"), wk);
    if (text.empty()) wk.fail("must name a source (datasheet, measurement, or 'assumption: ...')");
    bool replaced = false;
    for (auto& [field, src] : p.sources)
      if (field == k) src = text, replaced = true;
    if (!replaced) p.sources.emplace_back(k, text);
  }
}

}  // namespace

const std::vector<std::string>& profile_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const auto& f : profile_fields()) k.push_back(f.key);
    return k;
  }();
  return keys;
}

bool set_profile_field(HardwareProfile& p, const std::string& key, const Scalar& s, const Where& w) {
  for (const auto& f : profile_fields())
    if (key == f.key) {
      f.set(p, s, w);
      return true;
    }
  return false;
}

HardwareProfile parse_profile(const YAML::Node& n, const Where& w, const std::string& default_name) {
  const auto items = map_items(n, w);
  std::vector<std::string> known = profile_keys();
  for (const char* extra : {"sources", "calibrated", "base"}) known.push_back(extra);
  reject_unknown(items, known, w);

  HardwareProfile p;
  bool from_base = false;
  for (const auto& [k, v] : items)
    if (k == "base") {
      p = profile_from_ref(scalar_of(v, w.child(k), "a profile preset name or path").text, w.child(k));
      from_base = true;
    }
  if (!from_base) {
    require_keys(items, measured_keys(), w);
    p.name = default_name;
  }
  for (const auto& [k, v] : items) {
    const Where wk = w.child(k);
    if (k == "base") continue;
    if (k == "sources") {
      parse_sources(p, v, wk);
    } else if (k == "calibrated") {
      p.calibrated = parse_calibration(v, wk);
      p.has_calibration = true;
    } else {
      set_profile_field(p, k, scalar_of(v, wk, "a scalar"), wk);
    }
  }
  return p;
}

HardwareProfile profile_from_ref(const std::string& name_or_path, const Where& w) {
  const std::string path = resolve(name_or_path, "profiles", "profile", w);
  const std::string text = read_text(path);  // cheap; parsing is what the cache saves
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    const auto it = cache.find(path);
    if (it != cache.end() && it->second.first == text) return it->second.second;
  }
  HardwareProfile p = parse_profile(parse_text(text, path), Where{path, "", dir_of(path)}, stem_of(path));
  std::lock_guard<std::mutex> lock(cache_mutex);
  cache[path] = {text, p};
  return p;
}

HardwareProfile profile_from_node(const YAML::Node& n, const Where& w) {
  if (n.IsMap()) return parse_profile(n, w, "inline");
  return profile_from_ref(scalar_of(n, w, "a profile preset name, a path or a map").text, w);
}

std::string profile_yaml(const HardwareProfile& p, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  std::string out;
  for (const auto& f : profile_fields()) out += fmt::format("{}{}: {}\n", pad, f.key, f.get(p));
  if (!p.sources.empty()) {
    out += pad + "sources:\n";
    for (const auto& [field, src] : p.sources) out += fmt::format("{}  {}: {}\n", pad, field, quote(src));
  }
  if (p.has_calibration) {
    const std::string cal = calibration_yaml(p.calibrated, indent + 2);
    out += pad + (cal.empty() ? "calibrated: {}\n" : "calibrated:\n" + cal);
  }
  return out;
}

HardwareProfile load_profile(const std::string& name_or_path) {
  return profile_from_ref(name_or_path, Where{"", "profile", ""});
}

std::string profile_file(const std::string& name_or_path, const std::string& key) {
  return resolve(name_or_path, "profiles", "profile", Where{"", key, ""});
}

}  // namespace ulysses
