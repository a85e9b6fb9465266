"""The job file the ulysses CLI writes for one worker run, read and checked.

Every rule failure is a JobError with one line naming the key and the rule; the worker prints it
and exits 2 (bad input), as the CLI does.
"""
import json

SCHEMA = 1

MODEL_INT_KEYS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab")
MODEL_BOOL_KEYS = ("tied_embeddings", "qk_norm", "qkv_bias")
MODEL_REAL_KEYS = ("rms_norm_eps", "rope_theta")  # the CLI writes the model's values (sim/model.hpp norm_eps_of)
PLAN_INT_KEYS = ("sp_size", "dp_replicate_size", "dp_shard_size", "zero_stage", "micro_batch_size", "seq_len")
PLAN_BOOL_KEYS = ("offload_optimizer", "offload_params", "activation_checkpointing", "offload_checkpoints",
                  "tiled_logits", "tiled_mlp", "torch_adam")
# what HF transformers' attention registry offers and UlyssesSPAttentionHF accepts (eager needs
# a 4D mask: deepspeed/runtime/sequence_parallel/ulysses_sp.py register_with_transformers)
ATTN_IMPLEMENTATIONS = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")


class JobError(ValueError):
    """One line: '<file>: <key>: <rule>'."""


def _need(d, key, kind, where, path):
    if key not in d:
        raise JobError(f"{path}: {where}{key}: required")
    v = d[key]
    if kind is bool and not isinstance(v, bool):
        raise JobError(f"{path}: {where}{key}: must be true or false (got {v!r})")
    if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
        raise JobError(f"{path}: {where}{key}: must be an integer (got {v!r})")
    if kind is float and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise JobError(f"{path}: {where}{key}: must be a number (got {v!r})")
    if kind is str and not isinstance(v, str):
        raise JobError(f"{path}: {where}{key}: must be a string (got {v!r})")
    return v


