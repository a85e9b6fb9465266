"""The ALST features as the worker applies them to an HF model: TiledMLP (DeepSpeed), tiled
logits + loss (DeepSpeed's TiledFusedLogitsLoss), the untiled HF loss, labels shifted before the
sequence is sharded, and the loss aggregated across SP ranks weighted by their valid tokens."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import dsconfig
from .phases import mark, timed

IGNORE = -100


def patch_tiled_mlp(mlp_class):
    """Replaces mlp_class.forward (before the model is built) by DeepSpeed's TiledMLP."""
    from deepspeed.runtime.sequence_parallel.ulysses_sp import TiledMLP

    def mlp_fn(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    def forward(self, x):
        shards = dsconfig.tiled_mlp_shards(x.shape[-2], x.shape[-1])
        if dist.is_initialized() and dist.get_world_size() > 1:  # every rank the same count
            t = torch.tensor(shards, device=x.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            shards = int(t.item())
        params = [self.down_proj.weight, self.gate_proj.weight, self.up_proj.weight]
        return TiledMLP.apply(mlp_fn, self, x, shards, params)

    mlp_class.forward = forward


def shift_labels(input_ids):
    """Labels for next-token prediction, shifted before sharding (what UlyssesSPDataLoaderAdapter
    does): position i holds token i+1; the last position is ignored."""
    lab = F.pad(input_ids, (0, 1), value=IGNORE)
    return lab[..., 1:].contiguous()


def loss_sum_and_tokens(model, hidden, labels, tiled, vocab, sync_first=False):
    """Sum of the token cross-entropies of this rank and its count of valid tokens.
    Phase 'logits.fwd' (tiled: the fused forward+backward runs here), 'logits.bwd' after. sync_first
    (calibrate's set-up only): the host waits for the GPU before the phase opens."""
    lm_head = model.lm_head
    tokens = (labels != IGNORE).sum()
    hidden = mark(hidden, "logits.bwd", opens=False)
    if sync_first:
        torch.cuda.synchronize()
    with timed("logits.fwd"):
        if tiled:
            from deepspeed.runtime.sequence_parallel.ulysses_sp import TiledFusedLogitsLoss

            def fn(head, x, y):
                logits = head(x).float()
                return F.cross_entropy(logits.view(-1, vocab), y.view(-1), ignore_index=IGNORE, reduction="sum")

            shards = dsconfig.tiled_logits_shards(hidden.shape[0], hidden.shape[1], vocab)
            loss = TiledFusedLogitsLoss.apply(fn, lm_head, hidden, labels, None, shards, [lm_head.weight], "sum")
        else:
            logits = lm_head(hidden)
            loss = F.cross_entropy(logits.float().view(-1, vocab), labels.view(-1), ignore_index=IGNORE,
                                   reduction="sum")
    return mark(loss, "logits.bwd", opens=True), tokens


def aggregate(loss_sum, tokens, sp_group):
    """Token-weighted mean over the SP ranks of one sequence (each rank sees a different slice,
    with a different number of valid tokens): sum of losses / sum of tokens, differentiable."""
    if sp_group is None:
        return loss_sum / tokens.clamp(min=1)
    import torch.distributed.nn.functional as dnf
    sums = dnf.all_gather(loss_sum, group=sp_group)
    counts = dnf.all_gather(tokens, group=sp_group)
    return sum(sums) / sum(counts).clamp(min=1)
