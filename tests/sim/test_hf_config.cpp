// Hugging Face config.json as --model / `model:`: real configs of each family parse to their published shape,
// the six presets' configs give the presets' architecture, and every refusal names the file and the key.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/model.hpp"

namespace fs = std::filesystem;
using namespace ulysses;

namespace {

std::string hf(const std::string& model) { return std::string(ULYSSES_SOURCE_DIR) + "/tests/data/hf/" + model + "/config.json"; }

fs::path temp_dir() {
  static std::atomic<int> counter{0};
  const fs::path d = fs::temp_directory_path() / ("ulysses_test_hf_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::create_directories(d);
  return d;
}

std::string write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
  return path.string();
}

// A minimal Llama config with `extra` (JSON members, each starting with a comma) appended.
std::string llama(const std::string& extra) {
  return R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64,
             "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100)" + extra + "}";
}

// The InputError of loading `text` as a config.json: "file|key|rule".
std::string refusal(const std::string& text) {
  const std::string path = write(temp_dir() / "m" / "config.json", text);
  try {
    load_model(path);
  } catch (const core::InputError& e) {
    CHECK(e.file() == path);
    return e.key() + "|" + e.rule();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("each preset's config.json gives the preset's architecture", "[hf]") {
  for (const char* name : {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-4b", "qwen3-8b", "qwen3-32b"}) {
    INFO(name);
    const ModelSpec a = load_model(name), b = load_model(hf(name));
    CHECK(b.layers == a.layers);
    CHECK(b.hidden == a.hidden);
    CHECK(b.heads == a.heads);
    CHECK(b.kv_heads == a.kv_heads);
    CHECK(b.head_dim == a.head_dim);
    CHECK(b.ffn_hidden == a.ffn_hidden);
    CHECK(b.vocab == a.vocab);
    CHECK(b.tied_embeddings == a.tied_embeddings);
    CHECK(b.qk_norm == a.qk_norm);
    CHECK(b.qkv_bias == a.qkv_bias);
    CHECK(b.rms_norm_eps == a.rms_norm_eps);
    CHECK(b.rope_theta == a.rope_theta);
    CHECK(b.note.empty());
    CHECK(b.source == hf(name));
    CHECK(total_params(b) == total_params(a));
  }
}

TEST_CASE("each supported family parses to its published shape", "[hf]") {
  struct Case {
    const char* dir;
    std::int64_t L, h, H, H_kv, D, F, V;
    bool tied, qk_norm, qkv_bias;
    double published_params;  // model card; 0 = not checked
    const char* note;         // expected in ModelSpec::note ("" = none)
  };
  // Numbers from the model cards / config.json pages (tests/data/hf/*/SOURCE.md).
  const Case cases[] = {
      {"llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, false, false, false, 6.74e9, ""},
      {"mistral-7b-v0.3", 32, 4096, 32, 8, 128, 14336, 32768, false, false, false, 7.25e9, ""},
      {"qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, false, false, true, 7.62e9, ""},
      {"gemma-2-9b", 42, 3584, 16, 8, 256, 14336, 256000, true, false, false, 9.24e9, "21 of 42 layers attend within a sliding window of 4096 tokens"},
      // Gemma 3 12B's published 12.2B includes the ~0.4B SigLIP vision tower, which ulysses does not model
      {"gemma-3-12b-it", 48, 3840, 16, 8, 256, 15360, 262208, true, true, false, 0, "40 of 48 layers attend within a sliding window of 1024 tokens"},
      {"phi-3-mini-4k-instruct", 32, 3072, 32, 32, 96, 8192, 32064, false, false, false, 3.82e9, "32 of 32 layers attend within a sliding window of 2047 tokens"},
  };
  for (const auto& c : cases) {
    INFO(c.dir);
    const ModelSpec m = load_model(hf(c.dir));
    CHECK(m.layers == c.L);
    CHECK(m.hidden == c.h);
    CHECK(m.heads == c.H);
    CHECK(m.kv_heads == c.H_kv);
    CHECK(m.head_dim == c.D);
    CHECK(m.ffn_hidden == c.F);
    CHECK(m.vocab == c.V);
    CHECK(m.tied_embeddings == c.tied);
    CHECK(m.qk_norm == c.qk_norm);
    CHECK(m.qkv_bias == c.qkv_bias);
    if (c.published_params > 0) CHECK(static_cast<double>(total_params(m)) == Approx(c.published_params).epsilon(0.01));
    if (std::string(c.note).empty()) CHECK(m.note.empty());
    else CHECK_THAT(m.note, Catch::Contains(c.note) && Catch::Contains("costed as full causal attention"));
  }
  // a folder holding config.json names it too; the name comes from the folder
  const ModelSpec f = load_model(std::string(ULYSSES_SOURCE_DIR) + "/tests/data/hf/qwen2.5-7b");
  CHECK(f.hidden == 3584);
  CHECK(f.name == "qwen2.5-7b");
  CHECK(load_model(hf("llama-2-7b")).name == "llama-2-7b");
  CHECK(load_model(hf("gemma-3-12b-it")).name == "gemma-3-12b-it");
  const fs::path d = temp_dir();
  CHECK(load_model(write(d / "Meta-Llama-3.1-8B" / "config.json", llama(""))).name == "llama-Meta-Llama-3.1-8B");
}

TEST_CASE("config.json keys left out take transformers' per-family defaults", "[hf]") {
  const fs::path d = temp_dir();
  // Llama: num_key_value_heads -> num_attention_heads, head_dim -> hidden / heads, untied
  ModelSpec m = load_model(write(d / "a" / "config.json", llama("")));
  CHECK(m.kv_heads == 4);
  CHECK(m.head_dim == 16);
  CHECK_FALSE(m.tied_embeddings);
  // Qwen3: head_dim 128; Gemma 2: tied, head_dim 256; Qwen2: q/k/v bias whatever attention_bias says
  const std::string core = R"("num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128)";
  m = load_model(write(d / "q3" / "config.json", "{\"model_type\": \"qwen3\", " + core + "}"));
  CHECK(m.head_dim == 128);
  CHECK(m.vocab == 151936);
  CHECK(m.qk_norm);
  m = load_model(write(d / "g2" / "config.json", "{\"model_type\": \"gemma2\", " + core + "}"));
  CHECK(m.tied_embeddings);
  CHECK(m.head_dim == 256);
  m = load_model(write(d / "q2" / "config.json", "{\"model_type\": \"qwen2\", \"attention_bias\": false, " + core + "}"));
  CHECK(m.qkv_bias);
  // Qwen2 sliding window only with use_sliding_window, on the layers from max_window_layers on
  m = load_model(write(d / "q2w" / "config.json",
                       "{\"model_type\": \"qwen2\", \"use_sliding_window\": true, \"sliding_window\": 512, \"max_window_layers\": 1, " + core + "}"));
  CHECK_THAT(m.note, Catch::Contains("1 of 2 layers"));
  // Mistral: sliding_window absent = transformers' 4096 on every layer; null = none
  m = load_model(write(d / "mi" / "config.json", "{\"model_type\": \"mistral\", " + core + "}"));
  CHECK_THAT(m.note, Catch::Contains("2 of 2 layers attend within a sliding window of 4096 tokens"));
  m = load_model(write(d / "mn" / "config.json", "{\"model_type\": \"mistral\", \"sliding_window\": null, " + core + "}"));
  CHECK(m.note.empty());
  // Gemma 3 multimodal: the language model under text_config, tied unless the top level says otherwise
  const std::string g3 = "{\"model_type\": \"gemma3\", \"text_config\": {" + core + "}";
  m = load_model(write(d / "g3" / "config.json", g3 + "}"));
  CHECK(m.tied_embeddings);
  CHECK(m.qk_norm);
  CHECK(m.vocab == 262208);
  CHECK_THAT(m.note, Catch::Contains("2 of 2 layers"));  // pattern 6: layer 5 would be the first global one
  CHECK_FALSE(load_model(write(d / "g3u" / "config.json", g3 + ", \"tie_word_embeddings\": false}")).tied_embeddings);
  // rope_scaling does not change shapes: accepted
  CHECK(load_model(write(d / "r" / "config.json", llama(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"))).layers == 2);
}

TEST_CASE("a scenario's model: key takes a config.json or its folder, relative to the scenario", "[hf]") {
  const fs::path d = temp_dir();
  write(d / "mymodel" / "config.json", llama(""));
  const std::string rest = "profile: h100-sxm-80gb\ngpus: 2\nplan: {sp_size: 2, seq_len: 1024}\n";
  CHECK(load_scenario(write(d / "a.yaml", "model: mymodel/config.json\n" + rest)).model.hidden == 64);
  CHECK(load_scenario(write(d / "b.yaml", "model: ./mymodel\n" + rest)).model.hidden == 64);
  CHECK(load_scenario(write(d / "c.yaml", "model: mymodel\n" + rest)).model.hidden == 64);  // a folder, no preset of that name
  CHECK(load_scenario(write(d / "e.yaml", "model: {base: mymodel/config.json, layers: 3}\n" + rest)).model.layers == 3);
  // a preset name wins over a folder of the same name
  fs::create_directories(d / "llama-3.1-8b");
  CHECK(load_scenario(write(d / "f.yaml", "model: llama-3.1-8b\n" + rest)).model.hidden == 4096);
  CHECK_THROWS_WITH(load_scenario(write(d / "g.yaml", "model: ./llama-3.1-8b\n" + rest)), Catch::Contains("holds no config.json"));
  CHECK_THROWS_WITH(load_scenario(write(d / "h.yaml", "model: nothere/config.json\n" + rest)),
                    Catch::Contains("model: model file not found: nothere/config.json"));
}

TEST_CASE("config.json refusals name the file and the key", "[hf]") {
  try {  // a real MoE config
    load_model(hf("mixtral-8x7b-v0.1"));
    FAIL("Mixtral accepted");
  } catch (const core::InputError& e) {
    CHECK(e.file() == hf("mixtral-8x7b-v0.1"));
    CHECK(e.key() == "num_experts_per_tok");
    CHECK_THAT(e.rule(), Catch::StartsWith("2 marks a mixture-of-experts model"));
  }
  CHECK(refusal(llama(R"(, "num_local_experts": 8)")).rfind("num_local_experts|8 marks a mixture-of-experts", 0) == 0);
  CHECK(refusal(llama(R"(, "moe_intermediate_size": 768)")).rfind("moe_intermediate_size|", 0) == 0);
  CHECK(refusal(llama(R"(, "kv_lora_rank": 512)")).rfind("kv_lora_rank|512 marks multi-head latent attention", 0) == 0);
  CHECK(refusal(llama(R"(, "num_experts": 0)")) == "accepted");  // zero experts: dense
  CHECK(refusal(R"({"model_type": "gpt2", "n_layer": 12})").rfind("model_type|'gpt2' is not supported (supported: llama, mistral", 0) == 0);
  CHECK(refusal(R"({"n_layer": 12})").rfind("model_type|missing", 0) == 0);
  CHECK(refusal(R"({"model_type": "llama", "architectures": ["LlamaForSequenceClassification"]})")
            .rfind("architectures|\"LlamaForSequenceClassification\" is not supported", 0) == 0);
  CHECK(refusal(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128})") ==
        "num_hidden_layers|missing required key");
  CHECK(refusal(R"({"model_type": "llama", "num_hidden_layers": null, "hidden_size": 64})") == "num_hidden_layers|missing required key");
  CHECK(refusal(llama(R"(, "num_key_value_heads": 2.5)")) == "num_key_value_heads|must be a positive integer, at most 16384 (got 2.5)");
  CHECK(refusal(llama(R"(, "head_dim": "16")")) == "head_dim|must be a positive integer, at most 4096 (got the string \"16\")");
  CHECK(refusal(llama(R"(, "num_key_value_heads": 3)")).rfind("num_key_value_heads|must divide num_attention_heads", 0) == 0);
  CHECK(refusal(llama(R"(, "tie_word_embeddings": "no")")).rfind("tie_word_embeddings|must be true or false", 0) == 0);
  CHECK(refusal(llama(R"(, "mlp_bias": true)")).rfind("mlp_bias|true is not supported", 0) == 0);
  CHECK(refusal(llama(R"(, "layer_types": ["full_attention"])")).rfind("layer_types|must list one attention type per layer", 0) == 0);
  CHECK(refusal(R"({"model_type": "gemma3"})").rfind("text_config|must be a map", 0) == 0);
  CHECK(refusal("{\"model_type\": \"llama\",").rfind("byte ", 0) == 0);
  CHECK(refusal("[1, 2]").rfind("(top level)|must be a JSON object", 0) == 0);
  CHECK(refusal(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                        "intermediate_size": 128, "vocab_size": 99999999999})").rfind("vocab_size|must be a positive integer, at most", 0) == 0);
  CHECK(refusal(llama(R"(, "vocab_size": 10)")) == "vocab_size|given twice");
  CHECK(refusal(llama(R"(, "rms_norm_eps": 0)")).rfind("rms_norm_eps|must be in (0, 1)", 0) == 0);
  CHECK(refusal(llama(R"(, "rope_parameters": {"rope_theta": "big"})")).rfind("rope_parameters.rope_theta|", 0) == 0);
  // transformers 5 writes the RoPE base into rope_parameters
  const fs::path d = temp_dir();
  const ModelSpec m = load_model(write(d / "r" / "config.json", llama(R"(, "rope_parameters": {"rope_type": "default", "rope_theta": 250000.0})")));
  CHECK(m.rope_theta == 250000.0);
  CHECK(m.rms_norm_eps == 0);  // not given: the runtimes take norm_eps_of's rule
}

TEST_CASE("the worker's config.json of a model (hfconfig.py) reads back as that model", "[hf]") {
  // runtime/deepspeed/ulysses_worker/hfconfig.py builds the HF config the deepspeed backend trains: the
  // two mappings (ModelSpec -> config.json there, config.json -> ModelSpec here) must be inverse.
  const fs::path d = temp_dir();
  const std::string script = write(d / "dump.py", "import json, sys\nsys.path.insert(0, sys.argv[1])\n"
                                                  "from ulysses_worker import hfconfig\n"
                                                  "m = json.load(open(sys.argv[2]))\n"
                                                  "json.dump(hfconfig.config_dict(m, 4096, 'sdpa'), open(sys.argv[3], 'w'))\n");
  std::vector<ModelSpec> models;
  for (const char* name : {"llama-3.1-8b", "qwen3-4b", "qwen3-32b"}) models.push_back(load_model(name));
  ModelSpec biased = load_model("llama-3.1-8b");  // q/k/v biases: the worker's qwen2 family
  biased.qkv_bias = true;
  models.push_back(biased);
  for (std::size_t i = 0; i < models.size(); ++i) {
    const ModelSpec& m = models[i];
    INFO(m.name << " qkv_bias " << m.qkv_bias);
    const std::string in = write(d / fmt::format("m{}.json", i),
                                 fmt::format(R"({{"layers": {}, "hidden": {}, "heads": {}, "kv_heads": {}, "head_dim": {}, "ffn_hidden": {},
                                              "vocab": {}, "tied_embeddings": {}, "qk_norm": {}, "qkv_bias": {},
                                              "rms_norm_eps": {}, "rope_theta": {}}})",
                                             m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_hidden, m.vocab,
                                             m.tied_embeddings, m.qk_norm, m.qkv_bias, norm_eps_of(m), rope_theta_of(m)));
    const fs::path out = d / fmt::format("w{}", i) / "config.json";
    fs::create_directories(out.parent_path());
    const std::string cmd = "python3 '" + script + "' '" + ULYSSES_SOURCE_DIR + "/runtime/deepspeed' '" + in + "' '" + out.string() + "'";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const ModelSpec b = load_model(out.string());
    CHECK(b.layers == m.layers);
    CHECK(b.hidden == m.hidden);
    CHECK(b.heads == m.heads);
    CHECK(b.kv_heads == m.kv_heads);
    CHECK(b.head_dim == m.head_dim);
    CHECK(b.ffn_hidden == m.ffn_hidden);
    CHECK(b.vocab == m.vocab);
    CHECK(b.tied_embeddings == m.tied_embeddings);
    CHECK(b.qk_norm == m.qk_norm);
    CHECK(b.qkv_bias == m.qkv_bias);
    CHECK(b.rms_norm_eps == m.rms_norm_eps);  // the presets state both
    CHECK(b.rope_theta == m.rope_theta);
    CHECK(b.note.empty());
  }
}
