// Model presets (scenarios/models/*.yaml), inline `model:` maps and Hugging Face config.json files
// (parsed by config_hf.cpp). Format: docs/INPUTS.md.
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "core/heads.hpp"
#include "sim/config.hpp"
#include "sim/fs_query.hpp"
#include "sim/model.hpp"
#include "sim/config_internal.hpp"

namespace ulysses {

namespace {

struct ModelField {
  const char* key;
  void (*set)(ModelSpec&, const Scalar&, const Where&);
  std::string (*get)(const ModelSpec&);
};

std::string b2s(bool b) { return b ? "true" : "false"; }

const std::vector<ModelField>& model_fields() {
  static const std::vector<ModelField> fields = {
      {"name", [](ModelSpec& m, const Scalar& s, const Where& w) { m.name = parse_string(s, w); },
       [](const ModelSpec& m) { return quote(m.name); }},
      {"layers", [](ModelSpec& m, const Scalar& s, const Where& w) { m.layers = positive_int(s, w); },
       [](const ModelSpec& m) { return std::to_string(m.layers); }},
      {"hidden", [](ModelSpec& m, const Scalar& s, const Where& w) { m.hidden = positive_int(s, w); },
       [](const ModelSpec& m) { return std::to_string(m.hidden); }},
      {"heads", [](ModelSpec& m, const Scalar& s, const Where& w) { m.heads = positive_int(s, w); },
       [](const ModelSpec& m) { return std::to_string(m.heads); }},
      {"kv_heads", [](ModelSpec& m, const Scalar& s, const Where& w) { m.kv_heads = positive_int(s, w); },
       [](const ModelSpec& m) { return std::to_string(m.kv_heads); }},
      {"head_dim", [](ModelSpec& m, const Scalar& s, const Where& w) { m.head_dim = positive_int(s, w); },
       [](const ModelSpec& m) { return std::to_string(m.head_dim); }},
      {"ffn_hidden", [](ModelSpec& m, const Scalar& s, const Where& w) { m.ffn_hidden = positive_int(s, w); },
       [](const ModelSpec& m) { return std::to_string(m.ffn_hidden); }},
      {"vocab", [](ModelSpec& m, const Scalar& s, const Where& w) { m.vocab = positive_int(s, w); },
       [](const ModelSpec& m) { return std::to_string(m.vocab); }},
      {"tied_embeddings", [](ModelSpec& m, const Scalar& s, const Where& w) { m.tied_embeddings = parse_bool(s, w); },
       [](const ModelSpec& m) { return b2s(m.tied_embeddings); }},
      {"qk_norm", [](ModelSpec& m, const Scalar& s, const Where& w) { m.qk_norm = parse_bool(s, w); },
       [](const ModelSpec& m) { return b2s(m.qk_norm); }},
      {"qkv_bias", [](ModelSpec& m, const Scalar& s, const Where& w) { m.qkv_bias = parse_bool(s, w); },
       [](const ModelSpec& m) { return b2s(m.qkv_bias); }},
      {"rms_norm_eps",
       [](ModelSpec& m, const Scalar& s, const Where& w) { m.rms_norm_eps = parse_double(s, w, 0, true, 1, true, "in (0, 1)"); },
       [](const ModelSpec& m) { return m.rms_norm_eps > 0 ? fmt::format("{}", m.rms_norm_eps) : std::string(); }},
      {"rope_theta",
       [](ModelSpec& m, const Scalar& s, const Where& w) { m.rope_theta = parse_double(s, w, 0, true, 1e12, true, "in (0, 1e12)"); },
       [](const ModelSpec& m) { return m.rope_theta > 0 ? fmt::format("{}", m.rope_theta) : std::string(); }},
      {"published_params",
       [](ModelSpec& m, const Scalar& s, const Where& w) {
         // written as an integer or in scientific notation (8.03e9)
         const double v = parse_double(s, w, 0, false, 1e15, false, "a non-negative parameter count");
         m.published_params = static_cast<std::int64_t>(v);
       },
       [](const ModelSpec& m) { return std::to_string(m.published_params); }},
      {"source", [](ModelSpec& m, const Scalar& s, const Where& w) { m.source = parse_string(s, w); },
       [](const ModelSpec& m) { return quote(m.source); }},
  };
  return fields;
}

// Required in a full map (one without `base:`). head_dim defaults to hidden / heads (as HF does).
const std::vector<std::string> kRequired = {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"};

std::mutex cache_mutex;
std::map<std::string, std::pair<std::string, ModelSpec>> cache;  // path -> (file text, parsed)

}  // namespace

const std::vector<std::string>& model_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const auto& f : model_fields()) k.push_back(f.key);
    return k;
  }();
  return keys;
}

