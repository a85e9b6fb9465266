"""The plan of a job as DeepSpeed and Accelerate take it: the DeepSpeed config dict (key names of
DeepSpeed 0.19: deepspeed/runtime/zero/config.py, offload_config.py) and the ParallelismConfig
arguments (Accelerate 1.15: accelerate/parallelism_config.py, utils/dataclasses.py
DeepSpeedSequenceParallelConfig)."""


def deepspeed_config(plan):
    p = plan
    zero = {"stage": p["zero_stage"]}
    if p["zero_stage"] > 0:
        zero["reduce_bucket_size"] = int(p.get("reduce_bucket_size", 5e8))
    if p["offload_optimizer"]:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if p["offload_params"]:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    dp = p["dp_replicate_size"] * p["dp_shard_size"]
    return {
        # zero.Init reads this copy before Accelerate's prepare() fixes the batch size for SP: without
        # it DeepSpeed takes the whole world as data parallel (deepspeed/runtime/config.py 466-471)
        "sequence_parallel_size": p["sp_size"],
        "train_micro_batch_size_per_gpu": p["micro_batch_size"],
        "gradient_accumulation_steps": 1,
        "train_batch_size": p["micro_batch_size"] * dp,
        "bf16": {"enabled": True},
        "gradient_clipping": 1.0,
        "zero_optimization": zero,
        # AdamW: DeepSpeedCPUAdam with offload_optimizer; on the GPU FusedAdam, or torch.optim.AdamW
        # with plan.torch_adam (DeepSpeed's own key, deepspeed/runtime/engine.py _configure_basic_optimizer)
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-5, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0,
                                                  "torch_adam": p["torch_adam"] and not p["offload_optimizer"]}},
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


def parallelism_kwargs(plan):
    """ParallelismConfig(**these); sp_handler settings separately (sp_handler_kwargs)."""
    return {"sp_backend": "deepspeed", "sp_size": plan["sp_size"],
            "dp_replicate_size": plan["dp_replicate_size"], "dp_shard_size": plan["dp_shard_size"]}


def sp_handler_kwargs(plan, variable=False):
    """DeepSpeedSequenceParallelConfig(**these): a fixed length (every batch has seq_len tokens), or a
    variable one (capacity probes run several lengths on one model: UlyssesSPAttentionHF checks the
    shapes it was built for otherwise, ulysses_sp.py 299-301)."""
    if variable:
        return {"sp_seq_length": None, "sp_seq_length_is_variable": True,
                "sp_attn_implementation": plan["attn_implementation"]}
    return {"sp_seq_length": plan["seq_len"], "sp_seq_length_is_variable": False,
            "sp_attn_implementation": plan["attn_implementation"]}


def tiled_mlp_shards(s_local, hidden):
    """DeepSpeed's TiledMLP example rule (ulysses_sp.py, TiledMLP docstring): ceil(seqlen / hidden)."""
    return max(1, -(-s_local // hidden))


def tiled_logits_shards(micro_batch, s_local, vocab):
    """ArcticTraining's rule (docs/MODEL.md n_log): 1 GiB of fp32 logits per shard."""
    return max(1, -(-(micro_batch * s_local * vocab * 4) // (1 << 30)))
