# Measures what HF's eager LlamaRMSNorm and apply_rotary_pos_emb hold on a CUDA GPU, from
# torch.cuda.memory_allocated / max_memory_allocated (units: th = T*h*2 bytes, q = T*H*D*2).
# Usage: OUT=/tmp/probe python3 bench/probes/probe_rmsnorm_rope_memory.py  (needs torch + transformers)
# Results of 2026-11-30 (torch 2.11.0, transformers 5.17.0, H200) are in docs/MODEL.md "Known gaps".
import json, os, torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm, apply_rotary_pos_emb
import transformers
dev = "cuda"; h = 4096; T = 65536; th = T * h * 2
out = {"torch": torch.__version__, "transformers": transformers.__version__, "T": T, "h": h}
def mem(): torch.cuda.synchronize(); return torch.cuda.memory_allocated()
norm = LlamaRMSNorm(h).to(dev, torch.bfloat16)
x = torch.randn(1, T, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
b0 = mem(); y = norm(x); b1 = mem()
out["norm_fwd_new_over_th"] = (b1 - b0) / th  # output y + saved tensors
g = torch.randn_like(y); m0 = mem()
torch.cuda.reset_peak_memory_stats(); y.backward(g); pk = torch.cuda.max_memory_allocated()
out["norm_bwd_peak_above_start_over_th"] = (pk - m0) / th
out["norm_after_bwd_over_th"] = (mem() - m0) / th
del y, g; x.grad = None
# forward peak of the norm (no grad, as the first pass under checkpointing)
with torch.no_grad():
    m0 = mem(); torch.cuda.reset_peak_memory_stats(); y = norm(x); pk = torch.cuda.max_memory_allocated()
out["norm_nograd_fwd_peak_over_th"] = (pk - m0) / th
del y
# RoPE: q [1, 32, T, 128], k [1, 8, T, 128] bf16, cos/sin [1, T, 128]
q = torch.randn(1, 32, T, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
k = torch.randn(1, 8, T, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
cos = torch.randn(1, T, 128, device=dev, dtype=torch.bfloat16); sin = torch.randn_like(cos)
qb = q.numel() * 2
m0 = mem(); torch.cuda.reset_peak_memory_stats()
qe, ke = apply_rotary_pos_emb(q, k, cos, sin)
pk = torch.cuda.max_memory_allocated(); m1 = mem()
out["rope_fwd_peak_above_start_over_q"] = (pk - m0) / qb
out["rope_fwd_kept_over_q"] = (m1 - m0) / qb  # qe + ke (+ anything saved)
gq = torch.randn_like(qe); gk = torch.randn_like(ke); m0 = mem()
torch.cuda.reset_peak_memory_stats(); torch.autograd.backward([qe, ke], [gq, gk]); pk = torch.cuda.max_memory_allocated()
out["rope_bwd_peak_above_start_over_q"] = (pk - m0) / qb
os.makedirs(os.environ["OUT"], exist_ok=True)
json.dump(out, open(os.path.join(os.environ["OUT"], "probe.json"), "w"), indent=1)
print(json.dumps(out, indent=1))
