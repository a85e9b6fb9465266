# Peak memory of one HF LlamaDecoderLayer (Llama-3.1-8B shapes, bf16, sdpa attention, eager
# RMSNorm) forward + backward under torch.utils.checkpoint, in units of th = T*h*2 bytes, above
# the state before the forward (parameters, the layer input x). sp = 1, no TiledMLP.
# Usage: OUT=/tmp/probe python3 bench/probes/probe_llama_layer_memory.py
import json, os, torch, transformers
from torch.utils.checkpoint import checkpoint
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding
dev = "cuda"; T = int(os.environ.get("T", "32768")); h = 4096; th = T * h * 2
cfg = LlamaConfig(hidden_size=h, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                  head_dim=128, max_position_embeddings=T, rope_theta=500000.0)
cfg._attn_implementation = "sdpa"
layer = LlamaDecoderLayer(cfg, 0).to(dev, torch.bfloat16)
rot = LlamaRotaryEmbedding(cfg).to(dev)
out = {"torch": torch.__version__, "transformers": transformers.__version__, "T": T,
       "param_grads_over_th": sum(p.numel() * 2 for p in layer.parameters()) / th}  # bf16 grads appear in backward
def mem(): torch.cuda.synchronize(); return torch.cuda.memory_allocated()
for ckpt in (True, False):
    x = torch.randn(1, T, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(T, device=dev)[None]
    cos_sin = rot(x, pos)
    m0 = mem(); torch.cuda.reset_peak_memory_stats()
    f = lambda t: layer(t, position_embeddings=cos_sin, position_ids=pos)
    y = checkpoint(f, x, use_reentrant=False) if ckpt else f(x)
    y = y[0] if isinstance(y, tuple) else y
    fwd_peak = torch.cuda.max_memory_allocated() - m0; after_fwd = mem() - m0
    g = torch.randn_like(y); m1 = mem(); torch.cuda.reset_peak_memory_stats()
    y.backward(g)
    bwd_peak = torch.cuda.max_memory_allocated() - m1
    k = "ckpt" if ckpt else "nockpt"
    out[k] = {"fwd_peak_over_th": fwd_peak / th, "kept_after_fwd_over_th": after_fwd / th,
              "bwd_peak_above_start_over_th": bwd_peak / th,
              "bwd_peak_total_over_th_incl_kept_and_grad": (bwd_peak + m1 - m0) / th}
    del x, y, g, cos_sin; layer.zero_grad(set_to_none=True)
os.makedirs(os.environ["OUT"], exist_ok=True)
json.dump(out, open(os.path.join(os.environ["OUT"], "layer.json"), "w"), indent=1)
print(json.dumps(out, indent=1))
