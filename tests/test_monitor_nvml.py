"""The monitor's GPU readings: each NVML quantity read on its own, the calls that failed recorded, the device's
idle figures and the training phase's energy in the record.

There is no GPU on the machines these tests run on, so NVML is a stand-in module in place of `pynvml`: its
device is a counter of milliwatts and bytes, but its errors, answers and constants are pynvml's own (a
refused call raises pynvml.NVMLError(code), which pynvml turns into NVMLError_NotSupported and the like).
"""

from __future__ import annotations

import subprocess
import sys
import types

import pynvml
import pytest

from dlbench.run import build_record
from dlbench.run.monitor import Monitor, idle_gpu, open_gpu

MIB = 2**20


def fake_nvml(*, refuse: tuple[str, ...] = ("nvmlDeviceGetPowerUsage",), used_mib: int = 700, gpus: int = 1):
    """A `pynvml` with one device whose `refuse`d calls raise as pynvml does for an unsupported query."""
    nvml = types.ModuleType("pynvml")
    for name in dir(pynvml):  # the error classes and codes, the answer structures
        if name.startswith(("NVMLError", "NVML_", "c_nvml")):
            setattr(nvml, name, getattr(pynvml, name))
    state = {"init": 0, "energy_mj": 5_000_000}

    def call(name, answer):
        def nvml_call(*args):
            if not state["init"]:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
            if name in refuse:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return answer(*args)
        setattr(nvml, name, nvml_call)

    def handle(index):
        if not 0 <= index < gpus:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return ("handle", index)

    def energy(h):
        state["energy_mj"] += 25_000  # 25 J a reading
        return state["energy_mj"]

    nvml.nvmlInit = lambda: state.update(init=state["init"] + 1)
    call("nvmlDeviceGetHandleByIndex", handle)
    call("nvmlDeviceGetHandleByUUID", lambda uuid: ("handle", uuid))
    call("nvmlDeviceGetUtilizationRates", lambda h: pynvml.c_nvmlUtilization_t(gpu=37, memory=12))
    call("nvmlDeviceGetMemoryInfo", lambda h: pynvml.c_nvmlMemory_t(total=80 * 1024 * MIB,
                                                                     free=(80 * 1024 - used_mib) * MIB,
                                                                     used=used_mib * MIB))
    call("nvmlDeviceGetPowerUsage", lambda h: 123_456)  # mW
    call("nvmlDeviceGetTotalEnergyConsumption", energy)
    return nvml


def test_the_stand_in_raises_as_pynvml_does(monkeypatch):
    nvml = fake_nvml()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_NotSupported) as refused:
        nvml.nvmlDeviceGetPowerUsage(nvml.nvmlDeviceGetHandleByIndex(0))
    assert str(refused.value) == "Not Supported" and isinstance(refused.value, pynvml.NVMLError)


