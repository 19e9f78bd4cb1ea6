"""SGLang's memory defaults by release (serve.engine_memory), transcribed from its server_args.py."""

from __future__ import annotations

import pytest

from xpuplan.serve.engine_memory import sglang_memory_defaults

H100_MIB = 80 * 1024.0
H200_MIB = 141e9 / 2**20


@pytest.mark.parametrize(("tp", "frac"), [(1, 0.88), (2, 0.87), (4, 0.85), (8, 0.81), (16, 0.79)])
def test_before_0_4_6_the_fraction_follows_the_tp_size(tp, frac):
    md = sglang_memory_defaults((0, 4, 3), H100_MIB, tp)
    assert md.memory_fraction == frac and md.prefill_chunk_tokens == 8192
    assert sglang_memory_defaults((0, 4, 3), 24_000, tp).prefill_chunk_tokens == 2048


def test_0_4_6_reserves_13_gib_above_80_gib():
    assert sglang_memory_defaults((0, 4, 7), H100_MIB, 8).memory_fraction == 0.81
    md = sglang_memory_defaults((0, 4, 7), H200_MIB, 8)
    assert md.memory_fraction == pytest.approx((H200_MIB - 13 * 1024) / H200_MIB)


def test_0_4_9_to_0_5_2_reserve_by_device_class():
    # 9.5 + P/2 GiB below 90 GiB; 12 + P/2 below 160; 32 above; chunk 16,384 from 160 GiB
    assert sglang_memory_defaults((0, 5, 2), H100_MIB, 8).memory_fraction == round((81920 - 13.5 * 1024) / 81920, 3)
    assert sglang_memory_defaults((0, 5, 2), H200_MIB, 1).memory_fraction == round(
        (H200_MIB - 12.5 * 1024) / H200_MIB, 3)
    big = sglang_memory_defaults((0, 5, 2), 192 * 1024.0, 8)
    assert big.memory_fraction == round((192 - 32) / 192, 3) and big.prefill_chunk_tokens == 16384


def test_current_builds_reserve_for_the_chunk_and_the_cuda_graphs():
    # 512 MiB + 1.5 MiB x 8,192 + 2 MiB x 256 graph slots + 1 GiB / 8 ranks on an 80 GiB GPU at TP1
    tp1 = sglang_memory_defaults(None, H100_MIB, 1)
    assert tp1.memory_fraction == round((81920 - (512 + 12288 + 512 + 128)) / 81920, 3) == 0.836
    tp8 = sglang_memory_defaults((0, 5, 6), H100_MIB, 8)
    assert tp8.memory_fraction == round((81920 - (512 + 12288 + 1024 + 1024)) / 81920, 3) == 0.819
    # the same 13,440 MiB on a 64 GiB device is a smaller share; the 16,384-token chunk from 160 GiB
    assert sglang_memory_defaults(None, 64 * 1024.0, 1).memory_fraction == round((65536 - 13440) / 65536, 3)
    assert sglang_memory_defaults(None, 180 * 1024.0, 8).prefill_chunk_tokens == 16384
    assert sglang_memory_defaults(None, 46_000, 1).prefill_chunk_tokens == 4096


def test_the_replica_takes_the_engines_rule_unless_the_user_gives_a_fraction():
    from xpuplan.catalog import load_catalog
    from xpuplan.models import get_model
    from xpuplan.serve.replica import make_replica

    m, h100 = get_model("llama3-70b"), load_catalog().get("nvidia-h100-sxm-80gb")
    rep = make_replica(m, h100, tp=8, engine="sglang")
    assert rep.memory_fraction == 0.819 and any("mem_fraction_static 0.819" in n for n in rep.notes)
    assert make_replica(m, h100, tp=8, engine="SGLang v0.4.3").memory_fraction == 0.81
    mine = make_replica(m, h100, tp=8, engine="sglang", memory_fraction=0.9)
    assert mine.memory_fraction == 0.9 and not any("mem_fraction_static" in n for n in mine.notes)
    # other engines keep their profile's fraction
    assert make_replica(m, h100, tp=8, engine="vllm").memory_fraction == 0.9
