"""Phase clock: exclusive GPU time, host time, NVTX ranges and memory per phase of one training step.

Every boundary (push or pop of a phase) records one CUDA event on the current stream and the host's
clock (time.perf_counter) and, in the memory step, reads the caching allocator's counters. The time between two consecutive boundaries
is charged to the phase on top of the stack at that moment ("other" when the stack is empty), so
nested phases (a ZeRO gather inside a projection's backward) are exclusive and the phases of a
step sum to the step. The host clock is charged the same way: the host time between two boundaries
(issuing the phase's work, plus any wait for the GPU inside it) goes to the same phase (both clocks
read at the same boundaries: a host-paced phase shows host ~ GPU, and host > GPU may be a wait inside
it for earlier GPU work; the host sum ends before the final synchronize). Names are the step
model's (sim/timing.cpp), suffixed by the pass: '.fwd', '.recompute' (a forward during backward:
activation checkpointing), '.bwd'.
"""
import time

import torch

from . import accounting
from .accounting import OTHER


class PhaseClock:
    def __init__(self):
        self.enabled = False
        self.in_backward = False
        self.track_memory = False   # the memory step: allocator counters at every boundary
        self.annotate = False       # the traced step: profiler user annotations (CUPTI attribution)
        self._stack = []            # [name, annotation handle]
        self._events = []           # (event, name charged for the segment that ends here)
        self._host = []             # (host seconds from the step's start, name charged), one per event
        self._mem = {}              # name -> {"start": max allocated at a push, "peak": , "peak_reserved": }
        self._peak = 0
        self._peak_reserved = 0
        self._peak_at = ""

    # ---- step control ----
    def begin_step(self, track_memory=False, annotate=False):
        self.enabled, self.track_memory, self.annotate = True, track_memory, annotate
        self.in_backward = False
        self._stack, self._events, self._host, self._mem = [], [], [], {}
        self._peak = self._peak_reserved = 0
        self._peak_at = ""
        if track_memory:
            torch.cuda.reset_peak_memory_stats()
        self._t0 = time.perf_counter()
        self._boundary(None)

    def _boundaries(self):
        t0 = self._events[0][0]
        return [(t0.elapsed_time(e) * 1e-3, name) for e, name in self._events]

    def host_totals(self):
        """The last step's host seconds per phase (call after end_step)."""
        return accounting.totals(self._host)

    def timeline(self):
        """The last step's segments [(phase charged, start s, duration s)] (call after end_step)."""
        return accounting.segments(self._boundaries())

    def end_step(self):
        """Synchronizes; returns (phase -> seconds, step seconds (GPU events), wall seconds)."""
        while self._stack:
            self.pop(self._stack[-1][0])
        self._boundary(None)
        torch.cuda.synchronize()
        wall = time.perf_counter() - self._t0
        self.enabled = False
        b = self._boundaries()
        return accounting.totals(b), b[-1][0], wall

    def memory(self):
        return {"phases": self._mem, "peak_allocated": self._peak, "peak_reserved": self._peak_reserved,
                "peak_at": self._peak_at}

    # ---- boundaries ----
    def _top(self):
        return self._stack[-1][0] if self._stack else None

    def _boundary(self, charged):
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self._events.append((ev, charged))
        self._host.append((time.perf_counter() - self._t0, charged))
        if self.track_memory:
            name = charged or OTHER
            peak = torch.cuda.max_memory_allocated()
            peak_r = torch.cuda.max_memory_reserved()
            m = self._mem.setdefault(name, {"start": 0, "peak": 0, "peak_reserved": 0})
            m["peak"] = max(m["peak"], peak)
            m["peak_reserved"] = max(m["peak_reserved"], peak_r)
            if peak > self._peak:
                self._peak, self._peak_at = peak, name
            self._peak_reserved = max(self._peak_reserved, peak_r)
            torch.cuda.reset_peak_memory_stats()

    def push(self, name):
        if not self.enabled:
            return
        self._boundary(self._top())
        if self.track_memory:
            m = self._mem.setdefault(name, {"start": 0, "peak": 0, "peak_reserved": 0})
            m["start"] = max(m["start"], torch.cuda.memory_allocated())
        handle = None
        if self.annotate:
            handle = torch.ops.profiler._record_function_enter_new(name, None)
        torch.cuda.nvtx.range_push(name)
        self._stack.append([name, handle])

    def pop(self, name):
        if not self.enabled:
            return
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == name:
                break
        else:
            return  # not open (e.g. a backward boundary of a tensor that had no forward push)
        self._boundary(self._top())
        _, handle = self._stack.pop(i)
        torch.cuda.nvtx.range_pop()
        if handle is not None:
            torch.ops.profiler._record_function_exit._RecordFunction(handle)


CLOCK = PhaseClock()


