"""GPU-free parts of the deepspeed backend's worker (runtime/deepspeed/ulysses_worker): the job
checks, the HF config.json of a preset, the DeepSpeed config and the shard rules. No torch needed."""
import copy
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "deepspeed"))
from ulysses_worker import accounting, dsconfig, hfconfig, job  # noqa: E402

MODEL = dict(name="llama-3.1-8b", layers=2, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn_hidden=14336,
             vocab=128256, tied_embeddings=False, qk_norm=False, qkv_bias=False, rms_norm_eps=1e-5, rope_theta=500000.0)
PLAN = dict(sp_size=1, dp_replicate_size=1, dp_shard_size=1, zero_stage=3, micro_batch_size=1, seq_len=16384,
            offload_optimizer=True, offload_params=False, activation_checkpointing=True, offload_checkpoints=True,
            tiled_logits=True, tiled_mlp=True, attn_implementation="sdpa", kv_strategy="replicate",
            reduce_bucket_size=5e8, torch_adam=True)
JOB = {"schema": 1, "scenario": "t", "model": MODEL, "plan": PLAN, "gpus": 1,
       "run": {"warmup": 1, "iters": 3, "seed": 1, "expandable_segments": True, "trace": "", "probe_seq_lens": []},
       "out": "/tmp/x"}


def jobwith(section, key, value):
    j = copy.deepcopy(JOB)
    (j[section] if section else j)[key] = value
    return j


class JobChecks(unittest.TestCase):
    def test_valid(self):
        self.assertEqual(job.check(copy.deepcopy(JOB))["plan"]["seq_len"], 16384)

    def test_rules_name_the_key(self):
        cases = [
            (jobwith("plan", "kv_strategy", "send_once"), "plan.kv_strategy"),
            (jobwith("plan", "attn_implementation", "eager"), "plan.attn_implementation"),
            (jobwith("plan", "seq_len", 16385), None),  # fine at sp 1
            (jobwith("plan", "zero_stage", 4), "plan.zero_stage"),
            (jobwith("model", "heads", 0), "model.heads"),
            (jobwith("model", "qk_norm", "yes"), "model.qk_norm"),
            (jobwith("model", "rms_norm_eps", 0), "model.rms_norm_eps"),
            (jobwith("model", "rope_theta", "1e6"), "model.rope_theta"),
            (jobwith(None, "gpus", 2), "gpus"),
            (jobwith("run", "iters", 0), "run.iters"),
            (jobwith("run", "probe_seq_lens", [2048, 1024]), "run.probe_seq_lens"),
            (jobwith("run", "calibrate", "yes"), "run.calibrate"),
            (jobwith("run", "ballast_bytes", -1), "run.ballast_bytes"),
            (jobwith("run", "op_seq_lens", [4096]), "run.op_seq_lens"),  # without run.calibrate
            (dict(jobwith("run", "op_adam_params", -5)), "run.op_adam_params"),
            (jobwith("run", "op_cpu_adam_params", True), "run.op_cpu_adam_params"),
            (jobwith("plan", "torch_adam", 1), "plan.torch_adam"),
            (dict(jobwith("plan", "dp_replicate_size", 2), gpus=2), "plan.dp_replicate_size"),
        ]
        for j, key in cases:
            if key is None:
                job.check(j)
                continue
            with self.assertRaises(job.JobError) as e:
                job.check(j, "f.json")
            self.assertIn(f"f.json: {key}:", str(e.exception))
            self.assertNotIn("\n", str(e.exception))

    def test_op_bench_keys(self):
        j = jobwith("run", "calibrate", True)
        j["run"].update(op_seq_lens=[4096, 16384], op_adam_params=1 << 20, op_cpu_adam_params=0)
        self.assertEqual(job.check(j)["run"]["op_seq_lens"], [4096, 16384])
        j["run"]["op_seq_lens"] = [4096, 0]
        with self.assertRaises(job.JobError) as e:
            job.check(j, "f.json")
        self.assertIn("f.json: run.op_seq_lens:", str(e.exception))

    def test_sp_rules(self):
        j = copy.deepcopy(JOB)
        j["plan"]["sp_size"], j["gpus"], j["plan"]["seq_len"] = 3, 3, 16383
        with self.assertRaises(job.JobError) as e:
            job.check(j, "f.json")
        self.assertIn("model.heads", str(e.exception))  # 32 % 3
        j["plan"]["sp_size"], j["gpus"], j["plan"]["seq_len"] = 4, 4, 16382
        with self.assertRaises(job.JobError) as e:
            job.check(j, "f.json")
        self.assertIn("plan.seq_len", str(e.exception))

    def test_load_errors(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "j.json")
            with open(p, "w") as f:
                f.write("{not json")
            with self.assertRaises(job.JobError) as e:
                job.load(p)
            self.assertIn("not JSON", str(e.exception))
            with self.assertRaises(job.JobError):
                job.load(os.path.join(d, "missing.json"))


