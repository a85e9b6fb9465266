"""Single ops of the PyTorch step, each timed in isolation (calibrate --backend deepspeed).

What the step model needs from the PyTorch process and cannot take from a datasheet:
  attention  the scenario's HF attention function (transformers' ALL_ATTENTION_FUNCTIONS[impl], the
             callable the model's layers call), forward and backward, on one rank's heads
             (q [1, H_l, S, D], k/v [1, KV_l, S, D] bf16, as HF passes them), per S;
  gemm       the decoder layer's and the lm_head's bf16 matmuls at one rank's token counts T, each of
             the three products of a linear layer (forward x W^T, input gradient dy W, weight
             gradient dy^T x) timed on its own: rows (M, N, K, seconds);
  adamw      torch.optim.AdamW.step (DeepSpeed's `torch_adam: true` optimizer) over one flat fp32
             partition of n parameters, as ZeRO keeps them: seconds per step;
  cpu_adam   DeepSpeedCPUAdam.step (optimizer offload) over n fp32 host parameters: seconds per step.
Times are medians of CUDA-event (or wall-clock, host ops) measurements after warm-up; the inputs are
random and every output is checked finite before a time counts.
"""
import math
import statistics
import time

import torch


def _median_cuda(fn, warmup=2, reps=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def _finite(t, what):
    if not torch.isfinite(t).all():
        raise RuntimeError(f"opbench: {what}: non-finite output")


class _Module(torch.nn.Module):
    """What HF's attention functions read from the attention module."""

    def __init__(self, groups):
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True


def attention(impl, heads, kv_heads, head_dim, seq_lens, causal=True):
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    fn = ALL_ATTENTION_FUNCTIONS[impl]
    mod = _Module(heads // kv_heads)
    mod.is_causal = causal
    rows = []
    for S in seq_lens:
        g = torch.Generator(device="cuda").manual_seed(S)
        q = torch.randn(1, heads, S, head_dim, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
        k = torch.randn(1, kv_heads, S, head_dim, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
        v = torch.randn(1, kv_heads, S, head_dim, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
        dout = torch.randn(1, S, heads, head_dim, device="cuda", dtype=torch.bfloat16, generator=g)

        def fwd():
            with torch.no_grad():
                return fn(mod, q, k, v, None, dropout=0.0, scaling=head_dim ** -0.5, is_causal=causal)[0]

        def fwd_bwd():
            out = fn(mod, q, k, v, None, dropout=0.0, scaling=head_dim ** -0.5, is_causal=causal)[0]
            torch.autograd.grad(out, (q, k, v), dout)

        _finite(fwd(), f"attention {impl} S={S}")
        t_f = _median_cuda(fwd)
        t_fb = _median_cuda(fwd_bwd)
        rows.append({"impl": impl, "S": S, "H": heads, "H_kv": kv_heads, "D": head_dim, "causal": causal,
                     "fwd_s": t_f, "bwd_s": max(t_fb - t_f, 0.0)})
        del q, k, v, dout
        torch.cuda.empty_cache()
    return rows


def gemm(shapes, tokens):
    """shapes: [(name, N, K)] of the linear layers (weight [N, K]); tokens: T values."""
    rows = []
    for T in tokens:
        for name, N, K in shapes:
            g = torch.Generator(device="cuda").manual_seed(T + N + K)
            x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16, generator=g)
            w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g) * K ** -0.5
            dy = torch.randn(T, N, device="cuda", dtype=torch.bfloat16, generator=g)
            for prod, (a, b), (M, n, k) in (("fwd", (x, w.t()), (T, N, K)), ("dgrad", (dy, w), (T, K, N)),
                                             ("wgrad", (dy.t(), x), (N, K, T))):
                _finite(a @ b, f"gemm {name}.{prod}")
                rows.append({"op": f"{name}.{prod}", "M": M, "N": n, "K": k, "s": _median_cuda(lambda: a @ b)})
            del x, w, dy
        torch.cuda.empty_cache()
    return rows


def adamw(n):
    p = torch.nn.Parameter(torch.randn(n, device="cuda", dtype=torch.float32))
    p.grad = torch.randn_like(p) * 1e-3
    opt = torch.optim.AdamW([p], lr=1e-5, weight_decay=0.01)
    t = _median_cuda(opt.step, warmup=2, reps=5)
    _finite(p.detach(), "adamw")
    impl = "fused" if opt.defaults.get("fused") else "foreach" if opt.defaults.get("foreach") is not False else "for-loop"
    del opt, p
    torch.cuda.empty_cache()
    return {"params": n, "s": t, "impl": f"torch.optim.AdamW ({impl} default)"}


def cpu_adam(n):
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    p = torch.nn.Parameter(torch.randn(n, dtype=torch.float32))
    p.grad = torch.randn_like(p) * 1e-3
    opt = DeepSpeedCPUAdam([p], lr=1e-5, weight_decay=0.01)
    opt.step()  # the first step allocates the states
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    _finite(p.detach(), "cpu_adam")
    threads = torch.get_num_threads()
    del opt, p
    return {"params": n, "s": statistics.median(times), "threads": threads}


def run(model, plan, seq_lens, adam_params, cpu_adam_params):
    """All of the above for one scenario; `model`/`plan` are the job's sections."""
    P = max(plan["sp_size"], 1)
    H, KV, D, h = model["heads"], model["kv_heads"], model["head_dim"], model["hidden"]
    F, V = model["ffn_hidden"], model["vocab"]
    kv_l = max(KV, P) // P
    out = {"attention": attention(plan["attn_implementation"], H // P, kv_l, D, seq_lens)}
    shapes = [("q", H * D, h), ("k", KV * D, h), ("v", KV * D, h), ("o", h, H * D),
              ("gate", F, h), ("up", F, h), ("down", h, F), ("lm_head", V, h)]
    tokens = sorted({max(S // P, 1) for S in seq_lens})
    # the lm_head at long T is what tiled logits avoid: its rows past 32K tokens add time, not points
    out["gemm"] = gemm([s for s in shapes if s[0] != "lm_head"], tokens) + gemm(shapes[-1:], [t for t in tokens if t <= 32768])
    if adam_params > 0:
        out["adamw"] = adamw(adam_params)
    if cpu_adam_params > 0:
        out["cpu_adam"] = cpu_adam(cpu_adam_params)
    if not all(math.isfinite(r["fwd_s"]) and r["fwd_s"] > 0 for r in out["attention"]):
        raise RuntimeError("opbench: an attention time is not positive")
    return out
