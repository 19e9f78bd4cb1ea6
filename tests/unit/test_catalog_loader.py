import pytest

from tests.unit.hwfixture import GOOD, device, write
from xpuplan.catalog import build_catalog, load_catalog, load_hardware_file
from xpuplan.errors import UnknownIdError, UserInputError
from xpuplan.units import GB, GB_PER_S, GBIT, TFLOPS, GiB


def test_loads_and_converts_to_si(tmp_path):
    d = device(tmp_path)
    assert d.peak_flops("bf16") == 1000 * TFLOPS
    assert d.peak_flops("fp16") == 1000 * TFLOPS  # bf16 stands in for fp16
    assert d.memory_bytes == 80 * GB
    assert d.memory_bandwidth == 4000 * GB_PER_S
    f = d.figure("memory.bandwidth_gb_per_s")
    assert (f.low, f.high) == (3500 * GB_PER_S, 4000 * GB_PER_S)
    assert f.source.title == "TestCo X1 datasheet" and f.trust == "B"
    assert d.scale_out_bandwidth == 400 * GBIT
    assert d.scale_up_domain == 8


def test_sparse_never_used_as_dense(tmp_path):
    d = device(tmp_path)
    assert d.figure("sparse_tflops.bf16").value == 2 * d.peak_flops("bf16")
    with pytest.raises(UserInputError, match="int8"):
        d.peak_flops("int8")


def test_aliases_resolve(tmp_path):
    cat = build_catalog(load_hardware_file(write(tmp_path)))
    assert cat.get("x1").id == "testco-x1"
    assert cat.get("TEST_X1").id == "testco-x1"
    with pytest.raises(UnknownIdError, match="did you mean"):
        cat.get("testco-x2")


@pytest.mark.parametrize(
    "old, new, field, line",
    [
        ("bf16: {value: 1000, source: ds, trust: A}", "bf16: {value: 1000, source: ds, trust: E}", "dense_tflops.bf16.trust", 13),
        ("bf16: {value: 1000, source: ds, trust: A}", "bf16: {value: 1000, source: nope, trust: A}", "dense_tflops.bf16.source", 13),
        ("capacity_gb: {value: 80,", "capacity_gb: {value: -80,", "memory.capacity_gb.value", 18),
        ("min: 3500, max: 4000", "min: 4100, max: 4200", "memory.bandwidth_gb_per_s", 19),
        ("      domain_size: 8", "      domain_size: 8\n      speed: 3", "scale_up.speed", 24),
        ("    sparse_tflops:\n      bf16: {value: 2000", "    sparse_tflops:\n      bf16: {value: 1000", "dense_tflops.bf16", 13),
    ],
)
def test_malformed_entry_names_file_line_field(tmp_path, old, new, field, line):
    assert old in GOOD
    p = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(UserInputError) as exc:
        load_hardware_file(p)
    err = exc.value
    assert err.file == str(p)
    assert err.field is not None and err.field.startswith("devices[0].") and field in err.field
    assert err.line == line, err.render()


def test_malformed_yaml_syntax(tmp_path):
    p = write(tmp_path, GOOD.replace("kind: GPU", "kind: [GPU"))
    with pytest.raises(UserInputError) as exc:
        load_hardware_file(p)
    assert exc.value.line is not None and "malformed" in exc.value.message


def test_duplicate_alias_rejected(tmp_path):
    a = load_hardware_file(write(tmp_path))
    b = load_hardware_file(write(tmp_path, GOOD.replace("id: testco-x1", "id: testco-x1b"), "b.yaml"))
    with pytest.raises(UserInputError, match="alias"):
        build_catalog(a + b)


def test_user_catalog_via_env(tmp_path, monkeypatch):
    write(tmp_path)
    monkeypatch.setenv("XPUPLAN_HARDWARE_PATH", str(tmp_path))
    cat = load_catalog()
    assert "testco-x1" in cat


def test_capacity_gib_converts_with_binary_prefix(tmp_path):
    p = write(tmp_path, GOOD.replace("capacity_gb: {value: 80,", "capacity_gib: {value: 80,"))
    d = build_catalog(load_hardware_file(p)).get("testco-x1")
    assert d.memory_bytes == 80 * 2**30 == 80 * GiB
    f = d.figure("memory.capacity_gb")  # one runtime figure whichever unit the file printed
    assert f.printed_value == 80 and f.printed_unit_key == "capacity_gib" and f.unit == "B"


def test_capacity_gb_stays_decimal(tmp_path):
    d = device(tmp_path)
    assert d.memory_bytes == 80e9
    assert d.figure("memory.capacity_gb").printed_unit_key == "capacity_gb"


def test_capacity_in_both_units_rejected(tmp_path):
    both = GOOD.replace("capacity_gb: {value: 80, source: ds, trust: A}",
                        "capacity_gb: {value: 80, source: ds, trust: A}\n      capacity_gib: {value: 80, source: ds, trust: A}")
    assert both != GOOD
    with pytest.raises(UserInputError, match="not both") as exc:
        load_hardware_file(write(tmp_path, both))
    assert exc.value.field is not None and "memory" in exc.value.field


def test_shipped_hbm_capacities_are_binary():
    cat = load_catalog()
    assert cat.get("nvidia-h100-sxm-80gb").memory_bytes == 80 * 2**30
    assert cat.get("nvidia-a100-sxm-80gb").memory_bytes == 80 * 2**30
    assert cat.get("amd-mi300x-192gb").memory_bytes == 192 * 2**30
    assert cat.get("nvidia-h100-sxm-80gb").figure("memory.capacity_gb").printed_unit_key == "capacity_gib"


def test_capacity_gib_override_replaces_the_one_capacity_figure():
    from xpuplan.catalog.overrides import apply_overrides, parse_figure_override

    cat = load_catalog()
    dev = cat.get("nvidia-h100-sxm-80gb")
    o = parse_figure_override("nvidia-h100-sxm-80gb:memory.capacity_gib=96")
    out = apply_overrides({dev.id: dev}, lambda name: dev.id, [o])[dev.id]
    assert out.memory_bytes == 96 * GiB
    assert "memory.capacity_gib" not in out.figures
    o = parse_figure_override("nvidia-h100-sxm-80gb:memory.capacity_gb=96")
    assert apply_overrides({dev.id: dev}, lambda name: dev.id, [o])[dev.id].memory_bytes == 96 * GB


@pytest.mark.parametrize("device_id", ["nvidia-h100-sxm-80gb", "nvidia-h200-sxm-141gb", "nvidia-b200-180gb",
                                       "nvidia-gb200-186gb", "nvidia-gb300", "nvidia-b300-288gb"])
def test_nvidia_training_systems_name_their_compute_nics(device_id):
    """Every NVIDIA training system (DGX/HGX and the NVL72 racks) lists its per-GPU compute NIC: without one the
    cluster falls back to the 100 Gb/s default and multi-rack pipelines look 4x slower than they are."""
    d = load_catalog().get(device_id)
    f = d.figure("scale_out.nic_gbit_per_s_per_device")
    assert f.value >= 400 * GBIT and f.source.url.startswith("https://")


def test_v100_servers_had_less_network_than_the_default_assumes():
    """DGX-1 and DGX-2 gave each V100 50 Gb/s of EDR InfiniBand (Megatron-LM 2019 ran on DGX-2H): half the
    100 Gb/s default a device without a NIC figure gets."""
    f = load_catalog().get("nvidia-v100-sxm-32gb").figure("scale_out.nic_gbit_per_s_per_device")
    assert f.value == 50 * GBIT and "1909.08053" in (f.source.url or "")
