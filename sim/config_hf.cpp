// Hugging Face config.json -> ModelSpec for the dense decoder families trained with Ulysses (docs/INPUTS.md).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/heads.hpp"
#include "sim/config_internal.hpp"
#include "sim/fs_query.hpp"

namespace ulysses {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What transformers (configuration_<family>.py, v5.17) does with a key the file leaves out; kHeads /
// kHiddenOverHeads: the value HF derives. attention_bias: the key is read (false = no bias key).
inline constexpr std::int64_t kHeads = -1, kHiddenOverHeads = -1;
struct Family {
  const char* model_type;
  std::vector<const char*> architectures;
  std::int64_t vocab, kv_heads, head_dim;
  bool tied;
  bool qkv_bias_always;  // Qwen2: bias on q, k, v whatever the file says
  bool attention_bias;   // reads attention_bias
  bool qk_norm;
  // sliding window: "all" (every layer when sliding_window is set), "qwen" (use_sliding_window, layers
  // from max_window_layers on), "every_2nd" (Gemma 2), "pattern" (Gemma 3, sliding_window_pattern)
  const char* window_rule;
  std::int64_t default_window;  // sliding_window when the key is absent (0: none)
};

const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"llama", {"LlamaForCausalLM"}, 32000, kHeads, kHiddenOverHeads, false, false, true, false, "none", 0},
      {"mistral", {"MistralForCausalLM"}, 32000, 8, kHiddenOverHeads, false, false, false, false, "all", 4096},
      {"qwen2", {"Qwen2ForCausalLM"}, 151936, 32, kHiddenOverHeads, false, true, false, false, "qwen", 4096},
      {"qwen3", {"Qwen3ForCausalLM"}, 151936, 32, 128, false, false, true, true, "qwen", 4096},
      {"gemma2", {"Gemma2ForCausalLM"}, 256000, 4, 256, true, false, true, false, "every_2nd", 4096},
      {"gemma3_text", {"Gemma3ForCausalLM"}, 262208, 4, 256, true, false, true, true, "pattern", 4096},
      {"phi3", {"Phi3ForCausalLM"}, 32064, kHeads, kHiddenOverHeads, false, false, false, false, "all", 0},
  };
  return f;
}

// Keys that mark a mixture-of-experts or multi-head-latent-attention model (refused when set).
bool is_moe_key(const std::string& k) {
  return k == "num_experts" || k == "num_local_experts" || k == "n_routed_experts" || k == "n_shared_experts" ||
         k == "num_experts_per_tok" || k.rfind("moe_", 0) == 0;
}
bool is_mla_key(const std::string& k) { return k == "kv_lora_rank" || k == "q_lora_rank"; }
bool is_set(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  return true;  // a string, list or map names something
}

std::string shown(const json& v) {
  if (v.is_object()) return "a map";
  if (v.is_array()) return "a list";
  return v.dump();
}

// A JSON value as the YAML parsers' Scalar: strings are quoted (so "8" is not a number).
Scalar scalar(const json& v, const Where& w, const std::string& expected) {
  if (v.is_object() || v.is_array()) w.fail(fmt::format("must be {} (got {})", expected, shown(v)));
  if (v.is_string()) return Scalar{v.get<std::string>(), true};
  return Scalar{v.dump(), false};
}

