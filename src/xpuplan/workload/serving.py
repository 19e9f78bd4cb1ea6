"""Serving scenario: what traffic a deployment must carry and the latency it must keep.

A scenario is a YAML (or JSON) file, validated at load with errors naming file, line and field::

    model: llama2-70b                  # preset id, alias or config.json path
    hardware: [nvidia-h100-sxm-80gb, huawei-ascend-910b]
    replica:                           # optional: fixed replica; capacity searches tp when absent
      tp: 4
      dtype: fp8                       # bf16 | fp16 | fp8 | int8 | int8-wo | int4-wo
      kv_dtype: fp8
      engine: vllm
    traffic:
      qps: 20                          # requests/s to serve (capacity)
      batch: 64                        # requests decoded together (estimate)
      input_len: {dist: uniform, min: 256, max: 1024}
      output_len: 256                  # a number is a fixed length
      # dataset: sharegpt              # instead of input_len/output_len: a benchmark dataset's mean lengths
      #                                # for the model's tokenizer (workload/data/datasets.yaml)
    slo:
      ttft_ms: 2000
      tpot_ms: 50
      percentile: 99

Length distributions: ``fixed`` (``mean``), ``uniform`` (``min``, ``max``), ``normal`` (``mean``,
``std``, clipped at 1), ``exponential`` (``mean``, optional ``max``), ``empirical`` (``values``: measured
lengths, e.g. a dataset's prompt lengths). The planner uses the mean for throughput and KV sizing, the SLO
percentile of the input length for the TTFT tail, and integrates the prefill service time over the input
distribution (:meth:`LengthDist.nodes`) for the prompt queue (M/G/1: its mean and second moment).
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xpuplan.datafile import load_file
from xpuplan.workload.datasets import DatasetLengths, find_dataset, load_datasets

#: Request shape assumed when none is given (CLI and overview): a chat turn with some context.
#: An assumption, printed whenever it is used; pass --in/--out or a scenario file for your traffic.
DEFAULT_INPUT_LEN = 2048
DEFAULT_OUTPUT_LEN = 256


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LengthDist(_Strict):
    """Token-length distribution of prompts or outputs."""

    dist: Literal["fixed", "uniform", "normal", "exponential", "empirical"] = "fixed"
    mean: float | None = Field(default=None, gt=0, description="mean tokens (fixed, normal, exponential)")
    min: float | None = Field(default=None, gt=0, description="smallest length (uniform)")
    max: float | None = Field(default=None, gt=0, description="largest length (uniform; cap for exponential)")
    std: float | None = Field(default=None, ge=0, description="standard deviation (normal)")
    values: list[float] | None = Field(default=None, min_length=1, max_length=100_000,
                                       description="measured lengths, each equally likely (empirical)")

    @model_validator(mode="after")
    def _check(self) -> LengthDist:
        if self.dist == "empirical":
            if not self.values or any(not (v > 0 and math.isfinite(v)) for v in self.values):
                raise ValueError("empirical needs values: a list of positive lengths")
            return self
        if self.dist == "uniform":
            if self.min is None or self.max is None or self.max < self.min:
                raise ValueError("uniform needs min <= max")
        elif self.mean is None:
            raise ValueError(f"{self.dist} needs mean")
        if self.dist == "normal" and self.std is None:
            raise ValueError("normal needs std")
        return self

    @property
    def average(self) -> float:
        """Mean tokens."""
        if self.dist == "empirical":
            assert self.values is not None
            return sum(self.values) / len(self.values)
        if self.dist == "uniform":
            assert self.min is not None and self.max is not None
            return (self.min + self.max) / 2.0
        assert self.mean is not None
        if self.dist == "exponential" and self.max is not None:
            # mean of an exponential truncated (capped) at max: m·(1 - e^(-max/m))
            return self.mean * (1.0 - math.exp(-self.max / self.mean))
        return self.mean

    def quantile(self, percentile: float) -> float:
        """Length at ``percentile`` (0-100)."""
        q = percentile / 100.0
        if self.dist == "empirical":
            assert self.values is not None
            xs = sorted(self.values)
            return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]
        if self.dist == "fixed":
            assert self.mean is not None
            return self.mean
        if self.dist == "uniform":
            assert self.min is not None and self.max is not None
            return self.min + q * (self.max - self.min)
        assert self.mean is not None
        if self.dist == "normal":
            assert self.std is not None
            return max(1.0, NormalDist(self.mean, self.std).inv_cdf(q))
        if q >= 1.0:  # the top of an exponential: its cap, else unbounded
            return self.max if self.max is not None else math.inf
        value = -self.mean * math.log(1.0 - q)
        return min(value, self.max) if self.max is not None else value


    @property
    def is_fixed(self) -> bool:
        return self.dist == "fixed" or (self.dist == "empirical" and len(set(self.values or ())) == 1)

    def nodes(self, n: int = 8) -> list[tuple[float, float]]:
        """(length, probability) pairs that integrate a function of the length over the distribution:
        the mean of each of ``n`` equal-probability bins (an empirical list: its values, grouped into
        at most ``n`` bins of sorted values). A fixed length is one node."""
        if self.is_fixed:
            return [(self.average, 1.0)]
        if self.dist == "empirical":
            assert self.values is not None
            xs = sorted(self.values)
            k = min(n, len(xs))
            out = []
            for i in range(k):
                part = xs[i * len(xs) // k:(i + 1) * len(xs) // k]
                out.append((sum(part) / len(part), len(part) / len(xs)))
            return out
        # bin i's representative: its conditional mean, from SUB quantiles at the midpoints of equal
        # sub-bins (so the nodes keep the distribution's mean, tail included)
        sub = 32
        return [(sum(max(1.0, self.quantile(100.0 * (i + (j + 0.5) / sub) / n)) for j in range(sub)) / sub, 1.0 / n)
                for i in range(n)]


def as_length(value: int | float | LengthDist) -> LengthDist:
    return value if isinstance(value, LengthDist) else LengthDist(dist="fixed", mean=float(value))


def capped_exponential_scale(mean: float, cap: float) -> float:
    """Scale ``m`` of an exponential capped at ``cap`` whose mean ``m·(1 - e^(-cap/m))`` is ``mean`` (< cap)."""
    if not 0 < mean < cap:
        raise ValueError(f"mean {mean:g} must lie in (0, cap {cap:g})")
    lo, hi = mean, mean
    while hi * (1.0 - math.exp(-cap / hi)) < mean:
        hi *= 2.0
    for _ in range(100):  # the capped mean grows with the scale: bisection
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if mid * (1.0 - math.exp(-cap / mid)) < mean else (lo, mid)
    return 0.5 * (lo + hi)


def dataset_length_dists(d: DatasetLengths) -> tuple[LengthDist, LengthDist]:
    """Prompt and output length distributions of a benchmark dataset (``workload.datasets``): its means
    for the model's tokenizer in the dataset's shape. ``exponential``: capped at the benchmark tools'
    prompt limit (prompts) and at their total limit less the mean prompt (outputs), scales solved so the
    means are the dataset's. Without caps, or for the ``fixed`` shape, fixed lengths at the means."""
    def one(mean: float, cap: float | None) -> LengthDist:
        if d.shape != "exponential" or cap is None or cap <= mean:
            return LengthDist(dist="fixed", mean=mean)
        return LengthDist(dist="exponential", mean=capped_exponential_scale(mean, cap), max=cap)

    out_cap = d.total_max - d.input_mean if d.total_max is not None else None
    return one(d.input_mean, d.input_max), one(d.output_mean, out_cap)


