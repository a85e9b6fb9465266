"""One scenario's training steps on HF Transformers + Accelerate + DeepSpeed, measured.

Order of a run: warm-up steps (CPU Adam and DeepSpeed's lazy buffers settle), one memory step
(allocator counters at every phase boundary), `iters` timed steps (CUDA events only), and with a
trace path one step under torch.profiler (CUPTI) whose kernels are attributed to the phases.
Probe mode (capacity): increasing lengths on one model until one runs out of memory.
"""
import json
import math
import os
import platform
import re
import time

import torch

from . import accounting, allocator, dsconfig, features, hfconfig, offload
from .energy import EnergyCounter
from .phases import CLOCK, instrument, timed, wrap_function, wrap_marked, wrap_method


def _versions():
    import accelerate, deepspeed, transformers
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "accelerate": accelerate.__version__, "deepspeed": deepspeed.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version()}


def _host_memory():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) * 1024
    pinned = offload.pinned_bytes()
    try:  # the caching host allocator (pin_memory=True tensors of torch and DeepSpeed)
        st = torch.cuda.host_memory_stats()
        pinned_torch = int(st.get("allocated_bytes.current", st.get("allocated_bytes", 0)))
    except Exception:
        pinned_torch = -1
    return {"host_rss_bytes": out.get("VmRSS", 0), "host_rss_peak_bytes": out.get("VmHWM", 0),
            "checkpoint_pinned_bytes": pinned, "torch_pinned_bytes": pinned_torch}


