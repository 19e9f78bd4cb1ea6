"""Property-based tests of the jobs layer (Hypothesis): random and hostile inputs.

For any values — NaN, ±inf, 0, negative, huge, wrong types, TP/PP that do not divide the model —
a job either returns a result or raises one of xpuplan's own errors; a result holds no NaN or
infinity; and nothing "fits" that the estimator of the same planner rejects.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpuplan.errors import InfeasibleError, UserInputError, XpuplanError
from xpuplan.jobs.context import offline_context
from xpuplan.jobs.memory import MemoryInferRequest, MemoryTrainRequest, memory_infer, memory_train
from xpuplan.jobs.requests import parse_request
from xpuplan.jobs.results import Result
from xpuplan.jobs.serve import CapacityRequest, InferEstimateRequest, infer_capacity, infer_estimate
from xpuplan.jobs.train import TrainEstimateRequest, train_estimate

CTX = offline_context()
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

hostile_float = st.one_of(st.just(float("nan")), st.just(float("inf")), st.just(float("-inf")), st.just(0.0),
                          st.just(-1.0), st.just(1e300), st.floats(min_value=1e-6, max_value=1e6))
hostile_int = st.one_of(st.just(0), st.just(-1), st.just(1 << 40), st.integers(min_value=1, max_value=128),
                        st.sampled_from([1, 2, 3, 4, 5, 7, 8, 16, 24, 64, 65, 1024]))
wrong_type = st.one_of(st.text(max_size=6), st.lists(st.integers(), max_size=2), st.just({"a": 1}), st.none())
maybe_hostile_int = st.one_of(hostile_int, wrong_type)
maybe_hostile_float = st.one_of(hostile_float, wrong_type)
GOOD_MODELS = ["llama3-8b", "llama2-7b", "llama3-70b", "mixtral-8x7b"]


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Plausible values and hostile ones."""
    return st.one_of(*([good] * 9), bad)


models = mostly(st.sampled_from(GOOD_MODELS), st.sampled_from(["nope-model", "x" * 300, "../../etc/passwd", ""]))
hardware = mostly(st.sampled_from(["H100", "910B", "A100", "MI300X"]), st.sampled_from(["no-such-chip", "h" * 500]))


def run_job(cls: type, job: Any, values: dict[str, Any]) -> Result | None:
    """The job's result, or None when it raised one of xpuplan's errors (anything else fails)."""
    values = {k: v for k, v in values.items() if v is not None}
    try:
        res = job(parse_request(cls, values), CTX)
    except InfeasibleError as exc:
        if exc.result is not None:
            check_finite(exc.result)
        return None
    except XpuplanError:
        return None
    check_finite(res)
    return res


def check_finite(res: Result) -> None:
    data = res.to_dict()
    json.dumps(data, allow_nan=False)  # raises on NaN/inf
    walk(data)


