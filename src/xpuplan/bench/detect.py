"""Which accelerator is here, what software drives it, and which catalog device it is.

Backends: CUDA and ROCm through ``torch.cuda`` (ROCm builds set ``torch.version.hip``), Ascend
through ``torch_npu`` (``torch.npu``), Cambricon through ``torch_mlu`` (``torch.mlu``), the CPU
otherwise. :func:`catalog_id_for` maps the name the driver reports to a catalog id.
"""

from __future__ import annotations

import importlib
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xpuplan.errors import UserInputError

BACKENDS = ("auto", "cuda", "npu", "mlu", "cpu")

#: Catalog id used for CPUs when no better match exists.
GENERIC_CPU_ID = "generic-cpu"

#: Seconds an external query (nvidia-smi, rocm-smi, npu-smi, cnmon) may take.
SMI_TIMEOUT_S = 5.0

#: Driver-reported names -> catalog ids, first match wins. Patterns are searched
#: case-insensitively in the reported name with vendor words removed.
NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"GB300", "nvidia-gb300"),
    (r"GB200", "nvidia-gb200-186gb"),
    (r"\bB200", "nvidia-b200-180gb"),
    (r"\bB100", "nvidia-b100"),
    (r"H200", "nvidia-h200-sxm-141gb"),
    (r"H100.*NVL", "nvidia-h100-nvl-94gb"),
    (r"H100.*PCIE", "nvidia-h100-pcie-80gb"),
    (r"H100", "nvidia-h100-sxm-80gb"),  # "NVIDIA H100 80GB HBM3" is the SXM5 part
    (r"H800", "nvidia-h800-sxm-80gb"),
    (r"\bH20\b", "nvidia-h20-96gb"),
    (r"A100.*PCIE.*40GB|A100.*40GB.*PCIE", "nvidia-a100-pcie-40gb"),
    (r"A100.*PCIE|A100.*80GB.*PCIE", "nvidia-a100-pcie-80gb"),
    (r"A100.*80GB", "nvidia-a100-sxm-80gb"),
    (r"A100", "nvidia-a100-sxm-40gb"),
    (r"V100", "nvidia-v100-sxm-32gb"),
    (r"L40S", "nvidia-l40s-48gb"),
    (r"RTX 4090", "nvidia-rtx-4090-24gb"),
    (r"MI355", "amd-mi355x-288gb"),
    (r"MI325", "amd-mi325x-256gb"),
    (r"MI300X", "amd-mi300x-192gb"),
    (r"MI250X", "amd-mi250x"),
    (r"ASCEND\s*910\s*B3", "huawei-ascend-910b3"),
    (r"ASCEND\s*910\s*B", "huawei-ascend-910b"),
    (r"ASCEND\s*910\s*C", "huawei-ascend-910c"),
    (r"ASCEND\s*910", "huawei-ascend-910"),
    (r"ASCEND\s*310\s*P", "huawei-ascend-310p"),
    (r"ASCEND\s*310", "huawei-ascend-310"),
    (r"MLU\s*590", "cambricon-mlu590"),
    (r"MLU\s*370.*X8", "cambricon-mlu370-x8"),
    (r"MLU\s*370.*X4", "cambricon-mlu370-x4"),
    (r"MLU\s*370.*S4", "cambricon-mlu370-s4"),
    (r"MLU\s*370.*S8", "cambricon-mlu370-s8"),
)


def catalog_id_for(name: str, kind: str = "GPU") -> str | None:
    """Catalog id for a driver-reported device name (None when unknown).

    Tries the catalog's own ids and aliases first, then :data:`NAME_PATTERNS`; a CPU maps to
    :data:`GENERIC_CPU_ID` when that exists. Only ids present in the catalog are returned.
    """
    from xpuplan.catalog import load_catalog

    cat = load_catalog()
    if kind.upper() == "CPU":
        return GENERIC_CPU_ID if GENERIC_CPU_ID in cat else None
    cleaned = re.sub(r"\b(NVIDIA|AMD|Instinct|Huawei|Cambricon|Tesla|GeForce)\b", " ", name, flags=re.I)
    cleaned = re.sub(r"[-_]", " ", cleaned).strip()
    for candidate in (name, cleaned):
        if candidate and candidate in cat:
            return cat.resolve(candidate)
    for pattern, dev_id in NAME_PATTERNS:
        if re.search(pattern, cleaned, flags=re.I) and dev_id in cat:
            return dev_id
    return None


