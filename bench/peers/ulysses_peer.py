#!/usr/bin/env python3
"""The peer to beat: a DeepSpeed-style Ulysses attention layer in PyTorch (ANCHORS.md).

Per layer, as DeepSpeed's _SeqAllToAll does it (batch first, B S H D):
  seq->head for q, k, v, one all_to_all_single each:
      x [B, S_l, H, D] -> reshape [B, S_l, P, H_l, D] -> permute(2,0,1,3,4).contiguous()
      -> all_to_all_single -> [P, B, S_l, H_l, D] -> permute(1,0,2,3,4).reshape [B, S, H_l, D]
  attention: F.scaled_dot_product_attention (flash or cuDNN backend), causal, enable_gqa
  head->seq for the output (the inverse), autograd mirrors every exchange in backward.

Run on the GPUs the CUDA backend used, in the same device call:
  torchrun --nproc_per_node 2 bench/peers/ulysses_peer.py --seq-len 32768 --heads 32 --kv-heads 8 --head-dim 128
Rank 0 prints one JSON line: times in ms (median over iterations of the max over ranks, CUDA
events), peak memory in GiB (2^30) per rank (max over ranks).
"""
import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def seq_to_head(x, group):
    """[B, S_l, H, D] -> [B, S, H/P, D]."""
    P = dist.get_world_size(group)
    B, S_l, H, D = x.shape
    t = x.reshape(B, S_l, P, H // P, D).permute(2, 0, 1, 3, 4).contiguous()
    out = torch.empty_like(t)
    dist.all_to_all_single(out, t, group=group)
    return out.permute(1, 0, 2, 3, 4).contiguous().reshape(B, P * S_l, H // P, D)


def head_to_seq(x, group):
    """[B, S, H_l, D] -> [B, S/P, H_l*P, D]."""
    P = dist.get_world_size(group)
    B, S, H_l, D = x.shape
    t = x.reshape(B, P, S // P, H_l, D).permute(1, 0, 2, 3, 4).contiguous()
    out = torch.empty_like(t)
    dist.all_to_all_single(out, t, group=group)
    return out.permute(1, 2, 0, 3, 4).contiguous().reshape(B, S // P, P * H_l, D)


class SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, to_heads, group):
        ctx.to_heads, ctx.group = to_heads, group
        return seq_to_head(x, group) if to_heads else head_to_seq(x, group)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        return (head_to_seq(g, ctx.group) if ctx.to_heads else seq_to_head(g, ctx.group)), None, None


def ulysses_layer(q, k, v, backend, group):
    qh = SeqAllToAll.apply(q, True, group)
    kh = SeqAllToAll.apply(k, True, group)
    vh = SeqAllToAll.apply(v, True, group)
    with sdpa_kernel(backend):
        o = F.scaled_dot_product_attention(qh.transpose(1, 2), kh.transpose(1, 2), vh.transpose(1, 2), is_causal=True,
                                           enable_gqa=qh.shape[2] != kh.shape[2])
    return SeqAllToAll.apply(o.transpose(1, 2).contiguous(), False, group)


def timed(fn, warmup, iters):
    """Median over iterations of the max over ranks, in ms."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + iters):
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            t = torch.tensor([start.elapsed_time(end)], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            times.append(t.item())
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq-len", type=int, default=32768)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--backends", default="flash,cudnn")
    a = ap.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    P, r = dist.get_world_size(), dist.get_rank()
    B, S, H, Hkv, D = a.batch, a.seq_len, a.heads, a.kv_heads, a.head_dim
    if H % P or Hkv % P or S % P:
        raise SystemExit(f"peer: heads {H}, kv heads {Hkv} and seq len {S} must divide by P={P}")
    S_l = S // P
    dev = torch.device("cuda", local_rank)
    gen = torch.Generator(device=dev).manual_seed(1234)  # same full tensors on every rank
    full_q = torch.randn(B, S, H, D, device=dev, dtype=torch.bfloat16, generator=gen)
    full_k = torch.randn(B, S, Hkv, D, device=dev, dtype=torch.bfloat16, generator=gen)
    full_v = torch.randn(B, S, Hkv, D, device=dev, dtype=torch.bfloat16, generator=gen)
    shard = slice(r * S_l, (r + 1) * S_l)
    q = full_q[:, shard].contiguous()
    k = full_k[:, shard].contiguous()
    v = full_v[:, shard].contiguous()
    dout = torch.randn(B, S_l, H, D, device=dev, dtype=torch.bfloat16, generator=gen)

    # validate the exchange: rank r must hold heads r*H/P.. of the full sequence
    qh = seq_to_head(q, None)
    ok = torch.equal(qh, full_q[:, :, r * (H // P):(r + 1) * (H // P)])
    ok_t = torch.tensor([0 if ok else 1], device=dev)
    dist.all_reduce(ok_t)
    del full_q, full_k, full_v, qh

    res = {"peer": "bench/peers/ulysses_peer.py", "P": P, "B": B, "S": S, "H": H, "H_kv": Hkv, "D": D,
           "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
           "device": torch.cuda.get_device_name(dev), "exchange_bit_exact": ok_t.item() == 0}
    res["exchange_q_ms"] = timed(lambda: seq_to_head(q, None), a.warmup, a.iters)
    res["exchange_qkv_ms"] = timed(lambda: (seq_to_head(q, None), seq_to_head(k, None), seq_to_head(v, None)),
                                   a.warmup, a.iters)
    names = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    for name in a.backends.split(","):
        be = names[name]
        ql, kl, vl = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
        try:
            with torch.no_grad():
                fwd = timed(lambda: ulysses_layer(ql, kl, vl, be, None), a.warmup, a.iters)

            def fwd_bwd():
                out = ulysses_layer(ql, kl, vl, be, None)
                out.backward(dout)

            torch.cuda.reset_peak_memory_stats(dev)
            fb = timed(fwd_bwd, a.warmup, a.iters)
            peak = torch.tensor([torch.cuda.max_memory_allocated(dev) / 2**30], device=dev)
            dist.all_reduce(peak, op=dist.ReduceOp.MAX)
            res[name] = {"fwd_ms": fwd, "fwd_bwd_ms": fb, "peak_GiB": peak.item()}
        except RuntimeError as e:  # a backend without a kernel for this shape
            res[name] = {"error": str(e).splitlines()[0][:200]}
    if r == 0:
        print(json.dumps(res), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
