"""Benchmark datasets' request lengths (``workload/data/datasets.yaml``): what "a run on ShareGPT" sends.

A dataset's token counts depend on the tokenizer that counts them, so each dataset lists its mean
prompt and reference-output lengths per tokenizer, each sourced. :func:`dataset_lengths` picks the
entry of a model's vocabulary size (else the dataset's default tokenizer, and says so);
``workload.serving.dataset_length_dists`` turns the means into length distributions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xpuplan.datafile import load_file
from xpuplan.errors import UserInputError

DATA_FILE: Final = Path(__file__).parent / "data" / "datasets.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenizerLengths(_Strict):
    """Mean lengths of one dataset as one tokenizer counts them."""

    vocab_sizes: list[int] = Field(min_length=1, description="vocabulary sizes of the models this entry covers")
    input_mean: float = Field(gt=0, description="mean prompt tokens")
    output_mean: float = Field(gt=0, description="mean reference output tokens")
    source: str
    note: str = ""


class Dataset(_Strict):
    """One benchmark dataset as the benchmark tools sample it."""

    name: str
    aliases: list[str] = Field(default_factory=list)
    sampling: str
    input_max: int | None = Field(default=None, gt=0, description="the tools' prompt-length cap (tokens)")
    total_max: int | None = Field(default=None, gt=0, description="the tools' prompt + output cap (tokens)")
    shape: Literal["exponential", "fixed"] = "exponential"
    shape_note: str = ""
    default_tokenizer: str
    tokenizers: dict[str, TokenizerLengths] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Dataset:
        if self.default_tokenizer not in self.tokenizers:
            raise ValueError(f"default_tokenizer {self.default_tokenizer!r} is not one of its tokenizers")
        for t in self.tokenizers.values():
            if self.input_max is not None and t.input_mean >= self.input_max:
                raise ValueError(f"input_mean {t.input_mean:g} is not below input_max {self.input_max}")
            if self.total_max is not None and t.input_mean + t.output_mean >= self.total_max:
                raise ValueError("input_mean + output_mean is not below total_max")
        return self


class DatasetFile(_Strict):
    schema_version: Literal[1]
    datasets: dict[str, Dataset] = Field(default_factory=dict)


@dataclass(frozen=True)
class DatasetLengths:
    """A dataset's mean lengths for one model: which tokenizer entry, whether it was assumed, the source."""

    dataset: str
    name: str
    tokenizer: str
    tokenizer_assumed: bool
    input_mean: float
    output_mean: float
    input_max: int | None
    total_max: int | None
    shape: str
    source: str

    def describe(self) -> str:
        """One line for results and notes: the dataset, the tokenizer and the means used."""
        return dataset_line(self.to_dict())

    def to_dict(self) -> dict[str, object]:
        return {"dataset": self.dataset, "name": self.name, "tokenizer": self.tokenizer,
                "tokenizer_assumed": self.tokenizer_assumed, "input_mean": self.input_mean,
                "output_mean": self.output_mean, "input_max": self.input_max, "total_max": self.total_max,
                "shape": self.shape, "source": self.source}


def dataset_line(ds: Mapping[str, Any]) -> str:
    """A dataset's lengths as a result gives them (:meth:`DatasetLengths.to_dict`, with ``used_for`` where only
    some lengths came from it), in one line."""
    tok = (f"{ds['tokenizer']} tokenizer counts assumed: the model's vocabulary has no entry"
           if ds["tokenizer_assumed"] else f"{ds['tokenizer']} tokenizer")
    used = ds.get("used_for", ["input_len", "output_len"])
    parts = [f"mean prompt {ds['input_mean']:g}" if "input_len" in used else "",
             f"mean output {ds['output_mean']:g}" if "output_len" in used else ""]
    return (f"lengths from {ds['dataset']}: {', '.join(p for p in parts if p)} tokens "
            f"({tok}; source: workload/data/datasets.yaml)")


@lru_cache(maxsize=4)
def load_datasets(path: str | Path = DATA_FILE) -> DatasetFile:
    """The dataset file (built-in by default)."""
    return load_file(DatasetFile, path)


def find_dataset(name: str, path: str | Path = DATA_FILE) -> str | None:
    """The dataset id ``name`` (an id or an alias, any case) stands for, or None."""
    key = name.strip().casefold()
    for ds_id, ds in load_datasets(path).datasets.items():
        if key == ds_id.casefold() or key in (a.casefold() for a in ds.aliases):
            return ds_id
    return None


def dataset_lengths(name: str, vocab_size: int | None, *, field: str = "dataset",
                    path: str | Path = DATA_FILE) -> DatasetLengths:
    """Mean lengths of dataset ``name`` for a model of ``vocab_size`` tokens (module doc).
    UserInputError naming ``field`` for an unknown dataset."""
    ds_id = find_dataset(name, path)
    if ds_id is None:
        known = ", ".join(sorted(load_datasets(path).datasets))
        raise UserInputError(f"unknown dataset {name!r}; known: {known}", field=field)
    ds = load_datasets(path).datasets[ds_id]
    tok_id = next((t for t, e in ds.tokenizers.items() if vocab_size in e.vocab_sizes), None)
    assumed = tok_id is None
    tok_id = tok_id or ds.default_tokenizer
    e = ds.tokenizers[tok_id]
    return DatasetLengths(dataset=ds_id, name=ds.name, tokenizer=tok_id, tokenizer_assumed=assumed,
                          input_mean=e.input_mean, output_mean=e.output_mean, input_max=ds.input_max,
                          total_max=ds.total_max, shape=ds.shape, source=e.source)