#: Length pairs drawn to represent a dataset's lengths where requests are sampled from it with replacement (a
#: simulated traffic class, a closed-loop validation run): enough that the tail to the tools' caps is in the list.
DATASET_SAMPLE_PAIRS: Final = 1000


def dataset_request_lengths(d: DatasetLengths, n: int = DATASET_SAMPLE_PAIRS, seed: int = 0
                            ) -> tuple[list[int], list[int]]:
    """``n`` (prompt, output) token pairs that represent a dataset's distributions
    (:func:`dataset_length_dists`): prompts and outputs at the midpoints of ``n`` equal-probability bins, so
    a run of ``n`` prompts has the tail it would draw, paired in a seeded random order, each pair held to
    the dataset's total cap."""
    import numpy as np

    if n < 1:
        raise ValueError(f"n must be at least 1 (got {n})")
    d_in, d_out = dataset_length_dists(d)
    qs = [100.0 * (i + 0.5) / n for i in range(n)]
    ins = [max(1, round(d_in.quantile(q))) for q in qs]
    outs = [max(1, round(d_out.quantile(q))) for q in qs]
    order = np.random.default_rng(seed).permutation(n)
    ins = [ins[int(i)] for i in order]
    cap = d.total_max
    return ins, [max(1, min(o, cap - i)) if cap else o for i, o in zip(ins, outs, strict=True)]