def check(job, path="job"):
    """Checks a parsed job dict in place; returns it. Raises JobError."""
    if not isinstance(job, dict):
        raise JobError(f"{path}: top level must be a mapping")
    if job.get("schema") != SCHEMA:
        raise JobError(f"{path}: schema: must be {SCHEMA} (got {job.get('schema')!r})")
    for sect in ("model", "plan", "run"):
        if not isinstance(job.get(sect), dict):
            raise JobError(f"{path}: {sect}: required mapping")
    m, p, r = job["model"], job["plan"], job["run"]
    for k in MODEL_INT_KEYS:
        if _need(m, k, int, "model.", path) <= 0:
            raise JobError(f"{path}: model.{k}: must be positive (got {m[k]})")
    for k in MODEL_BOOL_KEYS:
        _need(m, k, bool, "model.", path)
    for k in MODEL_REAL_KEYS:
        v = _need(m, k, float, "model.", path)
        if not v > 0:
            raise JobError(f"{path}: model.{k}: must be positive (got {v})")
    _need(m, "name", str, "model.", path)
    for k in PLAN_INT_KEYS:
        _need(p, k, int, "plan.", path)
    for k in PLAN_BOOL_KEYS:
        _need(p, k, bool, "plan.", path)
    for k in ("sp_size", "dp_replicate_size", "dp_shard_size", "micro_batch_size", "seq_len"):
        if p[k] < 1:
            raise JobError(f"{path}: plan.{k}: must be >= 1 (got {p[k]})")
    if p["zero_stage"] not in (0, 1, 2, 3):
        raise JobError(f"{path}: plan.zero_stage: must be 0, 1, 2 or 3 (got {p['zero_stage']})")
    impl = _need(p, "attn_implementation", str, "plan.", path)
    if impl not in ATTN_IMPLEMENTATIONS:
        raise JobError(f"{path}: plan.attn_implementation: the deepspeed backend runs one of "
                       f"{', '.join(ATTN_IMPLEMENTATIONS)} (got {impl!r})")
    if _need(p, "kv_strategy", str, "plan.", path) != "replicate":
        raise JobError(f"{path}: plan.kv_strategy: DeepSpeed's UlyssesSPAttentionHF replicates kv heads "
                       f"when sp_size > kv_heads; only 'replicate' runs on this backend (got {p['kv_strategy']!r})")
    if impl == "flex_attention" and p["sp_size"] > 1:
        raise JobError(f"{path}: plan.attn_implementation: Accelerate 1.15 refuses flex_attention for sequence "
                       f"parallelism (DeepSpeedSequenceParallelConfig); use sdpa or flash_attention_2")
    if p["dp_replicate_size"] > 1:
        raise JobError(f"{path}: plan.dp_replicate_size: DeepSpeed ZeRO shards over every data-parallel rank "
                       f"(no replicate groups); the deepspeed backend runs dp_replicate_size 1 (got {p['dp_replicate_size']})")
    if p["offload_params"] and p["zero_stage"] != 3:
        raise JobError(f"{path}: plan.offload_params: needs zero_stage 3 (got {p['zero_stage']})")
    if p["offload_checkpoints"] and not p["activation_checkpointing"]:
        raise JobError(f"{path}: plan.offload_checkpoints: needs activation_checkpointing")
    if p["seq_len"] % p["sp_size"]:
        raise JobError(f"{path}: plan.seq_len: must be a multiple of sp_size {p['sp_size']} (got {p['seq_len']})")
    if m["heads"] % p["sp_size"]:
        raise JobError(f"{path}: model.heads: {m['heads']} is not divisible by sp_size {p['sp_size']}")
    if not (m["kv_heads"] % p["sp_size"] == 0 or p["sp_size"] % m["kv_heads"] == 0):
        raise JobError(f"{path}: model.kv_heads: {m['kv_heads']} and sp_size {p['sp_size']}: one must divide the other")
    world = p["sp_size"] * p["dp_replicate_size"] * p["dp_shard_size"]
    if _need(job, "gpus", int, "", path) != world:
        raise JobError(f"{path}: gpus: must equal sp_size * dp_replicate_size * dp_shard_size = {world} (got {job['gpus']})")
    for k in ("warmup", "iters", "seed"):
        _need(r, k, int, "run.", path)
    if r["warmup"] < 0 or r["iters"] < 1:
        raise JobError(f"{path}: run.iters: must be >= 1 and run.warmup >= 0")
    _need(r, "expandable_segments", bool, "run.", path)
    probes = r.get("probe_seq_lens", [])
    if not isinstance(probes, list) or any(isinstance(s, bool) or not isinstance(s, int) or s < p["sp_size"]
                                           or s % p["sp_size"] for s in probes):
        raise JobError(f"{path}: run.probe_seq_lens: must be a list of multiples of sp_size")
    if probes != sorted(probes):
        raise JobError(f"{path}: run.probe_seq_lens: must be increasing")
    if not isinstance(r.get("calibrate", False), bool):
        raise JobError(f"{path}: run.calibrate: must be true or false (got {r['calibrate']!r})")
    ops = r.get("op_seq_lens", [])
    if not isinstance(ops, list) or any(isinstance(s, bool) or not isinstance(s, int) or s < p["sp_size"]
                                        or s % p["sp_size"] for s in ops):
        raise JobError(f"{path}: run.op_seq_lens: must be a list of multiples of sp_size")
    if ops and not r.get("calibrate", False):
        raise JobError(f"{path}: run.op_seq_lens: only with run.calibrate (the op bench is part of calibrate)")
    for k in ("op_adam_params", "op_cpu_adam_params"):
        n = r.get(k, 0)
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 4_000_000_000:
            raise JobError(f"{path}: run.{k}: must be an integer 0..4e9 (got {n!r})")
    b = r.get("ballast_bytes", 0)
    if isinstance(b, bool) or not isinstance(b, int) or b < 0:
        raise JobError(f"{path}: run.ballast_bytes: must be a non-negative integer (got {b!r})")
    _need(job, "out", str, "", path)
    return job


def load(path):
    try:
        with open(path) as f:
            job = json.load(f)
    except OSError as e:
        raise JobError(f"{path}: cannot read: {e.strerror}")
    except json.JSONDecodeError as e:
        raise JobError(f"{path}: not JSON: line {e.lineno}: {e.msg}")
    return check(job, path)