@dataclass
class Backend:
    """A device to benchmark on, with what is known about its software."""

    kind: str  # cuda, rocm, npu, mlu, cpu
    torch_device: str  # "cuda:0", "npu:0", "cpu"
    name: str
    vendor: str
    device_kind: str  # GPU, NPU, CPU (catalog's kind)
    environment: dict[str, Any] = field(default_factory=dict)
    catalog_id: str | None = None
    #: Last-level cache (CPU L3, GPU L2) in bytes; benchmarks of memory-bound shapes rotate
    #: operand copies beyond it so weights come from memory, as in a real model.
    cache_bytes: int | None = None

    def synchronize(self) -> None:
        """Wait for queued work on the device (a no-op on the CPU)."""
        if self.kind == "cpu":
            return
        import torch

        module = {"cuda": "cuda", "rocm": "cuda", "npu": "npu", "mlu": "mlu"}[self.kind]
        getattr(torch, module).synchronize()

    @property
    def is_accelerator(self) -> bool:
        return self.kind != "cpu"

    def summary(self) -> dict[str, Any]:
        return {"backend": self.kind, "device": self.torch_device, "name": self.name, "vendor": self.vendor,
                "catalog_id": self.catalog_id, "environment": self.environment}


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _nvidia_smi(index: int) -> dict[str, Any]:
    fields = ("driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem", "power.limit",
              "temperature.gpu", "pstate")
    text = _run(["nvidia-smi", f"--id={index}", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
    if not text:
        return {}
    values = [v.strip() for v in text.splitlines()[0].split(",")]
    return {f"nvidia_smi.{k}": v for k, v in zip(fields, values, strict=False)}


def _cpu_info() -> dict[str, Any]:
    info: dict[str, Any] = {"machine": platform.machine(), "cpu_count": os.cpu_count()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        text = ""
    m = re.search(r"^model name\s*:\s*(.+)$", text, flags=re.M)
    if m:
        info["model_name"] = m.group(1).strip()
    mhz = [float(x) for x in re.findall(r"^cpu MHz\s*:\s*([\d.]+)$", text, flags=re.M)]
    if mhz:
        info["clock_mhz_mean"] = round(sum(mhz) / len(mhz), 1)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, flags=re.M)
    if flags:
        wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "fma")
        have = set(flags.group(1).split())
        info["isa"] = [f for f in wanted if f in have]
    for path, key in (("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq", "max_clock_mhz"),
                      ("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "governor")):
        try:
            with open(path, encoding="utf-8") as f:
                v = f.read().strip()
            info[key] = round(int(v) / 1000, 1) if key == "max_clock_mhz" else v
        except (OSError, ValueError):
            pass
    return info


def cpu_last_level_cache_bytes() -> int | None:
    """Size of the largest CPU cache level (sysfs), bytes; None when unknown."""
    best: tuple[int, int] | None = None
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(base)
    except OSError:
        return None
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(f"{base}/{entry}/level", encoding="utf-8") as f:
                level = int(f.read())
            with open(f"{base}/{entry}/size", encoding="utf-8") as f:
                text = f.read().strip()
        except (OSError, ValueError):
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", text)
        if not m:
            continue
        size = int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)]
        if best is None or level > best[0]:
            best = (level, size)
    return best[1] if best else None


def _torch_env(torch: Any) -> dict[str, Any]:
    env: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                           "platform": platform.platform(), "torch_threads": torch.get_num_threads()}
    cap = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    if cap:
        env["cpu_capability"] = cap()
    return env