class Runner:
    def __init__(self, job):
        self.job, self.m, self.p, self.r = job, job["model"], job["plan"], job["run"]
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        # calibrate's set-up: the GPU idle when the loss starts, so that the phase clock's host seconds of
        # 'logits.fwd' are the host's issue cost of the loss (its tiles) alone, without a wait for the GPU
        self.sync_before_loss = False

    # ---- set-up ----
    def build(self, max_seq_len, variable_length=False):
        from accelerate import Accelerator
        from accelerate.parallelism_config import ParallelismConfig
        from accelerate.utils import DeepSpeedPlugin, DeepSpeedSequenceParallelConfig, DummyOptim
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM

        p = self.p
        ds_cfg = dsconfig.deepspeed_config(p)
        plugin = DeepSpeedPlugin(hf_ds_config=ds_cfg, zero3_init_flag=p["zero_stage"] == 3)
        pc_kwargs = dsconfig.parallelism_kwargs(p)
        pc = None  # only with SP: for sp 1 DeepSpeed's ZeRO needs no mesh of Accelerate's
        if p["sp_size"] > 1:
            pc_kwargs["sp_handler"] = DeepSpeedSequenceParallelConfig(**dsconfig.sp_handler_kwargs(p, variable_length))
            pc = ParallelismConfig(**pc_kwargs)
        self.acc = Accelerator(deepspeed_plugin=plugin, parallelism_config=pc, mixed_precision="bf16")

        cfg_dict = hfconfig.config_dict(self.m, max_seq_len, p["attn_implementation"])
        fam = hfconfig.family(self.m)
        mod = {"llama": transformers.models.llama.modeling_llama, "qwen2": transformers.models.qwen2.modeling_qwen2,
               "qwen3": transformers.models.qwen3.modeling_qwen3}[fam]
        if p["tiled_mlp"]:
            features.patch_tiled_mlp({"llama": mod.LlamaMLP if fam == "llama" else None,
                                      "qwen2": getattr(mod, "Qwen2MLP", None),
                                      "qwen3": getattr(mod, "Qwen3MLP", None)}[fam])
        cfg = AutoConfig.for_model(cfg_dict.pop("model_type"), **{k: v for k, v in cfg_dict.items()
                                                                  if k not in ("architectures", "torch_dtype")})
        torch.manual_seed(self.r["seed"])
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16,
                                                 attn_implementation=p["attn_implementation"])
        if p["activation_checkpointing"]:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if p["offload_checkpoints"]:
                offload.install(model.model.layers)
        model.train()
        optim = DummyOptim(model.parameters(), lr=1e-5)
        self.engine, self.optim = self.acc.prepare(model, optim)
        self._instrument(self.engine.module)
        self.sp_group, self.sp_rank = None, 0
        if p["sp_size"] > 1:
            import deepspeed.runtime.sequence_parallel.parallel_state_sp as mpu
            self.sp_group = mpu.get_sequence_parallel_group()
            self.sp_rank = mpu.get_sequence_parallel_rank()

    def _instrument(self, model):
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        from deepspeed.runtime.zero import partitioned_param_coordinator as ppc
        from deepspeed.runtime.zero import stage3, stage_1_and_2

        impl = self.p["attn_implementation"]
        # sp > 1: the registered function is UlyssesSPAttentionHF's wrapper; its two exchanges get
        # their own ranges inside (exclusive), so attn.* is the attention and the layout copies
        ALL_ATTENTION_FUNCTIONS[impl] = wrap_function(ALL_ATTENTION_FUNCTIONS[impl], "attn")
        if self.p["sp_size"] > 1:
            from deepspeed.runtime.sequence_parallel.ulysses_sp import UlyssesSPAttentionHF
            wrap_marked(UlyssesSPAttentionHF, "_combine_local_sequences", "a2a.qkv")
            wrap_marked(UlyssesSPAttentionHF, "_partition_global_sequence", "a2a.out")
        instrument(model.model.embed_tokens, "embed")
        instrument(model.model.norm, "norm")
        for layer in model.model.layers:
            a = layer.self_attn
            for n in ("input_layernorm", "post_attention_layernorm"):
                instrument(getattr(layer, n), "norm")
            for n in ("q_norm", "k_norm"):
                if hasattr(a, n):
                    instrument(getattr(a, n), "norm")
            for n in ("q_proj", "k_proj", "v_proj"):
                instrument(getattr(a, n), "gemm.qkv")
            instrument(a.o_proj, "gemm.o")
            instrument(layer.mlp, "mlp")
        wrap_method(ppc.PartitionedParameterCoordinator, "fetch_sub_module", "zero.allgather")
        for cls in (stage3.DeepSpeedZeroOptimizer_Stage3, stage_1_and_2.DeepSpeedZeroOptimizer):
            wrap_method(cls, "reduce_independent_p_g_buckets_and_remove_grads", "zero.reduce_scatter")
            wrap_method(cls, "independent_gradient_partition_epilogue", "zero.reduce_scatter")

    # ---- one step ----
    def start_of_step(self):
        """What engine(...) does before a forward and ours skips by calling the inner model (as
        ArcticTraining does, to get hidden states for the tiled loss): ZeRO-3's parameter trace reset
        (the root module's forward pre-hook, zero/parameter_offload.py 304-308; prefetching needs it)
        and the backward-seen flag (engine.py forward)."""
        opt = getattr(self.engine, "optimizer", None)
        offload = getattr(opt, "parameter_offload", None)
        if offload is not None:
            offload.get_param_coordinator().reset_step()
        if hasattr(opt, "clear_backward_seen_flag"):
            opt.clear_backward_seen_flag()

    def batch(self, seq_len):
        g = torch.Generator().manual_seed(self.r["seed"] + seq_len)
        B = self.p["micro_batch_size"]
        ids = torch.randint(0, self.m["vocab"], (B, seq_len), generator=g)
        labels = features.shift_labels(ids)
        pos = torch.arange(seq_len).unsqueeze(0).expand(B, -1)
        sl = seq_len // self.p["sp_size"]
        sl0 = self.sp_rank * sl  # this rank's slice (UlyssesSPDataLoaderAdapter's sharding)
        dev = self.acc.device
        return (ids[:, sl0:sl0 + sl].to(dev), pos[:, sl0:sl0 + sl].contiguous().to(dev),
                labels[:, sl0:sl0 + sl].contiguous().to(dev))

    def step(self, data, track_memory=False, annotate=False):
        ids, pos, labels = data
        eng = self.engine
        self.start_of_step()
        CLOCK.begin_step(track_memory=track_memory, annotate=annotate)
        hidden = eng.module.model(input_ids=ids, position_ids=pos, use_cache=False).last_hidden_state
        loss_sum, tokens = features.loss_sum_and_tokens(eng.module, hidden, labels, self.p["tiled_logits"],
                                                        self.m["vocab"], sync_first=self.sync_before_loss)
        loss = features.aggregate(loss_sum, tokens, self.sp_group)
        CLOCK.in_backward = True
        eng.backward(loss)
        CLOCK.in_backward = False
        # the embedding's backward range opens at its output's gradient but has no closing mark (its
        # input, input_ids, takes no gradient): close it here, so the backward's tail after it is "other"
        CLOCK.pop("embed.bwd")
        with timed("optimizer.step"):
            eng.step()
        times, step_s, wall_s = CLOCK.end_step()
        value = float(loss.detach())
        return times, step_s, wall_s, value if math.isfinite(value) else None  # JSON has no NaN: null

    # ---- runs ----
    def run(self, trace_path):
        S = self.p["seq_len"]
        self.build(S)
        data = self.batch(S)
        result = {"losses": [], "warmup_wall_s": []}
        for _ in range(self.r["warmup"]):
            t, s, w, l = self.step(data)
            result["warmup_wall_s"].append(w)
            result["losses"].append(l)
        warm_alloc, warm_res = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        t, s, w, l = self.step(data, track_memory=True)
        mem = CLOCK.memory()
        result["losses"].append(l)
        torch.cuda.reset_peak_memory_stats()
        per_phase, per_phase_host, steps = {}, {}, []
        energy = EnergyCounter()
        joules0 = energy.joules()  # the memory step ended with a synchronize, as each timed step does
        for _ in range(self.r["iters"]):
            t, s, w, l = self.step(data)
            steps.append({"step_s": s, "wall_s": w})
            result["losses"].append(l)
            for k, v in t.items():
                per_phase.setdefault(k, []).append(v)
            for k, v in CLOCK.host_totals().items():
                per_phase_host.setdefault(k, []).append(v)
        joules1 = energy.joules()
        result["energy_j_per_step"] = (joules1 - joules0) / len(steps) if None not in (joules0, joules1) and steps \
            and joules1 >= joules0 else None
        result["timeline"] = CLOCK.timeline()  # the last timed step, for the compare trace
        result["max_memory_allocated"] = max(mem["peak_allocated"], torch.cuda.max_memory_allocated())
        result["max_memory_reserved"] = max(mem["peak_reserved"], torch.cuda.max_memory_reserved())
        result["warmup_max_memory_allocated"], result["warmup_max_memory_reserved"] = warm_alloc, warm_res
        result["memory_step"] = mem
        result["allocator"] = allocator.segments()  # after the timed steps: reserved only grows
        result["steps"] = steps
        result["phases"] = per_phase
        result["phases_host"] = per_phase_host  # the host clock's seconds per phase, per timed step
        if trace_path:
            result["kernels_by_phase"] = self.traced_step(data, trace_path)
        result.update(_host_memory())
        return result

    def traced_step(self, data, trace_path):
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            self.step(data, annotate=True)
        prof.export_chrome_trace(trace_path)
        return attribute_kernels(trace_path)

    def fixed_costs(self):
        """The process's device memory outside the caching allocator (calibrate --backend deepspeed):
        used (cudaMemGetInfo, device-wide) - reserved, with only torch's CUDA context, then after
        Accelerate + DeepSpeed set-up and two steps of the job's scenario (the context with the kernels
        loaded, NCCL communicators; cuBLAS/cuDNN workspaces come from the caching allocator and count in
        reserved, not here). empty_cache first: nothing cached counts. Also the phase clock of the second step
        (GPU and host seconds per phase; the first one made the optimizer's state and the allocator's blocks): at this small size the host sets the pace, so its host times are the
        PyTorch process's cost of issuing each phase (issue 12's two-clock model)."""
        def outside():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            free, total = torch.cuda.mem_get_info()
            return (total - free) - torch.cuda.memory_reserved()

        torch.cuda.init()
        before = outside()
        self.sync_before_loss = True
        self.build(self.p["seq_len"])
        data = self.batch(self.p["seq_len"])
        for _ in range(2):
            gpu_s, step_s, wall_s, _ = self.step(data)
        clock = {"seq_len": self.p["seq_len"], "gpu_s": gpu_s, "host_s": CLOCK.host_totals(), "step_s": step_s,
                 "wall_s": wall_s}
        del data
        return {"outside_allocator_bytes_before_setup": before, "outside_allocator_bytes": outside(),
                "world_size": self.world, "phase_clock": clock}

    def probe(self, lengths):
        """Capacity: one step (after one warm-up) at each length, increasing, until one OOMs."""
        self.build(max(lengths), variable_length=True)
        fits = []
        for S in lengths:
            try:
                data = self.batch(S)
                self.step(data)
                torch.cuda.reset_peak_memory_stats()
                self.step(data)
                free, total = torch.cuda.mem_get_info()
                fits.append({"seq_len": S, "max_memory_allocated": torch.cuda.max_memory_allocated(),
                             "max_memory_reserved": torch.cuda.max_memory_reserved(),
                             "outside_allocator_bytes": (total - free) - torch.cuda.memory_reserved()})
                del data
                torch.cuda.empty_cache()
            except torch.cuda.OutOfMemoryError as e:
                free, total = torch.cuda.mem_get_info()  # what the failed allocation saw, as torch's message says
                return {"probes": fits, "oom_at": S, "oom_message": " ".join(str(e).split())[:1000],
                        "oom_free_bytes": free, "oom_reserved_bytes": torch.cuda.memory_reserved(),
                        "oom_allocated_bytes": torch.cuda.memory_allocated()}
        return {"probes": fits, "oom_at": 0}