class Configs(unittest.TestCase):
    def test_llama_config(self):
        c = hfconfig.config_dict(MODEL, 65536, "sdpa")
        self.assertEqual(c["model_type"], "llama")
        self.assertEqual((c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]), (32, 8, 128))
        self.assertEqual(c["max_position_embeddings"], 65536)
        self.assertFalse(c["tie_word_embeddings"])
        self.assertEqual((c["rms_norm_eps"], c["rope_theta"]), (1e-5, 500000.0))

    def test_qwen3_config(self):
        m = dict(MODEL, qk_norm=True, tied_embeddings=True, hidden=2560, vocab=151936)
        c = hfconfig.config_dict(m, 1024, "sdpa")
        self.assertEqual(c["model_type"], "qwen3")
        self.assertEqual(c["max_position_embeddings"], 2048)
        self.assertTrue(c["tie_word_embeddings"])

    def test_deepspeed_config(self):
        d = dsconfig.deepspeed_config(PLAN)
        z = d["zero_optimization"]
        self.assertEqual(z["stage"], 3)
        self.assertEqual(z["offload_optimizer"], {"device": "cpu", "pin_memory": True})
        self.assertNotIn("offload_param", z)
        self.assertFalse(d["optimizer"]["params"]["torch_adam"])  # CPU Adam with optimizer offload
        d = dsconfig.deepspeed_config(dict(PLAN, offload_optimizer=False, zero_stage=0))
        self.assertTrue(d["optimizer"]["params"]["torch_adam"])
        self.assertNotIn("reduce_bucket_size", d["zero_optimization"])
        d = dsconfig.deepspeed_config(dict(PLAN, offload_optimizer=False, torch_adam=False))
        self.assertFalse(d["optimizer"]["params"]["torch_adam"])  # FusedAdam
        json.dumps(d)

    def test_flex_attention_only_at_sp1(self):
        j = jobwith("plan", "attn_implementation", "flex_attention")
        job.check(j)
        j["plan"]["sp_size"], j["gpus"] = 2, 2
        with self.assertRaises(job.JobError) as e:
            job.check(j, "f.json")
        self.assertIn("plan.attn_implementation", str(e.exception))

    def test_parallelism(self):
        p = dict(PLAN, sp_size=4, dp_shard_size=2)
        self.assertEqual(dsconfig.parallelism_kwargs(p),
                         {"sp_backend": "deepspeed", "sp_size": 4, "dp_replicate_size": 1, "dp_shard_size": 2})
        self.assertEqual(dsconfig.sp_handler_kwargs(p)["sp_seq_length"], 16384)
        v = dsconfig.sp_handler_kwargs(p, variable=True)  # capacity probes: several lengths, one model
        self.assertTrue(v["sp_seq_length_is_variable"])
        self.assertIsNone(v["sp_seq_length"])
        # zero.Init reads the config before Accelerate fixes the batch size for SP
        self.assertEqual(dsconfig.deepspeed_config(p)["sequence_parallel_size"], 4)
        self.assertEqual(dsconfig.deepspeed_config(p)["train_batch_size"], 2)  # micro batch x dp (2)

    def test_shard_rules(self):
        self.assertEqual(dsconfig.tiled_mlp_shards(16384, 4096), 4)
        self.assertEqual(dsconfig.tiled_mlp_shards(16385, 4096), 5)
        self.assertEqual(dsconfig.tiled_mlp_shards(100, 4096), 1)
        # 1 GiB of fp32 logits per shard: 16384 * 128256 * 4 B = 7.83 GiB -> 8
        self.assertEqual(dsconfig.tiled_logits_shards(1, 16384, 128256), 8)
        self.assertEqual(dsconfig.tiled_logits_shards(1, 1, 128256), 1)


