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
  cpu_adam   DeepSpeedCPUAdam.step (optimizer offload) over n fp32 host parameters: seconds per step;
  zero_step  DeepSpeed ZeRO-3's engine.step() and engine.backward() on a stack of Linear layers of
             about as many parameters, the optimizer on the GPU (torch AdamW, FusedAdam) and
             offloaded (see zero_step);
  eager      the elementwise passes of the HF decoder layer that no GEMM or attention holds, each
             on its own, forward and backward, at one rank's token counts T: the model family's
             RMSNorm over [T, h] (input/post-attention/final norm) and over [T, H, D] (Qwen3's
             q/k norm), apply_rotary_pos_emb on q [1, H, T, D] and k [1, H_kv, T, D] (views of
             [1, T, H, D] as the attention module makes them), the residual add over [T, h], the
             MLP's act_fn(gate) * up over [T, F], and the token embedding (forward: gather [T, h];
             backward: the dense gradient [V, h]), and the loss cross_entropy(logits.float()) over
             [T, V] (T <= 16Ki): rows (op, elems, extra_elems, fwd_s, bwd_s).
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


def _fwd_bwd(make, what):
    """(forward s, backward s) of f(*inputs) (one tensor or a tuple of them): the forward with
    autograd recording (as in training), backward = (forward + backward) - forward, gradients of
    every input that requires them."""
    inputs, f = make()
    outs = f(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    for o in outs:
        _finite(o, what)
    douts = [torch.randn_like(o) for o in outs]
    wrt = [t for t in inputs if t.requires_grad]

    def fwd():
        return f(*inputs)

    def fwd_bwd():
        o = f(*inputs)
        torch.autograd.grad(o if isinstance(o, tuple) else (o,), wrt, douts)

    t_f = _median_cuda(fwd)
    t_fb = _median_cuda(fwd_bwd)
    return t_f, max(t_fb - t_f, 0.0)


def _family_module(model):
    import importlib
    from .hfconfig import family
    fam = family(model)
    return importlib.import_module(f"transformers.models.{fam}.modeling_{fam}"), fam


def eager(model, tokens):
    """The decoder layer's elementwise passes, each alone (see the header), per T in `tokens`."""
    mod, fam = _family_module(model)
    norm_cls = getattr(mod, {"llama": "LlamaRMSNorm", "qwen2": "Qwen2RMSNorm", "qwen3": "Qwen3RMSNorm"}[fam])
    H, KV, D, h, F, V = (model[k] for k in ("heads", "kv_heads", "head_dim", "hidden", "ffn_hidden", "vocab"))
    act = torch.nn.SiLU()  # hidden_act "silu" (hfconfig.py): ACT2FN["silu"]
    bf = dict(device="cuda", dtype=torch.bfloat16)
    rows = []
    for T in tokens:
        g = torch.Generator(device="cuda").manual_seed(T)

        def rnd(*shape, grad=True):
            return torch.randn(*shape, generator=g, **bf).requires_grad_(grad)

        def norm(width, lead):  # the weight's gradient too (a reduction over the tokens)
            m = norm_cls(width, eps=1e-6).to(**bf)
            return (rnd(1, *lead, width), m.weight), lambda x, w: m(x)

        def rope():
            q = rnd(1, T, H, D).transpose(1, 2)
            k = rnd(1, T, KV, D).transpose(1, 2)
            pos = torch.arange(T, device="cuda", dtype=torch.float32)
            # cos/sin of the positions (any base: the values do not change the time of the ops on them)
            inv = 1.0 / (500000.0 ** (torch.arange(0, D, 2, device="cuda", dtype=torch.float32) / D))
            emb = torch.cat((torch.outer(pos, inv),) * 2, dim=-1)[None]
            cos, sin = emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)
            return (q, k), lambda a, b: mod.apply_rotary_pos_emb(a, b, cos, sin)

        def add():
            return (rnd(1, T, h), rnd(1, T, h)), lambda a, b: a + b

        def swiglu():
            return (rnd(1, T, F), rnd(1, T, F)), lambda a, b: act(a) * b

        def loss():  # the worker's loss on its logits (features.py): cross_entropy of the fp32 logits
            x = rnd(1, T, V)
            y = torch.randint(0, V, (T,), device="cuda", generator=g)
            return (x,), lambda a: torch.nn.functional.cross_entropy(a.float().view(-1, V), y, reduction="sum")

        def embed():
            m = torch.nn.Embedding(V, h, **bf)
            ids = torch.randint(0, V, (1, T), device="cuda", generator=g)
            return (m.weight,), lambda w: torch.nn.functional.embedding(ids, w)

        for op, make, elems, extra in (("rmsnorm", lambda: norm(h, (T,)), T * h, 0),
                                       ("headnorm", lambda: norm(D, (T, H)), T * H * D, 0),
                                       ("rope", rope, T * (H + KV) * D, 0),
                                       ("add", add, T * h, 0),
                                       ("swiglu", swiglu, T * F, 0),
                                       ("embed", embed, T * h, V * h), ("loss", loss, T * V, 0)):
            if op == "loss" and T > 16384:
                continue  # [T, V] logits in bf16 + fp32 + gradient: 10 B per logit; 2 points suffice
            f, b = _fwd_bwd(make, f"eager {op} T={T}")
            rows.append({"op": op, "T": T, "elems": elems, "extra_elems": extra, "fwd_s": f, "bwd_s": b})
        torch.cuda.empty_cache()
    return rows


