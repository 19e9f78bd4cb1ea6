"""A small, self-contained catalog file for loader and roofline tests."""

from pathlib import Path

GOOD = """\
schema_version: 1
vendor: TestCo
sources:
  ds: {title: "TestCo X1 datasheet", date: "2024-01", kind: vendor, url: "https://example.invalid/x1"}
devices:
  - id: testco-x1
    name: TestCo X1
    aliases: ["X1", "Test X1"]
    kind: GPU
    launch_year: 2024
    origin_country: US
    dense_tflops:
      bf16: {value: 1000, source: ds, trust: A}
      fp8: {value: 2000, source: ds, trust: A}
    sparse_tflops:
      bf16: {value: 2000, source: ds, trust: A}
    memory:
      capacity_gb: {value: 80, source: ds, trust: A}
      bandwidth_gb_per_s: {value: 4000, min: 3500, max: 4000, source: ds, trust: B, note: "two figures published"}
    scale_up:
      name: XLink
      bandwidth_gb_per_s_per_direction: {value: 400, source: ds, trust: A}
      domain_size: 8
      topology: "switch, all-to-all"
    scale_out:
      nic_gbit_per_s_per_device: {value: 400, source: ds, trust: B}
    power:
      tdp_w: {value: 700, source: ds, trust: A}
    ecosystem:
      software_stack: CUDA
      pytorch: native
      maturity: 5
"""


def write(tmp_path: Path, text: str = GOOD, name: str = "testco.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def device(tmp_path: Path):
    from xpuplan.catalog import load_hardware_file

    return load_hardware_file(write(tmp_path))[0]
