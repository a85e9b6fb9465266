"""A ulysses model preset as the Hugging Face config.json of its family (random weights are built
from it: nothing is downloaded). Families: Llama (no q/k norm), Qwen2 (qkv bias), Qwen3 (q/k norm).
"""


def family(model):
    if model["qk_norm"]:
        return "qwen3"
    if model["qkv_bias"]:
        return "qwen2"
    return "llama"


def config_dict(model, seq_len, attn_implementation):
    """The config.json keys (transformers names) for `model` (a job's model section)."""
    fam = family(model)
    d = {
        "model_type": fam,
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[fam]],
        "hidden_size": model["hidden"],
        "intermediate_size": model["ffn_hidden"],
        "num_hidden_layers": model["layers"],
        "num_attention_heads": model["heads"],
        "num_key_value_heads": model["kv_heads"],
        "head_dim": model["head_dim"],
        "vocab_size": model["vocab"],
        "tie_word_embeddings": model["tied_embeddings"],
        "max_position_embeddings": max(seq_len, 2048),
        "hidden_act": "silu",
        "rms_norm_eps": float(model["rms_norm_eps"]),
        "rope_theta": float(model["rope_theta"]),
        "attention_dropout": 0.0,
        "use_cache": False,
        "torch_dtype": "bfloat16",
        "_attn_implementation": attn_implementation,
    }
    if fam == "llama":
        d["attention_bias"] = False
        d["mlp_bias"] = False
    if fam == "qwen3":
        d["attention_bias"] = False
    return d
