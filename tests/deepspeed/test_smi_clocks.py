#!/usr/bin/env python3
"""eval/scripts/smi_clocks.py on synthetic samples: each part gets the samples between its marks, the loaded ones
(power >= --busy-w) give the median and lowest SM clock, mean power and the share at the cap; the energy is the
trapezoid sum over every sample of the part; '[N/A]' samples are left out; exit 2 with one line for a missing
column, a part without its end, a part without samples, or an unreadable file."""
import datetime
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "eval", "scripts", "smi_clocks.py")
T0 = datetime.datetime(2026, 12, 6, 21, 48, 0)
HEAD = "timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu"


def stamp(sec):
    return (T0 + datetime.timedelta(seconds=sec)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def sample(sec, mhz, watts):
    return f"{stamp(sec)}, {mhz} MHz, 2619 MHz, {watts} W, 50"


class SmiClocks(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def run_tool(self, smi_lines, mark_lines, *args):
        smi, marks = os.path.join(self.dir.name, "smi.csv"), os.path.join(self.dir.name, "marks.txt")
        with open(smi, "w") as f:
            f.write("\n".join(smi_lines) + "\n")
        with open(marks, "w") as f:
            f.write("\n".join(mark_lines) + "\n")
        return subprocess.run([sys.executable, TOOL, smi, marks, *args], capture_output=True, text=True)

    def rows(self, out):
        return {" ".join(l.split()[:-8]): l.split()[-8:] for l in out.splitlines() if l and not l.startswith("#")}

    def test_parts_clocks_power_energy(self):
        smi = [HEAD,
               sample(0.0, 1980, 100), sample(1.0, 1400, 700), sample(2.0, 1300, 690), sample(3.0, 1500, 600),
               sample(4.0, 1980, 100),   # between the parts
               sample(5.0, 1700, 400), "2026/12/06 21:48:06.000, [N/A], 2619 MHz, [N/A], 50", sample(7.0, 1900, 200)]
        marks = [f"{stamp(0.0)} our step start", f"{stamp(3.0)} our step end",
                 f"{stamp(5.0)} peer start", f"{stamp(7.0)} peer end"]
        r = self.run_tool(smi, marks)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = self.rows(r.stdout)
        self.assertEqual(set(rows), {"our step", "peer"})
        sec, n, busy, clk, low, pw, cap, j = rows["our step"]
        self.assertEqual((sec, n, busy), ("3.00", "4", "3"))
        self.assertEqual((clk, low), ("1400", "1300"))        # median and lowest of 1400, 1300, 1500
        self.assertEqual(pw, "663.3")                          # (700 + 690 + 600) / 3
        self.assertEqual(cap, "66.7")                          # 700 and 690 are within 3 % of 700 W
        self.assertEqual(j, "1740.0")                          # trapezoids over 1 s each: 400 + 695 + 645
        sec, n, busy, clk, low, pw, cap, j = rows["peer"]
        self.assertEqual((n, busy, clk, pw), ("2", "1", "1700", "400.0"))  # the [N/A] sample left out
        self.assertEqual(j, "600.0")                           # one trapezoid over 2 s: (400 + 200) / 2 * 2

    def test_busy_threshold_and_limit(self):
        smi = [HEAD] + [sample(s, 1600, 500) for s in range(4)]
        marks = [f"{stamp(0)} x start", f"{stamp(3)} x end"]
        r = self.run_tool(smi, marks, "--busy-w", "600")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.rows(r.stdout)["x"][2:7], ["0", "-", "-", "-", "-"])
        r = self.run_tool(smi, marks, "--limit-w", "510")
        self.assertEqual(self.rows(r.stdout)["x"][6], "100.0")

    def test_one_gpu_of_several(self):
        head = "timestamp, index, clocks.current.sm [MHz], power.draw [W]"
        smi = [head] + [f"{stamp(s)}, {g}, {1400 + 100 * g} MHz, {600 + 50 * g} W" for s in range(3) for g in (0, 1)]
        marks = [f"{stamp(0)} x start", f"{stamp(2)} x end"]
        self.refuse(smi, marks, "samples of 2 GPUs (index 0, 1): pick one with --gpu")
        for g, clk, j in ((0, "1400", "1200.0"), (1, "1500", "1300.0")):  # 2 s at 600 or 650 W
            r = self.run_tool(smi, marks, "--gpu", str(g))
            self.assertEqual(r.returncode, 0, r.stderr)
            row = self.rows(r.stdout)["x"]
            self.assertEqual((row[1], row[3], row[7]), ("3", clk, j))
        self.refuse(smi, marks, "--gpu: no sample of GPU 2", "--gpu", "2")
        self.refuse([HEAD] + [sample(s, 1600, 500) for s in range(3)], marks, "no column 'index' to pick --gpu 0",
                    "--gpu", "0")

    def refuse(self, smi, marks, want, *args):
        r = self.run_tool(smi, marks, *args)
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(want, r.stderr)
        self.assertEqual(r.stdout, "")

    def test_bad_input(self):
        good = [HEAD] + [sample(s, 1600, 500) for s in range(4)]
        marks = [f"{stamp(0)} x start", f"{stamp(3)} x end"]
        self.refuse(["timestamp, power.draw [W]", f"{stamp(0)}, 500 W"], marks, "no column 'clocks.current.sm [MHz]'")
        self.refuse(good, [f"{stamp(0)} x start"], "'x' has a start and no end")
        self.refuse(good, [f"{stamp(1)} x end"], "'x end' without its start")
        self.refuse(good, ["yesterday x start"], "want 'YYYY/MM/DD")
        self.refuse(good, [f"{stamp(10)} late start", f"{stamp(12)} late end"], "part 'late': 0 sample(s)")
        self.refuse([HEAD, "noon, 1 MHz, 2 MHz, 3 W, 4"], marks, "smi.csv:2: timestamp")
        self.refuse(good, marks, "--busy-w", "--busy-w", "800")
        for name in ("smi.csv", "marks.txt"):  # bytes that are not UTF-8: one line naming the file
            r = self.run_tool(good, marks)
            with open(os.path.join(self.dir.name, name), "wb") as f:
                f.write(b"\xff\xfe\x00bad")
            r = subprocess.run([sys.executable, TOOL, os.path.join(self.dir.name, "smi.csv"),
                                os.path.join(self.dir.name, "marks.txt")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(f"{name}: not text", r.stderr)
        r = subprocess.run([sys.executable, TOOL, os.path.join(self.dir.name, "none.csv"), "m"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("none.csv: unreadable", r.stderr)


if __name__ == "__main__":
    unittest.main()
