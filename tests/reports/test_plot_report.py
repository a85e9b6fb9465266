"""`ulysses report` end to end with its plot script (reports/plot_report.py): plans where nothing
fits, a predict sweep with points that do not fit and two profiles, a plan sweep with counts where
nothing fits. Checks that every plot is written, that summary.md embeds each one by a path that
resolves relative to summary.md's own folder (run from another working directory), and that it has
step times and tokens/s. Exit 77 (skipped) when no python3 with matplotlib is there.

  test_plot_report.py ULYSSES_BIN SOURCE_DIR"""
import csv
import os
import re
import subprocess
import sys
import tempfile
import unittest

BIN, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def have_matplotlib():
    for py in ("python3", "/usr/bin/python3"):
        try:
            if subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0:
                return True
        except OSError:
            pass
    return False


def run(args, cwd):
    r = subprocess.run([BIN] + args, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"ulysses {' '.join(args)}: rc {r.returncode}: {r.stderr}")
    return r.stdout


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class ReportPlots(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        base = os.path.join(SRC, "scenarios", "llama8b-h100-sp8.yaml")
        os.makedirs(os.path.join(t, "in"))
        for gpus in (1, 8):  # Llama-3.1-70B without offload: nothing fits on 1 GPU
            for label, flags in (("baseline", ["--sp-size", "1"]), ("all", ["--all-features"])):
                out = run(["plan", "--model", "llama-3.1-70b", "--gpus", str(gpus), "--label", label, "--format", "json"]
                          + flags, t)
                with open(os.path.join(t, "in", f"plan_{gpus:02d}_{label}.json"), "w") as f:
                    f.write(out)
        with open(os.path.join(t, "predict.yaml"), "w") as f:
            f.write(f"name: small-predict\nbase: {base}\nmode: predict\naxes:\n"
                    "  profile: [h100-sxm-80gb, h200-sxm-141gb]\n"
                    "  plan.seq_len: [65536, 1048576, 8388608]\n")
        with open(os.path.join(t, "plan.yaml"), "w") as f:
            f.write(f"name: small-plan\nbase: {base}\nmode: plan\ngranularity: 65536\naxes:\n"
                    "  model: [llama-3.1-8b, llama-3.1-70b]\n  gpus: [1, 8]\n  plan.sp_size: [1]\n")
        run(["sweep", "predict.yaml", "--out", "in"], t)
        run(["sweep", "plan.yaml", "--out", "in"], t)
        os.makedirs(os.path.join(t, "elsewhere"))
        # a relative --out from another working directory: links must not depend on the cwd
        cls.stdout = run(["report", "../in", "--out", "../rep", "--title", "t"], os.path.join(t, "elsewhere"))
        cls.rep = os.path.join(t, "rep")
        with open(os.path.join(cls.rep, "summary.md")) as f:
            cls.md = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_inputs_have_every_kind_of_point(self):
        pred = csv_rows(os.path.join(self.tmp.name, "in", "small-predict.csv"))
        self.assertIn("true", [r["fits"] for r in pred])
        self.assertIn("false", [r["fits"] for r in pred])  # does not fit
        plan = csv_rows(os.path.join(self.tmp.name, "in", "small-plan.csv"))
        self.assertIn("0", [r["seq_len"] for r in plan])  # nothing fits
        self.assertTrue(any(int(r["seq_len"]) > 0 for r in plan))
        self.assertIn("nothing fits", self.md)

    def test_every_plot_is_embedded_relative_to_summary(self):
        links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", self.md)
        pngs = sorted(f for f in os.listdir(self.rep) if f.endswith(".png"))
        self.assertEqual(sorted(links), pngs)
        for kind in ("ablation_", "memory_", "sweep_small-predict", "sweep_small-plan"):
            self.assertTrue(any(p.startswith(kind) for p in pngs), kind)
        for link in links:
            self.assertFalse(os.path.isabs(link), link)
            path = os.path.join(self.rep, link)
            self.assertTrue(os.path.isfile(path), link)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", link)
            self.assertGreater(os.path.getsize(path), 10000, link)

    def test_step_time_tokens_per_s_and_families(self):
        self.assertIn("## Step time and throughput at the longest sequence", self.md)
        self.assertRegex(self.md, r"\| \d+(\.\d+)? (ms|s)|\d+:\d\d:\d\d, [0-9.]+[KM]?/s")
        self.assertIn("**GPU: weights/params**", self.md)
        self.assertIn("&nbsp;&nbsp;weights |", self.md)
        self.assertEqual(self.stdout, self.md)


if __name__ == "__main__":
    if not have_matplotlib():
        print("skipped: no python3 with matplotlib")
        sys.exit(77)
    unittest.main(argv=sys.argv[:1])
