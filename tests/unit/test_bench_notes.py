"""`xpuplan bench run` says when the CPU path is the only one that ran (issue 14 §4)."""

from xpuplan.jobs.bench import CPU_ONLY_NOTE, bench_notes


def test_auto_falling_back_to_the_cpu_says_only_the_cpu_path_ran():
    assert bench_notes("cpu", "auto") == (CPU_ONLY_NOTE,)
    assert "only the CPU path ran" in CPU_ONLY_NOTE and "not exercised" in CPU_ONLY_NOTE


def test_an_explicit_cpu_run_says_so_and_accelerator_runs_have_no_note():
    assert "only the CPU path ran" in bench_notes("cpu", "cpu")[0]
    for kind in ("cuda", "rocm", "npu", "mlu"):
        assert bench_notes(kind, "auto") == ()
