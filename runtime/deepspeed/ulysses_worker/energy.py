"""This rank's GPU energy counter (NVML's nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver loaded),
read through ctypes around the timed steps, as our runtime reads it (runtime/power_sampler.hpp EnergyCounter; the
environment's ULYSSES_NVML_LIB names a stand-in library, as the tests do). joules() is None where NVML, the GPU's
handle or its counter is missing: the step's energy is then not measured."""
import ctypes
import os


def torch_bus_ids():
    """The current CUDA device's PCI address as NVML takes it (domain of 8 or 4 hex digits), from torch."""
    import torch
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    dom, bus, dev = (getattr(p, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id"))
    if None in (dom, bus, dev):
        return []
    return [f"{dom:08x}:{bus:02x}:{dev:02x}.0".encode(), f"{dom:04x}:{bus:02x}:{dev:02x}.0".encode()]


class EnergyCounter:
    def __init__(self, bus_ids=None):
        self._lib = self._dev = None
        try:
            lib = ctypes.CDLL(os.environ.get("ULYSSES_NVML_LIB", "libnvidia-ml.so.1"))
            if lib.nvmlInit_v2() != 0:
                return
            dev = ctypes.c_void_p()
            for bus in torch_bus_ids() if bus_ids is None else bus_ids:
                if lib.nvmlDeviceGetHandleByPciBusId_v2(ctypes.c_char_p(bus), ctypes.byref(dev)) == 0:
                    self._lib, self._dev = lib, dev
                    return
        except (OSError, AttributeError):  # no driver library, or one without these entry points
            return

    def joules(self):
        if self._lib is None:
            return None
        mj = ctypes.c_ulonglong()
        if self._lib.nvmlDeviceGetTotalEnergyConsumption(self._dev, ctypes.byref(mj)) != 0:
            return None
        return mj.value / 1e3
