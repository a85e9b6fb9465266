#!/usr/bin/env python3
"""PyTorch peers for the flash attention kernels: torch scaled_dot_product_attention with the
flash (FlashAttention-2) and cuDNN backends, in the kernels/attention.hpp layout ([B, S, H, D]
viewed as [B, H, S, D], no copies; GQA through enable_gqa, kv heads not expanded).

  attn_peer.py check DIR   for each DIR/<case>.bin written by `attn_check check --dump DIR`
                           (q, k, v, dout raw bf16): max abs error of PyTorch flash's o, lse,
                           dq, dk, dv against an fp64 reference computed here (math backend,
                           float64, on the GPU). One JSON line per case.
  attn_peer.py bench [--quick | --one S H HKV D CAUSAL]...
                           the same sweep as `attn_check bench` (or the given points): TFLOP/s of the flash
                           and cuDNN backends (4*S^2*H*D forward, half when causal, backward
                           2.5x). One JSON line per point and backend.
"""
import json
import math
import os
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"torch_flash": SDPBackend.FLASH_ATTENTION, "torch_cudnn": SDPBackend.CUDNN_ATTENTION}


def sdpa(q, k, v, causal, backend):
    """q [B,S,Hq,D], k/v [B,S,Hkv,D] -> o [B,S,Hq,D]"""
    gqa = q.shape[2] != k.shape[2]
    with sdpa_kernel(backend):
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=causal, enable_gqa=gqa)
    return o.transpose(1, 2)


def flash_lse(q, k, v, causal):
    """lse [B,Hq,S] of PyTorch's flash kernel (the private op returns it; kv expanded for GQA)"""
    rep = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(rep, dim=2) if rep > 1 else k
    v = v.repeat_interleave(rep, dim=2) if rep > 1 else v
    out = torch.ops.aten._scaled_dot_product_flash_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 0.0, causal, False,
        scale=1.0 / math.sqrt(q.shape[-1]))
    return out[1][:, :, : q.shape[1]].float()


def reference64(q, k, v, dout, causal):
    """fp64 o, lse, dq, dk, dv (math backend)"""
    q, k, v = (x.double().requires_grad_() for x in (q, k, v))
    rep = q.shape[2] // k.shape[2]
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(rep, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(rep, dim=1)
    s = (qh @ kh.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        S = q.shape[1]
        mask = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = (torch.softmax(s, dim=-1) @ vh).transpose(1, 2)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), dout.double())
    return o.detach(), lse.detach(), dq, dk, dv


def run_check(folder):
    pat = re.compile(r"B(\d+)_S(\d+)_Hq(\d+)_Hkv(\d+)_D(\d+)_c(\d)\.bin$")
    for name in sorted(os.listdir(folder)):
        m = pat.match(name)
        if not m:
            continue
        B, S, Hq, Hkv, D, c = (int(x) for x in m.groups())
        causal = bool(c)
        raw = torch.from_numpy(__import__("numpy").fromfile(os.path.join(folder, name), dtype="int16"))
        raw = raw.view(torch.bfloat16).cuda()
        nq, nkv = B * S * Hq * D, B * S * Hkv * D
        q = raw[:nq].view(B, S, Hq, D)
        k = raw[nq:nq + nkv].view(B, S, Hkv, D)
        v = raw[nq + nkv:nq + 2 * nkv].view(B, S, Hkv, D)
        dout = raw[nq + 2 * nkv:].view(B, S, Hq, D)
        ro, rl, rdq, rdk, rdv = reference64(q, k, v, dout, causal)
        qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))
        o = sdpa(qq, kk, vv, causal, SDPBackend.FLASH_ATTENTION)
        dq, dk, dv = torch.autograd.grad(o, (qq, kk, vv), dout)
        lse = flash_lse(q, k, v, causal)
        err = lambda a, b: (a.double() - b).abs().max().item()
        print(json.dumps({"kind": "check", "impl": "torch_flash", "case": name[:-4], "B": B, "S": S, "Hq": Hq,
                          "Hkv": Hkv, "D": D, "causal": causal, "err_o": err(o, ro), "err_lse": err(lse, rl),
                          "err_dq": err(dq, rdq), "err_dk": err(dk, rdk), "err_dv": err(dv, rdv)}), flush=True)


def bench_ms(fn, min_s):
    """one warm-up, then enough repetitions for min_s seconds (1 to 1000); mean ms. min_s of a few seconds holds
    the GPU at its power limit as a training step does (docs/STEP_POWER.md)"""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record(); fn(); e1.record(); e1.synchronize()
    warm = e0.elapsed_time(e1)
    reps = max(1, min(1000, int(1000.0 * min_s / max(warm, 1e-3))))
    e0.record()
    for _ in range(reps):
        fn()
    e1.record(); e1.synchronize()
    return e0.elapsed_time(e1) / reps


def sweep(quick):
    for S in (4096, 16384, 32768, 131072):
        for H in (16, 32):
            for Hkv in (H, 8):
                for D in (64, 128):
                    for causal in (True, False):
                        if S == 131072 and not causal:
                            continue
                        if quick and not (S == 32768 and H == 16):
                            continue
                        yield S, H, Hkv, D, causal


def run_bench(points, min_s):
    torch.manual_seed(0)
    for S, H, Hkv, D, causal in points:
        q = torch.randn(1, S, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(1, S, Hkv, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(1, S, Hkv, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        dout = torch.randn(1, S, H, D, device="cuda", dtype=torch.bfloat16)
        fwd_flop = 4.0 * S * S * H * D * (0.5 if causal else 1.0)
        for impl, backend in BACKENDS.items():
            rec = {"kind": "bench", "impl": impl, "B": 1, "S": S, "Hq": H, "Hkv": Hkv, "D": D, "causal": causal}
            try:
                with torch.no_grad():
                    fwd = bench_ms(lambda: sdpa(q, k, v, causal, backend), min_s)
                o = sdpa(q, k, v, causal, backend)
                bwd = bench_ms(lambda: torch.autograd.grad(o, (q, k, v), dout, retain_graph=True), min_s)
                del o
                rec.update(fwd_ms=round(fwd, 4), bwd_ms=round(bwd, 4), fwd_tflops=round(fwd_flop / fwd * 1e-9, 1),
                           bwd_tflops=round(2.5 * fwd_flop / bwd * 1e-9, 1))
            except RuntimeError as e:  # a backend that refuses the shape
                rec.update(error=str(e).splitlines()[0][:200])
            print(json.dumps(rec), flush=True)
        del q, k, v, dout
        torch.cuda.empty_cache()


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "check":
        run_check(args[1])
        return
    if args and args[0] == "bench":
        rest, points, min_s = args[1:], [], 0.2
        if len(rest) >= 2 and rest[0] == "--min-time-s":
            try:
                min_s = float(rest[1])
            except ValueError:
                min_s = -1.0
            if not 0 <= min_s <= 10:
                print(f"attn_peer.py: --min-time-s: must be in 0..10 seconds (got {rest[1]})", file=sys.stderr)
                sys.exit(2)
            rest = rest[2:]
        if rest == ["--quick"] or not rest:
            run_bench(list(sweep(rest == ["--quick"])), min_s)
            return
        while len(rest) >= 6 and rest[0] == "--one":
            S, H, Hkv, D, c = (int(x) for x in rest[1:6])
            points.append((S, H, Hkv, D, bool(c)))
            rest = rest[6:]
        if points and not rest:
            run_bench(points, min_s)
            return
    print("usage: attn_peer.py check DIR | bench [--min-time-s X] [--quick | --one S H HKV D CAUSAL ...]", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