def forward_name(base):
    """'<base>.fwd', or '<base>.recompute' when the forward runs inside the backward (checkpointing)."""
    return f"{base}.{'recompute' if CLOCK.in_backward else 'fwd'}"


class _Boundary(torch.autograd.Function):
    """Identity in forward; in backward opens (opens=True) or closes the named backward phase."""

    @staticmethod
    def forward(ctx, x, name, opens):
        ctx.name, ctx.opens = name, opens
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        if ctx.opens:
            CLOCK.push(ctx.name)
        else:
            CLOCK.pop(ctx.name)
        return g, None, None


def mark(x, name, opens):
    if CLOCK.enabled and torch.is_tensor(x) and x.requires_grad and torch.is_grad_enabled():
        return _Boundary.apply(x, name, opens)
    return x


def _first_tensor(args, kwargs):
    for i, a in enumerate(args):
        if torch.is_tensor(a):
            return ("arg", i)
    for k in ("hidden_states", "x", "input"):
        if torch.is_tensor(kwargs.get(k)):
            return ("kw", k)
    return None


def instrument(module, base):
    """Forward pre/post hooks: '<base>.fwd|recompute' as a phase; the backward of the module's
    output opens '<base>.bwd', the backward reaching its input closes it."""

    def pre(mod, args, kwargs):
        if not CLOCK.enabled:
            return None
        CLOCK.push(forward_name(base))
        where = _first_tensor(args, kwargs)
        if where is None:
            return None
        if where[0] == "arg":
            args = list(args)
            args[where[1]] = mark(args[where[1]], f"{base}.bwd", opens=False)
            return tuple(args), kwargs
        kwargs = dict(kwargs)
        kwargs[where[1]] = mark(kwargs[where[1]], f"{base}.bwd", opens=False)
        return args, kwargs

    def post(mod, args, kwargs, out=None):
        if not CLOCK.enabled:
            return None
        CLOCK.pop(forward_name(base))
        if torch.is_tensor(out):
            return mark(out, f"{base}.bwd", opens=True)
        if isinstance(out, tuple) and out and torch.is_tensor(out[0]):
            return (mark(out[0], f"{base}.bwd", opens=True),) + tuple(out[1:])
        return None

    module.register_forward_pre_hook(pre, with_kwargs=True)
    # always_call: torch's non-reentrant checkpoint stops a recompute early by raising through the
    # module (torch/utils/checkpoint.py _StopRecomputationError); the phase must close all the same
    module.register_forward_hook(post, with_kwargs=True, always_call=True)


def wrap_function(fn, base):
    """The same for a function whose first three tensor arguments are q, k, v (attention)."""

    def wrapped(module, q, k, v, *args, **kwargs):
        if not CLOCK.enabled:
            return fn(module, q, k, v, *args, **kwargs)
        name = forward_name(base)
        CLOCK.push(name)
        q, k, v = (mark(t, f"{base}.bwd", opens=False) for t in (q, k, v))
        try:
            out = fn(module, q, k, v, *args, **kwargs)
        finally:
            CLOCK.pop(name)
        if isinstance(out, tuple):
            return (mark(out[0], f"{base}.bwd", opens=True),) + tuple(out[1:])
        return mark(out, f"{base}.bwd", opens=True)

    return wrapped


def wrap_marked(owner, attr, base):
    """owner.attr as a phase '<base>.fwd|recompute' with its backward '<base>.bwd' opened by the
    gradients of its tensor outputs and closed when they reach its tensor inputs (DeepSpeed's
    Ulysses exchanges, nested inside the attention's range: exclusive time)."""
    orig = getattr(owner, attr)

    def wrapped(self, *args):
        if not CLOCK.enabled:
            return orig(self, *args)
        name = forward_name(base)
        CLOCK.push(name)
        try:
            args = tuple(mark(a, f"{base}.bwd", opens=False) for a in args)
            out = orig(self, *args)
        finally:
            CLOCK.pop(name)
        if isinstance(out, tuple):
            return tuple(mark(o, f"{base}.bwd", opens=True) for o in out)
        return mark(out, f"{base}.bwd", opens=True)

    setattr(owner, attr, wrapped)


class timed:
    """Context manager: one phase around a block of host code (optimizer step, loss)."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        CLOCK.push(self.name)

    def __exit__(self, *exc):
        CLOCK.pop(self.name)
        return False


def wrap_method(owner, attr, name):
    """Charges every call of owner.attr (a DeepSpeed internal) to `name`, nested exclusively."""
    orig = getattr(owner, attr)

    def wrapped(*a, **k):
        if not CLOCK.enabled:
            return orig(*a, **k)
        CLOCK.push(name)
        try:
            return orig(*a, **k)
        finally:
            CLOCK.pop(name)

    setattr(owner, attr, wrapped)