def walk(obj: Any) -> None:
    if isinstance(obj, float):
        assert math.isfinite(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            walk(v)
    elif isinstance(obj, list):
        for v in obj:
            walk(v)


@SETTINGS
@given(model=models, hw=hardware, devices=mostly(st.sampled_from([8, 16, 64]), maybe_hostile_int),
       tp=mostly(st.sampled_from([1, 2, 4, 8]), maybe_hostile_int), pp=mostly(st.sampled_from([1, 2, 4]), maybe_hostile_int),
       seq_len=st.one_of(st.none(), mostly(st.sampled_from([2048, 8192]), hostile_int)),
       tokens=st.one_of(st.none(), mostly(st.just(1e12), maybe_hostile_float)),
       reserve=st.one_of(st.none(), mostly(st.just(0.05), hostile_float)),
       micro_batch=st.one_of(st.none(), mostly(st.just(1), hostile_int)))
def test_train_estimate_hostile(model, hw, devices, tp, pp, seq_len, tokens, reserve, micro_batch):
    run_job(TrainEstimateRequest, train_estimate, dict(model=model, hw=hw, devices=devices, tp=tp, pp=pp,
                                                       seq_len=seq_len, tokens=tokens, reserve=reserve,
                                                       micro_batch=micro_batch))


@SETTINGS
@given(model=st.sampled_from(GOOD_MODELS), hw=st.sampled_from(["H100", "910B", "A100", "MI300X"]),
       tp=st.sampled_from([1, 2, 3, 4, 8, 16, 64, 65, 1024]), pp=st.sampled_from([1, 2, 3, 4, 5, 8]),
       seq=st.sampled_from([512, 2048, 4096, 32768, 100_000]), dp=st.sampled_from([1, 2, 8]),
       zero=st.sampled_from([0, 1, 3]), reserve=st.sampled_from([0.0, 0.05, 0.5]))
def test_memory_train_never_fits_what_train_estimate_rejects(model, hw, tp, pp, seq, dp, zero, reserve):
    res = run_job(MemoryTrainRequest, memory_train, dict(model=model, hw=hw, tp=tp, pp=pp, seq=seq, dp=dp, zero=zero,
                                                         reserve=reserve))
    if res is None or not res.fits:  # type: ignore[attr-defined]
        return
    # the estimator accepts the same layout (it may still judge memory differently: activations of
    # the in-flight micro-batches), so a structural rule it applies is never skipped by `memory train`
    n = tp * pp * dp
    try:
        train_estimate(parse_request(TrainEstimateRequest, dict(model=model, hw=hw, devices=n, tp=tp, pp=pp, dp=dp,
                                                                seq_len=seq, global_batch=seq * dp, zero=zero,
                                                                reserve=reserve)), CTX)
    except InfeasibleError:
        pass
    except UserInputError as exc:
        assert exc.field not in ("--tp", "--pp"), f"memory train said it fits; train estimate: {exc}"


@SETTINGS
@given(model=st.sampled_from(GOOD_MODELS), hw=st.sampled_from(["H100", "910B", "A100", "MI300X"]),
       tp=st.sampled_from([None, 1, 2, 3, 4, 8, 24]), batch=st.sampled_from([1, 8, 64, 512]),
       context=st.sampled_from([512, 2048, 8192, 131072]), dtype=st.sampled_from(["bf16", "fp8", "int4", "fp7"]))
def test_memory_infer_fits_only_what_infer_estimate_fits(model, hw, tp, batch, context, dtype):
    res = run_job(MemoryInferRequest, memory_infer, dict(model=model, hw=hw, tp=tp, batch=batch, context=context,
                                                         dtype=dtype))
    if res is None or res.fits is not True or dtype not in ("bf16", "fp8"):  # type: ignore[attr-defined]
        return
    in_len = max(1, context // 2)
    est = infer_estimate(parse_request(InferEstimateRequest, dict(
        model=model, hw=hw, tp=str(res.tp), batch=str(batch), input_len=in_len, output_len=context - in_len,  # type: ignore[attr-defined]
        dtype=dtype)), CTX)
    assert all(r["fits"] for r in est.results)


@SETTINGS
@given(model=models, hw=hardware, qps=mostly(st.sampled_from([1.0, 5.0, 50.0]), maybe_hostile_float),
       ttft=mostly(st.sampled_from([500.0, 2000.0]), maybe_hostile_float),
       tpot=mostly(st.sampled_from([20.0, 50.0]), maybe_hostile_float),
       in_len=st.one_of(st.none(), mostly(st.sampled_from([128, 2048]), hostile_int)),
       out_len=st.one_of(st.none(), mostly(st.sampled_from([64, 512]), hostile_int)),
       percentile=st.one_of(st.none(), mostly(st.sampled_from([50.0, 99.0]), hostile_float)))
def test_capacity_hostile(model, hw, qps, ttft, tpot, in_len, out_len, percentile):
    run_job(CapacityRequest, infer_capacity, dict(model=model, hw=hw, qps=qps, ttft_ms=ttft, tpot_ms=tpot,
                                                  input_len=in_len, output_len=out_len, percentile=percentile))


@SETTINGS
@given(model=models, hw=hardware, tp=st.one_of(st.none(), st.sampled_from(["1", "3", "1:8", "0", "1:100000:1", "x"])),
       batch=st.one_of(st.none(), st.sampled_from(["1", "max", "0", "1,8", "1:100000000:1", "-3"])),
       in_len=mostly(st.sampled_from([128, 2048]), hostile_int), out_len=mostly(st.sampled_from([64, 512]), hostile_int),
       mode=st.sampled_from([None, "static", "continuous", "bogus"]))
def test_infer_estimate_hostile(model, hw, tp, batch, in_len, out_len, mode):
    run_job(InferEstimateRequest, infer_estimate, dict(model=model, hw=hw, tp=tp, batch=batch, input_len=in_len,
                                                       output_len=out_len, mode=mode))