struct Reader {
  const json& obj;
  std::string file;
  std::string prefix;  // "text_config." for Gemma 3 multimodal files
  Where at(const std::string& key) const { return Where{file, prefix + key, ""}; }
  const json* get(const std::string& key) const {  // nullptr when absent or null (HF: the default)
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  std::int64_t integer(const std::string& key, std::int64_t max, std::int64_t dflt) const {
    const json* v = get(key);
    if (v == nullptr) {
      if (dflt > 0) return dflt;
      at(key).fail("missing required key");
    }
    return parse_int(scalar(*v, at(key), "a positive integer"), at(key), 1, max, fmt::format("a positive integer, at most {}", max));
  }
  bool boolean(const std::string& key, bool dflt) const {
    const json* v = get(key);
    return v == nullptr ? dflt : parse_bool(scalar(*v, at(key), "true or false"), at(key));
  }
  // a positive number below `below`; 0 when absent
  double positive(const std::string& key, double below) const {
    const json* v = get(key);
    return v == nullptr ? 0 : parse_double(scalar(*v, at(key), "a number"), at(key), 0, true, below, true, fmt::format("in (0, {})", below));
  }
};

std::int64_t windowed_layers(const Reader& r, const Family& f, std::int64_t layers, std::int64_t& window) {
  const json* types = r.get("layer_types");
  // sliding_window: null means no window (transformers keeps an explicit None); absent: the family default
  const bool sw_given = r.obj.contains("sliding_window");
  window = !sw_given ? f.default_window : r.get("sliding_window") == nullptr ? 0 : r.integer("sliding_window", INT64_MAX, 0);
  if (types != nullptr) {  // written by newer transformers: one entry per layer
    if (!types->is_array() || static_cast<std::int64_t>(types->size()) != layers)
      r.at("layer_types").fail(fmt::format("must list one attention type per layer ({} layers)", layers));
    std::int64_t n = 0;
    for (const auto& t : *types) {
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
        r.at("layer_types").fail(fmt::format("entries must be \"full_attention\" or \"sliding_attention\" (got {})", t.dump()));
      n += t == "sliding_attention";
    }
    return window > 0 ? n : 0;
  }
  const std::string rule = f.window_rule;
  if (window <= 0 || rule == "none") return 0;
  if (rule == "all") return layers;
  if (rule == "qwen") {
    if (!r.boolean("use_sliding_window", false)) return 0;
    return std::max<std::int64_t>(0, layers - r.integer("max_window_layers", kMaxLayers, 28));
  }
  const std::int64_t every = rule == "every_2nd" ? 2 : r.integer("sliding_window_pattern", kMaxLayers, 6);
  return layers - layers / every;  // layer i is global when (i + 1) % every == 0
}

std::string family_list() {
  std::vector<std::string> names;
  for (const auto& f : families()) names.push_back(f.model_type);
  names.push_back("gemma3");
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::string hf_config_file(const std::string& name_or_path, const Where& w) {
  if (name_or_path.find('/') == std::string::npos && fs::path(name_or_path).extension() != ".json") return "";
  const fs::path p(name_or_path);
  const bool json_file = p.extension() == ".json";
  std::vector<fs::path> candidates;
  if (p.is_relative() && !w.dir.empty()) candidates.push_back(fs::path(w.dir) / p);
  candidates.push_back(p);
  for (const auto& c : candidates) {
    if (json_file && path_is_file(c)) return c.string();
    if (!json_file && path_is_dir(c)) {
      if (path_is_file(c / "config.json")) return (c / "config.json").string();
      w.fail(fmt::format("model folder {} holds no config.json", c.string()));
    }
  }
  if (json_file) w.fail(fmt::format("model file not found: {}{}", name_or_path,
                                    p.is_relative() && !w.dir.empty() ? " (looked in " + w.dir + " and the current directory)" : ""));
  return "";
}

ModelSpec parse_hf_config(const std::string& text, const std::string& path) {
  json root;
  std::vector<std::set<std::string>> keys;  // per open object: a key given twice is refused, as in YAML
  std::string twice;
  const json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) keys.emplace_back();
    else if (ev == json::parse_event_t::object_end) keys.pop_back();
    else if (ev == json::parse_event_t::key && twice.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      twice = parsed.get<std::string>();
    return true;
  };
  try {
    root = json::parse(text, cb);
  } catch (const json::parse_error& e) {
    throw core::InputError(path, fmt::format("byte {}", e.byte), "JSON syntax error");
  }
  if (!twice.empty()) throw core::InputError(path, twice, "given twice");
  if (!root.is_object()) throw core::InputError(path, "(top level)", "must be a JSON object (a Hugging Face config.json)");

  // Gemma 3 multimodal checkpoints keep the language model under text_config.
  const auto mt = root.find("model_type");
  if (mt == root.end() || !mt->is_string())
    throw core::InputError(path, "model_type", fmt::format("missing or not a string (supported: {})", family_list()));
  std::string model_type = mt->get<std::string>();
  const json* obj = &root;
  std::string prefix;
  std::vector<std::string> archs = {"Gemma3ForConditionalGeneration"};
  if (model_type == "gemma3") {
    const auto tc = root.find("text_config");
    if (tc == root.end() || !tc->is_object()) throw core::InputError(path, "text_config", "must be a map (the language model of Gemma 3)");
    obj = &*tc;
    prefix = "text_config.";
  }
  // MoE and MLA first: their model_type is unsupported too, but this names why.
  for (const json* o : std::vector<const json*>{&root, obj})
    for (auto it = o->begin(); it != o->end(); ++it) {
      const std::string where = (o == &root ? "" : prefix) + it.key();
      if (is_moe_key(it.key()) && is_set(it.value()))
        throw core::InputError(path, where, fmt::format("{} marks a mixture-of-experts model: not supported (ulysses models dense decoders)", it.value().dump()));
      if (is_mla_key(it.key()) && is_set(it.value()))
        throw core::InputError(path, where, fmt::format("{} marks multi-head latent attention: not supported (ulysses models dense decoders)", it.value().dump()));
    }
  const std::string family_type = model_type == "gemma3" ? "gemma3_text" : model_type;
  const auto fam = std::find_if(families().begin(), families().end(), [&](const Family& f) { return family_type == f.model_type; });
  if (fam == families().end())
    throw core::InputError(path, "model_type", fmt::format("'{}' is not supported (supported: {})", model_type, family_list()));
  if (model_type != "gemma3") archs.assign(fam->architectures.begin(), fam->architectures.end());
  if (const auto a = root.find("architectures"); a != root.end() && !a->is_null()) {
    if (!a->is_array()) throw core::InputError(path, "architectures", "must be a list of class names");
    for (const auto& name : *a)
      if (!name.is_string() || std::find(archs.begin(), archs.end(), name.get<std::string>()) == archs.end())
        throw core::InputError(path, "architectures", fmt::format("{} is not supported for model_type {} (supported: {})", name.dump(), model_type, archs.front()));
  }

  const Reader r{*obj, path, prefix};
  if (r.boolean("mlp_bias", false)) r.at("mlp_bias").fail("true is not supported (the model has no MLP biases)");
  ModelSpec m;
  m.layers = r.integer("num_hidden_layers", kMaxLayers, 0);
  m.hidden = r.integer("hidden_size", kMaxHidden, 0);
  m.heads = r.integer("num_attention_heads", kMaxHeads, 0);
  m.ffn_hidden = r.integer("intermediate_size", kMaxFfn, 0);
  m.vocab = r.integer("vocab_size", kMaxVocab, fam->vocab);
  m.kv_heads = r.integer("num_key_value_heads", kMaxHeads, fam->kv_heads == kHeads ? m.heads : fam->kv_heads);
  if (fam->head_dim == kHiddenOverHeads && r.get("head_dim") == nullptr && m.hidden % m.heads != 0)
    r.at("head_dim").fail(fmt::format("missing, and hidden_size ({}) is not divisible by num_attention_heads ({})", m.hidden, m.heads));
  m.head_dim = r.integer("head_dim", kMaxHeadDim, fam->head_dim == kHiddenOverHeads ? m.hidden / m.heads : fam->head_dim);
  if (!core::kv_heads_divide(m.heads, m.kv_heads))
    r.at("num_key_value_heads").fail(fmt::format("must divide num_attention_heads (heads {}, kv_heads {})", m.heads, m.kv_heads));
  // Gemma 3 multimodal: the top-level key ties the language model's head (HF default true).
  const Reader top{root, path, ""};
  m.tied_embeddings = !prefix.empty() && top.get("tie_word_embeddings") != nullptr ? top.boolean("tie_word_embeddings", true)
                                                                                  : r.boolean("tie_word_embeddings", fam->tied);
  m.qk_norm = fam->qk_norm;
  m.qkv_bias = fam->qkv_bias_always || (fam->attention_bias && r.boolean("attention_bias", false));
  // numerics of the runtimes only; transformers 5 writes the RoPE base into rope_parameters
  m.rms_norm_eps = r.positive("rms_norm_eps", 1);
  m.rope_theta = r.positive("rope_theta", 1e12);
  if (const json* rp = r.get("rope_parameters"); m.rope_theta == 0 && rp != nullptr && rp->is_object())
    m.rope_theta = Reader{*rp, r.file, r.prefix + "rope_parameters."}.positive("rope_theta", 1e12);

  std::int64_t window = 0;
  const std::int64_t windowed = windowed_layers(r, *fam, m.layers, window);
  if (windowed > 0)
    m.note = fmt::format("{}: {} of {} layers attend within a sliding window of {} tokens; they are costed as full causal "
                         "attention (an upper bound on attention time; memory does not depend on the window)",
                         path, windowed, m.layers, window);

  // name: the folder holding config.json (or the file's stem), prefixed by model_type unless it starts with the family
  const fs::path abs = path_absolute(fs::path(path)).lexically_normal();
  std::string base = abs.filename() == "config.json" ? abs.parent_path().filename().string() : abs.stem().string();
  if (const json* n = top.get("_name_or_path"); base.empty() && n != nullptr && n->is_string())
    base = fs::path(n->get<std::string>()).filename().string();
  std::string squashed;  // lower-case letters and digits: "Gemma-3-12b" -> "gemma312b"
  for (unsigned char c : base)
    if (std::isalnum(c)) squashed += static_cast<char>(std::tolower(c));
  m.name = squashed.rfind(family_type.substr(0, family_type.find('_')), 0) == 0 ? base : model_type + "-" + base;
  m.source = path;
  return m;
}

}  // namespace ulysses