bool set_model_field(ModelSpec& m, const std::string& key, const Scalar& s, const Where& w) {
  for (const auto& f : model_fields())
    if (key == f.key) {
      f.set(m, s, w);
      return true;
    }
  return false;
}

ModelSpec parse_model(const YAML::Node& n, const Where& w, const std::string& default_name) {
  const auto items = map_items(n, w);
  std::vector<std::string> known = model_keys();
  known.push_back("base");
  reject_unknown(items, known, w);

  ModelSpec m;
  bool from_base = false, has_head_dim = false;
  for (const auto& [k, v] : items)
    if (k == "base") {
      m = model_from_ref(scalar_of(v, w.child(k), "a model preset name or path").text, w.child(k));
      from_base = true;
    }
  if (!from_base) {
    require_keys(items, kRequired, w);
    m.name = default_name;
  }
  for (const auto& [k, v] : items) {
    if (k == "base") continue;
    has_head_dim |= k == "head_dim";
    const Where wk = w.child(k);
    set_model_field(m, k, scalar_of(v, wk, "a scalar"), wk);
  }
  if (!from_base && !has_head_dim) {
    if (m.hidden % m.heads != 0)
      w.child("head_dim").fail(fmt::format("missing, and hidden ({}) is not divisible by heads ({})", m.hidden, m.heads));
    m.head_dim = m.hidden / m.heads;
  }
  if (!core::kv_heads_divide(m.heads, m.kv_heads))
    w.child("kv_heads").fail(fmt::format("must divide heads (heads {}, kv_heads {})", m.heads, m.kv_heads));
  return m;
}

namespace {

// A bare name that is no preset but a folder here (relative to w.dir first): its config.json.
std::string folder_config(const std::string& name, const Where& w) {
  namespace fs = std::filesystem;
  const bool here = path_is_dir(name) || (!w.dir.empty() && path_is_dir(fs::path(w.dir) / name));
  if (name.empty() || !here) return "";
  try {
    if (path_is_file(fs::path(repo_dir()) / "scenarios/models" / (name + ".yaml"))) return "";
  } catch (const core::InputError&) {  // no preset tree at all: the folder is what was meant
  }
  return hf_config_file("./" + name, w);
}

}  // namespace

ModelSpec model_from_ref(const std::string& name_or_path, const Where& w) {
  std::string hf = hf_config_file(name_or_path, w);
  if (hf.empty()) hf = folder_config(name_or_path, w);
  const std::string path = hf.empty() ? resolve(name_or_path, "scenarios/models", "model", w) : hf;
  const std::string text = read_text(path);  // cheap; parsing is what the cache saves
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    const auto it = cache.find(path);
    if (it != cache.end() && it->second.first == text) return it->second.second;
  }
  ModelSpec m = hf.empty() ? parse_model(parse_text(text, path), Where{path, "", dir_of(path)}, stem_of(path))
                           : parse_hf_config(text, path);
  std::lock_guard<std::mutex> lock(cache_mutex);
  cache[path] = {text, m};
  return m;
}

ModelSpec model_from_node(const YAML::Node& n, const Where& w) {
  if (n.IsMap()) return parse_model(n, w, "inline");
  return model_from_ref(scalar_of(n, w, "a model preset name, a path or a map").text, w);
}

std::string model_yaml(const ModelSpec& m, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  std::string out;
  for (const auto& f : model_fields())
    if (const std::string v = f.get(m); !v.empty()) out += fmt::format("{}{}: {}\n", pad, f.key, v);  // empty: not given

  return out;
}

ModelSpec load_model(const std::string& name_or_path) {
  return model_from_ref(name_or_path, Where{"", "model", ""});
}

}  // namespace ulysses
