"""`ulysses plan --emit` writes the DeepSpeed config the deepspeed backend's worker builds for the same
plan (runtime/deepspeed/ulysses_worker/dsconfig.py deepspeed_config), less the worker's logging keys, and
an Accelerate parallelism_config equal to the worker's parallelism_kwargs + fixed sp_handler_kwargs.
Usage: test_emit_agrees.py ULYSSES_BIN. No torch needed."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "deepspeed"))
from ulysses_worker import dsconfig  # noqa: E402

BIN = sys.argv.pop(1) if len(sys.argv) > 1 else "ulysses"
# keys of the worker's dict that only silence its logs; the emitted config leaves them to the user
WORKER_ONLY = {"steps_per_print", "wall_clock_breakdown"}
PLANS = [
    "--model llama-3.1-8b --gpus 8 --sp-size 8 --zero-stage 3 --offload-optimizer --attn-implementation sdpa",
    "--model llama-3.1-8b --gpus 4 --sp-size 1 --zero-stage 2",
    "--model llama-3.1-8b --profile h200-sxm-141gb --gpus 16 --sp-size 4 --dp-replicate-size 2 --zero-stage 3 "
    "--offload-optimizer --offload-params --torch-adam",
    "--model llama-3.1-8b --profile h200-sxm-141gb --gpus 8 --sp-size 8 --torch-adam --micro-batch-size 2 "
    "--tiled-mlp --tiled-logits",
    "--model llama-3.1-8b --gpus 2 --sp-size 2 --zero-stage 1 --offload-optimizer",
]


def emit(flags, out):
    """The plan JSON of `ulysses plan FLAGS --emit OUT`, and its plan as the worker takes it: the JSON's
    scenario.plan plus torch_adam (a flag here; the JSON does not carry it). reduce_bucket_size stays
    the default on both sides (no flag sets it)."""
    r = subprocess.run([BIN, "plan", *flags.split(), "--emit", out, "--format", "json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"ulysses plan {flags}: exit {r.returncode}: {r.stderr}")
    j = json.loads(r.stdout)
    plan = dict(j["scenario"]["plan"], torch_adam="--torch-adam" in flags.split())
    return j, plan


def yaml_or_none():
    try:
        import yaml
        return yaml
    except ImportError:
        return None


class EmitAgrees(unittest.TestCase):
    def test_deepspeed_dict(self):
        for flags in PLANS:
            with self.subTest(flags=flags), tempfile.TemporaryDirectory() as d:
                _, plan = emit(flags, d)
                with open(os.path.join(d, "ds_config.json")) as f:
                    emitted = json.load(f)
                want = {k: v for k, v in dsconfig.deepspeed_config(plan).items() if k not in WORKER_ONLY}
                self.assertEqual(emitted, want)

    @unittest.skipIf(yaml_or_none() is None, "PyYAML (python3-yaml) not installed")
    def test_parallelism_config(self):
        yaml = yaml_or_none()
        prefix = "parallelism_config_"
        for flags in PLANS:
            with self.subTest(flags=flags), tempfile.TemporaryDirectory() as d:
                j, plan = emit(flags, d)
                with open(os.path.join(d, "accelerate_config.yaml")) as f:
                    acc = yaml.safe_load(f)
                self.assertEqual(acc["distributed_type"], "DEEPSPEED")
                self.assertEqual(acc["num_processes"], j["scenario"]["gpus"])
                self.assertEqual(acc["deepspeed_config"], {"deepspeed_config_file": "ds_config.json"})
                self.assertNotIn("mixed_precision", acc)  # Accelerate refuses it next to deepspeed_config_file
                pc = {k[len(prefix):]: v for k, v in acc["parallelism_config"].items()}
                want = dsconfig.parallelism_kwargs(plan)
                if plan["sp_size"] > 1:  # Accelerate exports the sp_handler settings only then
                    want.update(dsconfig.sp_handler_kwargs(plan))
                self.assertEqual(pc, want)


if __name__ == "__main__":
    unittest.main()