def _detect_cuda(torch: Any, index: int) -> Backend:
    props = torch.cuda.get_device_properties(index)
    is_rocm = getattr(torch.version, "hip", None) is not None
    env = _torch_env(torch)
    env.update({"cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None),
                "compute_capability": f"{props.major}.{props.minor}", "multiprocessors": props.multi_processor_count,
                "memory_bytes": props.total_memory, "device_count": torch.cuda.device_count()})
    if torch.backends.cudnn.is_available():
        env["cudnn"] = torch.backends.cudnn.version()
    try:
        env["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:  # noqa: BLE001 - optional information
        pass
    if is_rocm:
        gcn = getattr(props, "gcnArchName", None)
        if gcn:
            env["gcn_arch"] = gcn
        smi = _run(["rocm-smi", "--showdriverversion", "--showclocks", "--csv"])
        if smi:
            env["rocm_smi"] = smi[:2000]
    else:
        env.update(_nvidia_smi(index))
    name = props.name
    l2 = getattr(props, "L2_cache_size", None)
    if l2:
        env["l2_cache_bytes"] = l2
    return Backend("rocm" if is_rocm else "cuda", f"cuda:{index}", name, "AMD" if is_rocm else "NVIDIA", "GPU", env,
                   catalog_id_for(name, "GPU"), cache_bytes=l2 or None)


def _detect_npu(torch: Any, index: int) -> Backend:
    torch_npu = importlib.import_module("torch_npu")
    name = torch.npu.get_device_name(index)
    env = _torch_env(torch)
    env.update({"torch_npu": getattr(torch_npu, "__version__", None), "device_count": torch.npu.device_count()})
    cann = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    if cann:
        env["cann_home"] = cann
    smi = _run(["npu-smi", "info"])
    if smi:
        env["npu_smi"] = smi[:2000]
    return Backend("npu", f"npu:{index}", name, "Huawei", "NPU", env, catalog_id_for(name, "NPU"))


def _detect_mlu(torch: Any, index: int) -> Backend:
    torch_mlu = importlib.import_module("torch_mlu")
    name = torch.mlu.get_device_name(index)
    env = _torch_env(torch)
    env.update({"torch_mlu": getattr(torch_mlu, "__version__", None), "device_count": torch.mlu.device_count()})
    smi = _run(["cnmon", "info", "-c", str(index)])
    if smi:
        env["cnmon"] = smi[:2000]
    return Backend("mlu", f"mlu:{index}", name, "Cambricon", "NPU", env, catalog_id_for(name, "NPU"))


def _detect_cpu(torch: Any) -> Backend:
    env = _torch_env(torch)
    cpu = _cpu_info()
    env.update({f"cpu.{k}": v for k, v in cpu.items()})
    name = str(cpu.get("model_name") or platform.processor() or platform.machine() or "CPU")
    llc = cpu_last_level_cache_bytes()
    if llc:
        env["cpu.last_level_cache_bytes"] = llc
    return Backend("cpu", "cpu", name, "CPU", "CPU", env, catalog_id_for(name, "CPU"), cache_bytes=llc)


def _has(torch: Any, attr: str, plugin: str) -> bool:
    try:
        importlib.import_module(plugin)
    except ImportError:
        return False
    mod = getattr(torch, attr, None)
    return bool(mod is not None and mod.is_available())


_PROBES: dict[str, Callable[[Any], bool]] = {
    "cuda": lambda t: bool(t.cuda.is_available()),
    "npu": lambda t: _has(t, "npu", "torch_npu"),
    "mlu": lambda t: _has(t, "mlu", "torch_mlu"),
}


def detect_backend(requested: str = "auto", index: int = 0) -> Backend:
    """The device to benchmark: ``auto`` picks CUDA/ROCm, then Ascend, then Cambricon, then CPU."""
    if requested not in BACKENDS:
        raise UserInputError(f"expected one of {', '.join(BACKENDS)}, got {requested!r}", field="device")
    from xpuplan.bench import require_torch

    torch = require_torch()
    order = ("cuda", "npu", "mlu") if requested == "auto" else (() if requested == "cpu" else (requested,))
    for kind in order:
        if _PROBES[kind](torch):
            return {"cuda": _detect_cuda, "npu": _detect_npu, "mlu": _detect_mlu}[kind](torch, index)
        if requested != "auto":
            raise UserInputError(f"no {kind} device is available to this PyTorch build", field="device")
    return _detect_cpu(torch)