class ReplicaSpec(_Strict):
    tp: int | None = Field(default=None, ge=1, description="tensor-parallel devices (capacity searches when absent)")
    pp: int = Field(default=1, ge=1, description="pipeline stages")
    ep: int = Field(default=1, ge=1, description="expert-parallel groups (MoE)")
    dtype: str = Field(default="bf16", description="precision scheme: bf16, fp16, fp8, int8, int8-wo, int4-wo, nvfp4, mxfp4")
    kv_dtype: str | None = Field(default=None, description="KV-cache dtype (default: the scheme's)")
    engine: str | None = Field(default=None, description="serving engine (default: the device's first)")
    memory_fraction: float | None = Field(default=None, gt=0, le=1, description="device memory the engine may use")


#: A length given as a number: positive tokens.
_Tokens = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Traffic(_Strict):
    qps: float | None = Field(default=None, gt=0, description="requests/s to serve")
    batch: int | None = Field(default=None, ge=1, description="requests decoded together (estimate)")
    input_len: _Tokens | LengthDist | None = Field(default=None, description="prompt tokens: a number or a distribution")
    output_len: _Tokens | LengthDist | None = Field(default=None, description="generated tokens: a number or a "
                                                   "distribution (default 1, or the dataset's)")
    dataset: str | None = Field(default=None, min_length=1, max_length=200,
                                description="benchmark dataset whose lengths the requests have where input_len / "
                                            "output_len are not given (workload/data/datasets.yaml: sharegpt)")

    @model_validator(mode="after")
    def _check_lengths(self) -> Traffic:
        if self.input_len is None and self.dataset is None:
            raise ValueError("give input_len (a number or a distribution) or a dataset")
        if self.dataset is not None and find_dataset(self.dataset) is None:
            raise ValueError(f"unknown dataset {self.dataset!r}; known: {', '.join(sorted(load_datasets().datasets))}")
        return self

    @property
    def input(self) -> LengthDist | None:
        """The prompt lengths the file gives (None: the dataset's, resolved for the model by the caller)."""
        return None if self.input_len is None else as_length(self.input_len)

    @property
    def output(self) -> LengthDist | None:
        """The output lengths the file gives: 1 token where neither they nor a dataset are given."""
        if self.output_len is None:
            return None if self.dataset else as_length(1.0)
        return as_length(self.output_len)


class SLOSpec(_Strict):
    ttft_ms: float | None = Field(default=None, gt=0, description="time to first token at the percentile")
    tpot_ms: float | None = Field(default=None, gt=0, description="time per output token (mean per request)")
    percentile: float = Field(default=99.0, gt=0, lt=100)


class ServingScenario(_Strict):
    """A serving scenario file (module docstring)."""

    model: str
    hardware: list[str] = Field(default_factory=list, description="candidate device ids or aliases")
    replica: ReplicaSpec = Field(default_factory=ReplicaSpec)
    traffic: Traffic
    slo: SLOSpec = Field(default_factory=SLOSpec)

    @model_validator(mode="before")
    @classmethod
    def _hardware_string(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("hardware"), str):
            return {**data, "hardware": [data["hardware"]]}
        return data


def load_serving_scenario(path: str | Path) -> ServingScenario:
    """Read and validate a serving scenario file; errors name file, line and field."""
    return load_file(ServingScenario, path)
