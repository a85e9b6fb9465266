"""Activation checkpointing with the checkpoint (the layer input) kept in pinned host memory.

DeepSpeed has no such option; ArcticTraining adds it around torch's checkpoint. This is our own
equivalent, installed as each decoder layer's `_gradient_checkpointing_func` (transformers'
GradientCheckpointingLayer calls it as fn(partial(layer.__call__, **kwargs), hidden_states)):
- forward: run the layer without autograd, copy its input to a pinned host buffer on a copy
  stream (the compute stream does not wait), keep only the host copy;
- backward: copy it back (phase offload.ckpt.h2d), recompute the layer with autograd, backprop.
The pinned buffers are allocated once per layer (grown only when a longer sequence comes) and reused
every step (pinned_bytes reports them).
"""
import torch

from .phases import timed

_buffers = {}      # layer index -> pinned host tensor
_copy_stream = None


def pinned_bytes():
    return sum(b.numel() * b.element_size() for b in _buffers.values())


class _OffloadedCheckpoint(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, index, x):
        global _copy_stream
        with torch.no_grad():
            out = run(x)
        flat = _buffers.get(index)  # grown only: capacity probes run several lengths on one process
        if flat is None or flat.dtype != x.dtype or flat.numel() < x.numel():
            flat = torch.empty(x.numel(), dtype=x.dtype, pin_memory=True)
            _buffers[index] = flat
        buf = flat[:x.numel()].view(x.shape)
        if _copy_stream is None:
            _copy_stream = torch.cuda.Stream()
        with timed("offload.ckpt.d2h"):
            _copy_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(_copy_stream):
                buf.copy_(x, non_blocking=True)
                done = torch.cuda.Event()
                done.record()
            x.record_stream(_copy_stream)
        ctx.run, ctx.buf, ctx.done, ctx.x_requires_grad = run, buf, done, x.requires_grad
        return out

    @staticmethod
    def backward(ctx, grad):
        with timed("offload.ckpt.h2d"):
            torch.cuda.current_stream().wait_event(ctx.done)
            x = ctx.buf.to(torch.cuda.current_device(), non_blocking=True)
        x.requires_grad_(ctx.x_requires_grad)
        with torch.enable_grad():
            out = ctx.run(x)
        torch.autograd.backward(out, grad)
        return None, None, x.grad


def install(layers):
    """Makes every layer of `layers` (with gradient checkpointing enabled) offload its checkpoint."""
    for i, layer in enumerate(layers):
        def fn(run, hidden_states, _i=i):
            return _OffloadedCheckpoint.apply(run, _i, hidden_states)
        layer._gradient_checkpointing_func = fn
