"""Simulator inputs: arrival processes, length distributions, trace and length files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xpuplan.errors import UserInputError
from xpuplan.jobs.simulate import load_trace
from xpuplan.serve.sim import LengthDist, TrafficClass
from xpuplan.serve.sim.arrivals import arrival_times, class_arrivals, sample_lengths
from xpuplan.serve.sim.traces import parse_lengths, parse_trace


def _gaps(cls: TrafficClass, duration: float, seed: int = 0) -> np.ndarray:
    return np.diff(arrival_times(cls, duration, np.random.default_rng(seed)))


def test_poisson_rate_and_cv():
    g = _gaps(TrafficClass(name="a", rate_rps=50), 2000)
    assert 1 / g.mean() == pytest.approx(50, rel=0.02)
    assert g.std() / g.mean() == pytest.approx(1.0, abs=0.03)


def test_gamma_has_the_requested_cv():
    g = _gaps(TrafficClass(name="a", rate_rps=20, arrival="gamma", cv=3.0), 5000)
    assert 1 / g.mean() == pytest.approx(20, rel=0.05)
    assert g.std() / g.mean() == pytest.approx(3.0, rel=0.08)


def test_diurnal_rate_follows_the_curve():
    cls = TrafficClass(name="a", arrival="diurnal", rate_curve=[(0, 10), (50, 10), (50.001, 40), (100, 40)])
    t = arrival_times(cls, 100, np.random.default_rng(1))
    low, high = (t < 50).sum() / 50, (t >= 50).sum() / 50
    assert low == pytest.approx(10, rel=0.15)
    assert high == pytest.approx(40, rel=0.1)


def test_lognormal_lengths_mean_and_cv():
    x = sample_lengths(LengthDist(dist="lognormal", mean=500, cv=1.0), 200_000, np.random.default_rng(2))
    assert x.mean() == pytest.approx(500, rel=0.02)
    assert x.std() / x.mean() == pytest.approx(1.0, rel=0.05)
    assert x.min() >= 1
    fixed = sample_lengths(LengthDist(mean=128), 5, np.random.default_rng(0))
    assert fixed.tolist() == [128] * 5


def test_arrivals_are_seeded_per_class():
    c = TrafficClass(name="a", rate_rps=5)
    a = class_arrivals(c, 0, [c], 100, seed=3)
    b = class_arrivals(c, 0, [c], 100, seed=3)
    d = class_arrivals(c, 0, [c], 100, seed=4)
    assert np.array_equal(a.times_s, b.times_s)
    assert not np.array_equal(a.times_s[:10], d.times_s[:10])


def test_negative_rate_is_refused():
    with pytest.raises(ValueError, match="rate_rps"):
        TrafficClass(name="a", rate_rps=-1)


def test_trace_csv_and_jsonl(tmp_path):
    tr = parse_trace("timestamp,input_len,output_len,class\n10,100,20,a\n10.5,200,30,\n", "t.csv")
    assert tr.times_s == [0.0, 0.5] and tr.input_len == [100, 200] and tr.classes == ["a", ""]
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 1, "input_len": 5, "output_len": 6}\n\n{"timestamp": 2, "input_len": 7, "output_len": 8}\n')
    tr = load_trace(p)
    assert tr.output_len == [6, 8] and tr.classes is None


@pytest.mark.parametrize(("text", "line", "field"), [
    ("timestamp,input_len,output_len\n0,100,20\n1,abc,20\n", 3, "input_len"),
    ("timestamp,input_len,output_len\n0,100,20\n1,100,-5\n", 3, "output_len"),
    ("timestamp,input_len,output_len\n5,100,20\n1,100,20\n", 3, "timestamp"),
    ("timestamp,input_len\n0,100\n", 1, "output_len"),
    ("timestamp,input_len,output_len\n0,100,\n", 2, "output_len"),
])
def test_malformed_trace_names_file_line_and_field(text, line, field):
    with pytest.raises(UserInputError) as e:
        parse_trace(text, "bad.csv")
    assert e.value.file == "bad.csv" and e.value.line == line and e.value.field == field
    assert f"bad.csv:{line}" in str(e.value)


def test_malformed_jsonl_line():
    with pytest.raises(UserInputError) as e:
        parse_trace('{"timestamp": 0, "input_len": 1, "output_len": 1}\n{oops\n', "t.jsonl")
    assert e.value.line == 2


def test_lengths_from_vllm_benchmark_json_and_lists():
    a = parse_lengths(json.dumps({"input_lens": [10, 20], "output_lens": [3, 4], "duration": 1}), "r.json")
    assert a.input_len == [10, 20] and a.output_len == [3, 4]
    b = parse_lengths(json.dumps([{"input_len": 5, "output_len": 6}, [7, 8]]), "l.json")
    assert b.input_len == [5, 7] and b.output_len == [6, 8]
    with pytest.raises(UserInputError, match="input_len"):
        parse_lengths(json.dumps([{"input_len": 0, "output_len": 6}]), "l.json")


def test_a_trace_shared_by_two_classes_counts_each_row_once():
    tr = parse_trace("timestamp,input_len,output_len,class\n0,10,2,a\n1,20,3,b\n2,30,4,a\n3,40,5,\n", "t.csv")
    a = TrafficClass(name="a", arrival="trace", trace=tr)
    b = TrafficClass(name="b", arrival="trace", trace=tr)
    got_a = class_arrivals(a, 0, [a, b], 100, seed=0)
    got_b = class_arrivals(b, 1, [a, b], 100, seed=0)
    assert got_a.input_len.tolist() == [10, 30, 40]  # its rows and the unlabelled one
    assert got_b.input_len.tolist() == [20]
    # a Poisson class named in another class's trace gets those rows too
    c = TrafficClass(name="b", rate_rps=0.001)
    got_c = class_arrivals(c, 1, [a, c], 100, seed=0)
    assert 20 in got_c.input_len.tolist()


def test_a_burst_sends_its_requests_at_once_and_needs_a_count():
    import numpy as np
    import pytest

    from xpuplan.serve.sim.arrivals import class_arrivals
    from xpuplan.serve.sim.config import TrafficClass

    cls = TrafficClass.model_validate({"name": "b", "arrival": "burst", "requests": 7, "input_len": 100,
                                       "output_len": {"dist": "lognormal", "mean": 50, "cv": 0.5}})
    arr = class_arrivals(cls, 0, [cls], 1.0, seed=0)
    assert arr.times_s.size == 7 and np.all(arr.times_s == 0.0)
    assert np.all(arr.input_len == 100) and arr.output_len.min() >= 1
    with pytest.raises(ValueError, match="burst arrivals need requests"):
        TrafficClass.model_validate({"name": "b", "arrival": "burst"})