def attribute_kernels(trace_path):
    """Kernel time per phase of the traced step (accounting.attribute_kernels)."""
    with open(trace_path) as f:
        return accounting.attribute_kernels(json.load(f).get("traceEvents", []))


def run_job(job, trace_path):
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    # DeepSpeed's JIT builder (FusedAdam) cannot parse arch suffixes such as '9.0a' in
    # TORCH_CUDA_ARCH_LIST (op_builder/builder.py compute_capability_args): build for this GPU
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(" ", ";").split(";")
    if any(a and not re.fullmatch(r"\d+\.\d+(\+PTX)?", a) for a in archs):
        os.environ["TORCH_CUDA_ARCH_LIST"] = "{}.{}".format(*torch.cuda.get_device_capability())
    allocator.start_history()
    ballast_bytes = job["run"].get("ballast_bytes", 0)
    ballast = torch.empty(ballast_bytes, dtype=torch.uint8, device="cuda") if ballast_bytes else None
    r = Runner(job)
    t0 = time.time()
    res = {"status": "ok", "rank": r.rank, "world_size": r.world,
           "device": torch.cuda.get_device_name(), "versions": _versions(),
           "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           "hbm_bytes": torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory}
    probes = job["run"].get("probe_seq_lens", [])
    if job["run"].get("calibrate", False):
        res.update(r.fixed_costs())
        if job["run"].get("op_seq_lens"):  # after the fixed costs: the op bench's buffers are not counted there
            from . import opbench
            res["ops"] = opbench.run(job["model"], job["plan"], job["run"]["op_seq_lens"],
                                     job["run"].get("op_adam_params", 0), job["run"].get("op_cpu_adam_params", 0))
    elif probes:
        res.update(r.probe(probes))
    else:
        res.update(r.run(trace_path))
    allocator.dump_history(r.rank)
    res["ballast_bytes"] = ballast_bytes  # held all run long, included in the allocator's counters
    del ballast
    free, total = torch.cuda.mem_get_info()
    res["device_used_bytes"] = total - free  # context + NCCL + what the allocator holds, at the end
    res["wall_s"] = time.time() - t0
    return res
