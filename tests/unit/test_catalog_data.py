"""The built-in catalog: coverage of the canonical ids, provenance on every figure, dense vs sparse."""

import pytest

from xpuplan.catalog import load_catalog

CANONICAL = """
nvidia-v100-sxm-32gb nvidia-a100-sxm-40gb nvidia-a100-sxm-80gb nvidia-a100-pcie-40gb nvidia-a100-pcie-80gb
nvidia-h100-sxm-80gb nvidia-h100-pcie-80gb nvidia-h100-nvl-94gb nvidia-h800-sxm-80gb nvidia-h20-96gb
nvidia-h200-sxm-141gb nvidia-b200-180gb nvidia-gb200-186gb nvidia-gb300 nvidia-l40s-48gb nvidia-rtx-4090-24gb
amd-mi250x amd-mi300x-192gb amd-mi325x-256gb amd-mi355x-288gb google-tpu-v4 google-tpu-v5e google-tpu-v5p
google-tpu-v6e intel-gaudi2 intel-gaudi3 huawei-ascend-910 huawei-ascend-910b huawei-ascend-910c huawei-ascend-310
huawei-ascend-310p cambricon-mlu370-x4 cambricon-mlu370-x8 cambricon-mlu370-s4 cambricon-mlu590 enflame-t10
enflame-t20 enflame-i20 enflame-s60 hygon-dcu-z100 hygon-dcu-k100
""".split()

# Chips the guide names, by the names people type.
GUIDE_NAMES = {
    "A100": "nvidia-a100-sxm-80gb",
    "H100": "nvidia-h100-sxm-80gb",
    "H200": "nvidia-h200-sxm-141gb",
    "B200": "nvidia-b200-180gb",
    "GB200": "nvidia-gb200-186gb",
    "RTX 4090": "nvidia-rtx-4090-24gb",
    "MI300X": "amd-mi300x-192gb",
    "910B": "huawei-ascend-910b",
    "910C": "huawei-ascend-910c",
    "MLU590": "cambricon-mlu590",
    "MLU370-X8": "cambricon-mlu370-x8",
}
GUIDE_IDS = ["nvidia-b100", "amd-mi350x-288gb", "huawei-ascend-910b3", "cambricon-mlu370-s8", "enflame-i10",
             "enflame-l600", "generic-cpu"]


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@pytest.mark.parametrize("device_id", CANONICAL + GUIDE_IDS)
def test_canonical_and_guide_ids_present(cat, device_id):
    assert device_id in cat.devices


@pytest.mark.parametrize("alias, device_id", GUIDE_NAMES.items())
def test_aliases(cat, alias, device_id):
    assert cat.get(alias).id == device_id


def test_guide_chinese_chips_by_name(cat):
    for name in ("深算一号", "深算二号", "深算三号", "邃思", "T10", "i20", "S60", "L600", "310P", "910B3"):
        assert name in cat, name


def test_every_figure_has_unit_source_trust(cat):
    for d in cat:
        assert d.figures, d.id
        for path, f in d.figures.items():
            assert f.unit in ("FLOP/s", "OP/s", "B", "B/s", "W", "USD", "USD/h"), (d.id, path)
            assert f.source.title and f.source.date, (d.id, path)
            assert f.trust in "ABCD", (d.id, path)
            assert f.low <= f.value <= f.high, (d.id, path)


def test_dense_never_equals_sparse(cat):
    for d in cat:
        for path, f in d.figures.items():
            if path.startswith("sparse_tflops."):
                dense = d.figure("dense_" + path[len("sparse_"):])
                if dense is not None:
                    assert dense.value < f.value, (d.id, path)


def test_h100_dense_is_half_the_datasheet_headline(cat):
    # The guide quotes 1979 TFLOPS FP16 for H100: that is the 2:4-sparse figure.
    h100 = cat.get("H100")
    assert h100.peak_flops("fp16") / 1e12 == pytest.approx(989.4, rel=0.01)
    assert h100.figure("sparse_tflops.fp16").value / 1e12 == pytest.approx(1979, rel=0.01)


def test_every_accelerator_has_core_figures(cat):
    """Every device can be planned: memory capacity and bandwidth and a dense compute peak (issue 14:
    where no credible figure exists, the widest credible range with trust D, docs/catalog.md)."""
    incomplete = [d.id for d in cat if not (d.figure("memory.capacity_gb") and d.figure("memory.bandwidth_gb_per_s")
                                            and d.dense_precisions)]
    assert not incomplete


def test_derived_figures_are_trust_d_ranges_with_their_derivation(cat):
    """A figure whose source is an xpuplan estimate is trust D and a range, and its note says how it was derived."""
    derived = [(d.id, f) for d in cat for f in d.figures.values() if f.source.key == "xpuplan-derived"]
    assert len(derived) >= 10
    for dev, f in derived:
        assert f.trust == "D", (dev, f.path)
        assert f.is_range or f.note, (dev, f.path)


def test_chinese_chips_flagged_and_low_trust_ranges(cat):
    cn = cat.filter(origin="CN")
    assert len(cn) >= 15
    # no Chinese chip is graded entirely A (few vendor datasheets are public)
    assert any(f.is_range for d in cn for f in d.figures.values())


def test_kinds(cat):
    assert {d.kind for d in cat} == {"GPU", "NPU", "TPU", "CPU"}
