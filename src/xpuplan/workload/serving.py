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

Length distributions (:mod:`xpuplan.workload.lengths`, the same model the simulator and the fleet optimizer
read): ``fixed`` (``mean``), ``uniform`` (``min``, ``max``), ``normal`` (``mean``, ``std``), ``lognormal``
(``mean``, ``cv``), ``exponential`` (``mean``), ``empirical`` (``values``: measured lengths, e.g. a dataset's
prompt lengths); every shape is cut to [``min`` (default 1), ``max``]. The planner uses the mean for throughput and KV sizing, the SLO
percentile of the input length for the TTFT tail, and integrates the prefill service time over the input
distribution (:meth:`LengthDist.nodes`) for the prompt queue (M/G/1: its mean and second moment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xpuplan.datafile import load_file
from xpuplan.workload.datasets import DatasetLengths, find_dataset, load_datasets
from xpuplan.workload.lengths import LengthDist, as_length

#: Request shape assumed when none is given (CLI and overview): a chat turn with some context.
#: An assumption, printed whenever it is used; pass --in/--out or a scenario file for your traffic.
DEFAULT_INPUT_LEN = 2048
DEFAULT_OUTPUT_LEN = 256


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def capped_exponential_scale(mean: float, cap: float) -> float:
    """Scale ``m`` of an exponential cut to [1, ``cap``] tokens whose mean (``LengthDist.average``:
    ``1 + m·(e^(-1/m) - e^(-cap/m))``) is ``mean`` (1 < mean < cap)."""
    if not 1 < mean < cap:
        raise ValueError(f"mean {mean:g} must lie in (1, cap {cap:g})")

    def cut_mean(m: float) -> float:
        # constructed unchecked: a trial scale may exceed the cap, which a user's distribution may not
        return LengthDist.model_construct(dist="exponential", mean=m, max=cap).average

    lo, hi = mean / 2.0, mean
    while cut_mean(hi) < mean:
        hi *= 2.0
    for _ in range(100):  # the cut mean grows with the scale: bisection
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cut_mean(mid) < mean else (lo, mid)
    return 0.5 * (lo + hi)


def dataset_length_dists(d: DatasetLengths) -> tuple[LengthDist, LengthDist]:
    """Prompt and output length distributions of a benchmark dataset (``workload.datasets``): its means
    for the model's tokenizer in the dataset's shape. ``exponential``: capped at the benchmark tools'
    prompt limit (prompts) and at their total limit less the mean prompt (outputs), scales solved so the
    means are the dataset's. Without caps, or for the ``fixed`` shape, fixed lengths at the means."""
    def one(mean: float, cap: float | None) -> LengthDist:
        if d.shape != "exponential" or cap is None or cap <= mean:
            return LengthDist(dist="fixed", mean=mean)
        # unchecked: the solved scale exceeds the cap where the mean is near it (the cut mean is still the mean)
        return LengthDist.model_construct(dist="exponential", mean=capped_exponential_scale(mean, cap), max=cap)

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
    etp: int | None = Field(default=None, ge=1, description="MoE: ranks each routed expert is split over (default tp; "
                            "below tp, expert parallelism inside the TP group)")
    dtype: str = Field(default="bf16", description="precision scheme: bf16, fp16, fp8, int8, int8-wo, int4-wo, nvfp4, mxfp4")
    kv_dtype: str | None = Field(default=None, description="KV-cache dtype (default: the scheme's)")
    engine: str | None = Field(default=None, description="serving engine (default: the device's first)")
    memory_fraction: float | None = Field(default=None, gt=0, le=1, description="device memory the engine may use")


#: A length given as a number: tokens, at least one (as LengthDist's own check).
_Tokens = Annotated[float, Field(ge=1, allow_inf_nan=False)]


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


def percentile_message(value: float, name: str) -> str:
    """Why a percentile below 1 is refused: it is a percent (99 = P99), and 0.99 is a fraction typed for it."""
    meant = f"{value * 100:g}" if value * 100 >= 1 else "99"
    return (f"{name} is a percent from 1 to 100 (99 = P99), not a fraction: {value:g} would be P{value:g}; "
            f"did you mean {meant}?")


def percent_not_fraction(value: float, name: str = "percentile") -> float:
    """``value`` when it reads as a percent; a ``ValueError`` (:func:`percentile_message`) below 1."""
    if value < 1:
        raise ValueError(percentile_message(value, name))
    return value


class SLOSpec(_Strict):
    ttft_ms: float | None = Field(default=None, gt=0, description="time to first token at the percentile")
    tpot_ms: float | None = Field(default=None, gt=0, description="time per output token (mean per request)")
    percentile: float = Field(default=99.0, gt=0, lt=100)

    @field_validator("percentile")
    @classmethod
    def _percent(cls, v: float) -> float:
        return percent_not_fraction(v)


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
