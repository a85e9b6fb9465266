#!/usr/bin/env python3
"""runtime/deepspeed/ulysses_worker/energy.py against NVML's stand-in (tests/runtime/fake_nvml.cpp, its path the
first argument): the counter of the GPU named by its PCI bus id in joules (250 J more at each read), None for a bus
NVML does not know and for a library that does not open. No torch needed: the bus ids are given."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "runtime", "deepspeed"))
from ulysses_worker.energy import EnergyCounter  # noqa: E402

FAKE = None


class WorkerEnergy(unittest.TestCase):
    def setUp(self):
        os.environ["ULYSSES_NVML_LIB"] = FAKE

    def tearDown(self):
        os.environ.pop("ULYSSES_NVML_LIB", None)

    def test_counter_by_bus_id(self):
        e = EnergyCounter(bus_ids=[b"00000000:19:00.0", b"0000:19:00.0"])
        a, b = e.joules(), e.joules()
        self.assertGreaterEqual(a, 5000)
        self.assertAlmostEqual(b - a, 250.0)
        self.assertIsNotNone(EnergyCounter(bus_ids=[b"00000000:3b:00.0", b"0000:19:00.0"]).joules())  # the second

    def test_not_measured(self):
        self.assertIsNone(EnergyCounter(bus_ids=[b"0000:3b:00.0"]).joules())
        self.assertIsNone(EnergyCounter(bus_ids=[]).joules())
        os.environ["ULYSSES_NVML_LIB"] = "/nonexistent/libnvidia-ml.so.1"
        self.assertIsNone(EnergyCounter(bus_ids=[b"0000:19:00.0"]).joules())


if __name__ == "__main__":
    FAKE = sys.argv.pop(1)
    unittest.main()
