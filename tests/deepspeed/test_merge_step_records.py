#!/usr/bin/env python3
"""eval/scripts/merge_step_records.py on synthetic parts: the cases in order with each part's provenance,
a case in two parts refused, parts that ran different profiles refused unless --profile-used names the
one they share (each part keeps its own), and nothing written when it refuses."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "eval", "scripts", "merge_step_records.py")


def part(cases, profile_used="h200-sxm-141gb", measured_at="2026-12-06T09:00:00Z"):
    return {"format": "ulysses-step-validation/1", "set": "scenarios/validation/h200-step.yaml",
            "profile_used": profile_used, "measured_at": measured_at, "command": "validate",
            "summary": {"x": 1}, "cases": [{"name": n, "keys": []} for n in cases]}


class Merge(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.dir.name, "merged.json")

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, rec):
        p = os.path.join(self.dir.name, name)
        with open(p, "w") as f:
            json.dump(rec, f)
        return p

    def run_tool(self, *args):
        return subprocess.run([sys.executable, TOOL, self.out] + list(args), capture_output=True, text=True)

    def test_cases_in_order_with_provenance(self):
        a = self.write("a.json", part(["c1", "c2"]))
        b = self.write("b.json", part(["c3"]))
        p = self.run_tool(a, b, "--add-key", "plan.x=1:y=2")
        self.assertEqual(p.returncode, 0, p.stderr)
        m = json.load(open(self.out))
        self.assertEqual([c["name"] for c in m["cases"]], ["c1", "c2", "c3"])
        self.assertEqual([q["cases"] for q in m["parts"]], [["c1", "c2"], ["c3"]])
        self.assertNotIn("summary", m)
        self.assertEqual(m["profile_used"], "h200-sxm-141gb")

    def test_case_in_two_parts(self):
        a = self.write("a.json", part(["c1"]))
        b = self.write("b.json", part(["c1"]))
        p = self.run_tool(a, b)
        self.assertEqual(p.returncode, 2)
        self.assertIn("in two parts", p.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_different_profiles(self):
        a = self.write("a.json", part(["c1"], profile_used="/root/out/step/h200-sxm-141gb.yaml"))
        b = self.write("b.json", part(["c2"], profile_used="profiles/h200-sxm-141gb.yaml"))
        p = self.run_tool(a, b)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1)
        self.assertIn("--profile-used", p.stderr)
        self.assertFalse(os.path.exists(self.out))
        p = self.run_tool(a, b, "--profile-used", "profiles/h200-sxm-141gb.yaml")
        self.assertEqual(p.returncode, 0, p.stderr)
        m = json.load(open(self.out))
        self.assertEqual(m["profile_used"], "profiles/h200-sxm-141gb.yaml")
        self.assertEqual([q["profile_used"] for q in m["parts"]],
                         ["/root/out/step/h200-sxm-141gb.yaml", "profiles/h200-sxm-141gb.yaml"])

    def test_bad_arguments_and_parts(self):
        a = self.write("a.json", part(["c1"]))
        broken = os.path.join(self.dir.name, "broken.json")
        with open(broken, "w") as f:
            f.write("{not json")
        for args in ([a, "--profile-used"], [a, "--add-key"], [a, "--add-key", "novalue"],
                     [a, os.path.join(self.dir.name, "missing.json")], [a, broken]):
            p = self.run_tool(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, (args, p.stderr))
            self.assertTrue(p.stderr.startswith("merge_step_records.py: "), p.stderr)
            self.assertFalse(os.path.exists(self.out))


if __name__ == "__main__":
    unittest.main()