def zero_step(plan, hidden, layers, tokens, iters=3):
    """DeepSpeed ZeRO-3 around the optimizer, on a stack of `layers` bias-free bf16 Linear(hidden,
    hidden) (n = layers * hidden^2 parameters, one rank): engine.step() (the step's own passes and
    the optimizer: the plan's on the GPU, DeepSpeedCPUAdam with offload_optimizer) and
    engine.backward() (with offload: the gradient partitions' copies to the host), wall-clock with
    the device synchronized, medians after one warm-up; on the GPU with torch AdamW and with DeepSpeed's
    FusedAdam (optimizer.params.torch_adam true / false; FusedAdam JIT-builds on first use), then offloaded."""
    import gc

    import deepspeed
    from . import dsconfig
    rows = []
    for offload, torch_adam in ((False, True), (False, False), (True, False)):
        p = dict(plan, zero_stage=3, offload_optimizer=offload, offload_params=False, sp_size=1,
                 dp_replicate_size=1, dp_shard_size=1, micro_batch_size=1, torch_adam=torch_adam)
        model = torch.nn.Sequential(*[torch.nn.Linear(hidden, hidden, bias=False) for _ in range(layers)])
        model = model.to(torch.bfloat16)
        n = sum(t.numel() for t in model.parameters())
        eng, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                       config=dsconfig.deepspeed_config(p))
        g = torch.Generator(device="cuda").manual_seed(hidden + layers)
        x = torch.randn(1, tokens, hidden, device="cuda", dtype=torch.bfloat16, generator=g)
        bwd, step = [], []
        for i in range(iters + 1):
            loss = eng(x).float().pow(2).mean()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            eng.backward(loss)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            eng.step()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            if i:
                bwd.append(t1 - t0)
                step.append(t2 - t1)
            if not math.isfinite(float(loss)):
                raise RuntimeError("opbench: zero_step: non-finite loss")
        rows.append({"offload_optimizer": offload, "params": n, "torch_adam": bool(p["torch_adam"]) and not offload,
                     "step_s": statistics.median(step), "bwd_s": statistics.median(bwd)})
        eng.destroy()
        del eng, model, x
        gc.collect()
        torch.cuda.empty_cache()
    return rows


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
    out["eager"] = eager(model, tokens)
    if adam_params > 0:
        out["adamw"] = adamw(adam_params)
    if cpu_adam_params > 0:
        out["cpu_adam"] = cpu_adam(cpu_adam_params)
        # the whole ZeRO-3 step around it, on the GPU and offloaded, over as many parameters
        out["zero_step"] = zero_step(plan, 4096, max(cpu_adam_params // 4096 ** 2, 1), 4096)
    if not all(math.isfinite(r["fwd_s"]) and r["fwd_s"] > 0 for r in out["attention"]):
        raise RuntimeError("opbench: an attention time is not positive")
    return out