class Accounting(unittest.TestCase):
    # boundaries of a step: push mlp.bwd at 1, push zero.allgather (nested) at 2, pop it at 3,
    # pop mlp.bwd at 5, push optimizer.step at 6, pop at 9; charged = innermost phase before each
    B = [(0.0, None), (1.0, None), (2.0, "mlp.bwd"), (3.0, "zero.allgather"), (5.0, "mlp.bwd"),
         (6.0, None), (9.0, "optimizer.step"), (10.0, None)]

    def test_exclusive_totals_sum_to_the_step(self):
        t = accounting.totals(self.B)
        self.assertEqual(t, {"other": 3.0, "mlp.bwd": 3.0, "zero.allgather": 1.0, "optimizer.step": 3.0})
        self.assertAlmostEqual(sum(t.values()), self.B[-1][0])

    def test_segments_join_consecutive_pieces(self):
        # the time up to a boundary belongs to that boundary's charged phase
        s = accounting.segments([(0.0, None), (1.0, "a"), (2.0, "a"), (4.0, "b"), (5.0, None)])
        self.assertEqual(s, [["a", 0.0, 2.0], ["b", 2.0, 2.0], ["other", 4.0, 1.0]])
        self.assertEqual(accounting.segments(self.B)[2], ["zero.allgather", 2.0, 1.0])

    def test_kernels_go_to_the_innermost_range_of_the_launching_thread(self):
        ev = [
            {"ph": "X", "cat": "user_annotation", "name": "mlp.bwd", "tid": 7, "ts": 100, "dur": 100},
            {"ph": "X", "cat": "user_annotation", "name": "zero.allgather", "tid": 7, "ts": 120, "dur": 10},
            {"ph": "X", "cat": "user_annotation", "name": "attn.fwd", "tid": 1, "ts": 0, "dur": 1000},
            {"ph": "X", "cat": "cuda_runtime", "tid": 7, "ts": 110, "args": {"correlation": 1}},
            {"ph": "X", "cat": "cuda_runtime", "tid": 7, "ts": 125, "args": {"correlation": 2}},
            {"ph": "X", "cat": "cuda_runtime", "tid": 7, "ts": 300, "args": {"correlation": 3}},
            # kernels run later on the GPU; only the launch decides
            {"ph": "X", "cat": "kernel", "ts": 500, "dur": 40, "args": {"correlation": 1}},
            {"ph": "X", "cat": "kernel", "ts": 600, "dur": 20, "args": {"correlation": 2}},
            {"ph": "X", "cat": "kernel", "ts": 700, "dur": 10, "args": {"correlation": 3}},
            {"ph": "X", "cat": "kernel", "ts": 800, "dur": 5, "args": {"correlation": 99}},
        ]
        k = accounting.attribute_kernels(ev)
        self.assertAlmostEqual(k["mlp.bwd"]["kernel_s"], 40e-6)
        self.assertEqual(k["zero.allgather"]["kernels"], 1)
        self.assertEqual(k["other"]["kernels"], 2)  # launched outside any range, and an unknown launch
        self.assertNotIn("attn.fwd", k)  # another thread's range


if __name__ == "__main__":
    unittest.main()