def test_an_unsupported_power_call_leaves_out_the_power_alone_and_is_recorded(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    gpu = open_gpu(0)
    first, second = gpu.read(), gpu.read()
    assert "gpu_power_w" not in first
    assert first["gpu_util_pct"] == 37 and first["gpu_mem_mb"] == 700.0
    assert first["gpu_energy_j"] == 25.0 and second["gpu_energy_j"] == 50.0  # since the device was opened
    assert gpu.failures() == "nvmlDeviceGetPowerUsage: NVMLError_NotSupported (Not Supported) (2 of 2 calls)"


def test_every_call_that_fails_is_named_and_a_device_without_a_counter_has_no_energy(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(refuse=("nvmlDeviceGetPowerUsage",
                                                                 "nvmlDeviceGetTotalEnergyConsumption")))
    gpu = open_gpu(0)
    reading = gpu.read()
    assert set(reading) == {"gpu_util_pct", "gpu_mem_mb"}
    failures = gpu.failures().split("; ")
    assert failures == ["nvmlDeviceGetPowerUsage: NVMLError_NotSupported (Not Supported) (1 of 1 calls)",
                        # asked once, when the device was opened: a device without a counter is not asked again
                        "nvmlDeviceGetTotalEnergyConsumption: NVMLError_NotSupported (Not Supported) (1 of 1 calls)"]


def test_a_device_nvml_cannot_open_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    assert open_gpu(3) == "NVML could not open GPU 3: NVMLError_InvalidArgument (Invalid Argument)"
    assert idle_gpu(3) == {"gpu_mem_idle_mb": None, "gpu_power_idle_w": None}


def test_the_monitor_keeps_the_gpu_fields_nvml_answered(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.8)"])
    mon = Monitor(proc.pid, 0.05, gpu_index=0).start()
    proc.wait(timeout=600)
    mon.stop()
    assert len(mon.samples) >= 3
    assert all(s["gpu_mem_mb"] == 700.0 and s["gpu_util_pct"] == 37 and "gpu_power_w" not in s for s in mon.samples)
    assert mon.gpu_failures().startswith("nvmlDeviceGetPowerUsage: NVMLError_NotSupported (Not Supported)")
    assert Monitor(proc.pid, 0.05, gpu_index=None).gpu_failures() is None  # a CPU point reads no GPU
    assert Monitor(proc.pid, 0.05, gpu_index=5).gpu_failures().startswith("NVML could not open GPU 5")


def _samples(energy_per_s: float, power_w: float | None) -> list[dict]:
    """Readings every 0.5 s from t = 0 to 10: 900 MiB in use, energy counted at a steady rate."""
    out = []
    for i in range(21):
        s = {"t": i * 0.5, "cpu_pct": 100.0, "rss_mb": 500.0, "threads": 4, "gpu_util_pct": 80.0,
             "gpu_mem_mb": 900.0 + (300.0 if 4 <= i * 0.5 <= 8 else 0.0), "gpu_energy_j": energy_per_s * i * 0.5}
        if power_w is not None:
            s["gpu_power_w"] = power_w
        out.append(s)
    return out


def test_the_record_gives_the_idle_device_and_the_energy_of_the_training_phase():
    spans = [("build", 1.0, 3.2), ("train", 3.2, 8.7), ("test", 8.7, 9.0)]
    idle = {"gpu_mem_idle_mb": 650.0, "gpu_power_idle_w": 70.0}
    summary = build_record.resource_summary(_samples(200.0, 190.0), spans, idle)
    assert summary["gpu_energy_train_j"] == pytest.approx(200.0 * 5.5)  # the counter, between 3.2 s and 8.7 s
    assert summary["gpu_energy_source"] == "counter"
    assert summary["gpu_energy_train_above_idle_j"] == pytest.approx(200.0 * 5.5 - 70.0 * 5.5)
    assert summary["gpu_mem_peak_mb"] == 1200.0 and summary["gpu_mem_idle_mb"] == 650.0
    assert summary["gpu_mem_peak_above_idle_mb"] == 550.0
    assert summary["gpu_power_mean_w"] == 190.0 and summary["gpu_power_idle_w"] == 70.0


def test_without_an_energy_counter_the_energy_is_mean_power_times_time_and_says_so():
    spans = [("train", 2.0, 6.0)]
    samples = [{k: v for k, v in s.items() if k != "gpu_energy_j"} for s in _samples(0.0, 150.0)]
    summary = build_record.resource_summary(samples, spans, {"gpu_mem_idle_mb": 600.0, "gpu_power_idle_w": None})
    assert summary["gpu_energy_train_j"] == pytest.approx(600.0) and summary["gpu_energy_source"] == "power x time"
    assert summary["gpu_energy_train_above_idle_j"] is None


def test_without_power_readings_the_other_gpu_fields_are_still_summarised():
    summary = build_record.resource_summary(_samples(100.0, None), [("train", 1.0, 9.0)], {})
    assert summary["gpu_power_mean_w"] is None and summary["gpu_power_idle_w"] is None
    assert summary["gpu_util_mean_pct"] == 80.0 and summary["gpu_energy_train_j"] == pytest.approx(800.0)
    one = build_record.resource_summary(_samples(100.0, None)[:1], [("train", 1.0, 9.0)], {})
    assert one["gpu_energy_train_j"] is None
