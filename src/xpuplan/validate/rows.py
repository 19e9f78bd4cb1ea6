"""Validation rows: reading the CSV format of ``validate/data/README.md`` and building the model a row names.

:func:`read_rows` reads a file as users have it (Excel's UTF-8 byte-order mark included) and refuses,
with a message naming the file, line and field, what it cannot read: UTF-16 or binary files, a file
with no measurement rows, a missing column, a value that is not a number, a measured value that is
not a positive finite number, and an id used twice. :func:`model_from_row` is the one place a row
becomes a :class:`~xpuplan.models.arch.ModelArch` (both predictors use it).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from xpuplan.errors import UserInputError, echo
from xpuplan.models import get_model
from xpuplan.models.arch import ModelArch, MoEConfig

REQUIRED_COLUMNS: Final = ("id", "kind", "source", "trust", "hardware", "n_devices", "precision", "metric", "value")

#: Trust grades of the format (README): A primary and complete ... D second-hand.
TRUST_GRADES: Final = ("A", "B", "C", "D")

INT_COLUMNS: Final = frozenset({
    "layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "vocab", "gated_mlp", "moe_experts", "moe_top_k",
    "moe_ffn", "moe_shared_experts", "moe_dense_layers", "n_devices", "seq_len", "micro_batch", "tp", "pp", "vpp",
    "dp", "cp", "ep", "sp", "zero_stage", "input_len", "output_len", "batch", "concurrency", "num_prompts",
    "max_num_seqs", "etp", "lora_rank", "recompute_layers",
})
FLOAT_COLUMNS: Final = frozenset({"params_b", "value", "global_batch_tokens", "train_tokens", "power_cap_w",
                                   "scale_out_gbit_per_s"})

#: Columns a row without a model preset must give to describe its architecture.
ARCH_COLUMNS: Final = ("layers", "d_model", "heads", "ffn", "vocab")

#: Shortest context a row-built model accepts (tokens): GPT-3's 2,048, the smallest window of the
#: models in the public files; a training row's ``seq_len`` raises it.
MIN_ROW_MODEL_CONTEXT: Final = 2048

_UTF16_BOMS: Final = (b"\xff\xfe", b"\xfe\xff")
_UTF8_BOM: Final = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class ValidationRow:
    """One measurement row; numeric columns parsed, blanks as None. ``raw`` keeps every column.
    ``file`` and ``line`` say where the row was read (None for rows built in code)."""

    id: str
    kind: str
    metric: str
    value: float
    trust: str
    source: str
    hardware: str
    n_devices: int
    precision: str
    raw: dict[str, str]
    file: str | None = None
    line: int | None = None

    def get(self, column: str) -> Any:
        """Typed value of any column (int/float for numeric columns, None when blank)."""
        text = (self.raw.get(column) or "").strip()
        if text == "":
            return None
        if column in INT_COLUMNS:
            return int(float(text))
        if column in FLOAT_COLUMNS:
            return float(text)
        return text


def _decode(data: bytes, path: str) -> str:
    """The file's text; UTF-8 with or without Excel's byte-order mark. Anything else is refused."""
    if data.startswith(_UTF16_BOMS) or (len(data) >= 4 and data[1:4:2] == b"\x00\x00" and b"\x00" not in data[0:1]):
        raise UserInputError("the file is UTF-16 text; save it as UTF-8 (Excel: 'CSV UTF-8 (comma delimited)')",
                             file=path, line=1)
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise UserInputError("not a text file (a NUL byte); expected a UTF-8 CSV", file=path, line=line)
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserInputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file as UTF-8",
                             file=path, line=line) from None


def _positive(raw: dict[str, str], column: str, path: str, line: int, *, integer: bool) -> float:
    text = (raw.get(column) or "").strip()
    try:
        x = float(text)
    except ValueError:
        raise UserInputError(f"not a number: {echo(text)}", file=path, line=line, field=column) from None
    if not math.isfinite(x) or x <= 0:
        what = "a positive whole number" if integer else "a positive number (a measured figure)"
        raise UserInputError(f"must be {what}, got {echo(text)}", file=path, line=line, field=column)
    if integer and x != int(x):
        raise UserInputError(f"must be a whole number, got {echo(text)}", file=path, line=line, field=column)
    return x


def _check_numbers(raw: dict[str, str], path: str, line: int) -> None:
    """Every numeric column blank or a finite number; integer columns whole numbers."""
    for col in sorted(INT_COLUMNS | FLOAT_COLUMNS):
        text = (raw.get(col) or "").strip()
        if not text:
            continue
        try:
            x = float(text)
        except ValueError:
            raise UserInputError(f"not a number: {echo(text)}", file=path, line=line, field=col) from None
        if not math.isfinite(x):
            raise UserInputError(f"must be a finite number, got {echo(text)}", file=path, line=line, field=col)
        if col in INT_COLUMNS and x != int(x):
            raise UserInputError(f"must be a whole number, got {echo(text)}", file=path, line=line, field=col)


def parse_rows(text: str, path: str) -> list[ValidationRow]:
    """Rows of a validation CSV given as text (``path`` names it in messages)."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames
    if not header:
        raise UserInputError("empty file: expected a header line with the columns of the validation format",
                             file=path, line=1)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise UserInputError(f"missing column(s) {', '.join(missing)}", file=path, line=1, field=missing[0])
    rows: list[ValidationRow] = []
    seen: dict[str, int] = {}
    end = reader.line_num
    for raw in reader:
        line, end = end + 1, reader.line_num  # a quoted field may span lines: the record starts after the last
        rid = (raw.get("id") or "").strip()
        if not rid:
            raise UserInputError("blank id", file=path, line=line, field="id")
        if rid in seen:
            raise UserInputError(f"id {echo(rid)} already used on line {seen[rid]}", file=path, line=line, field="id")
        seen[rid] = line
        trust = (raw["trust"] or "").strip()
        if trust not in TRUST_GRADES:
            raise UserInputError(f"trust grade must be one of {', '.join(TRUST_GRADES)} (A: primary source with the "
                                 f"configuration; D: loosest), got {echo(trust)}", file=path, line=line, field="trust")
        value = _positive(raw, "value", path, line, integer=False)
        n = int(_positive(raw, "n_devices", path, line, integer=True))
        row = ValidationRow(
            id=rid, kind=(raw["kind"] or "").strip(), metric=(raw["metric"] or "").strip(), value=value,
            trust=trust, source=raw["source"] or "", hardware=(raw["hardware"] or "").strip(),
            n_devices=n, precision=(raw["precision"] or "").strip(),
            raw={k: (v or "") for k, v in raw.items() if k is not None}, file=path, line=line,
        )
        _check_numbers(raw, path, line)
        rows.append(row)
    if not rows:
        raise UserInputError("no measurement rows after the header", file=path, line=end + 1)
    return rows


def read_rows(path: str | Path) -> list[ValidationRow]:
    """Parse a validation CSV file (see the module doc for what is refused, and how)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise UserInputError("file not found", file=str(p)) from None
    except IsADirectoryError:
        raise UserInputError("a directory, not a CSV file", file=str(p)) from None
    return parse_rows(_decode(data, str(p)), str(p))


def model_from_row(row: ValidationRow) -> ModelArch:
    """The preset named in ``model`` when given, else a ModelArch from the architecture columns.

    Architecture rows: a gated MLP (``gated_mlp`` 1) is Llama-style (RMSNorm, RoPE, untied
    embeddings); a classic MLP (0) is GPT-style (LayerNorm, learned positions, tied embeddings:
    Megatron GPT, MPT). A blank ``gated_mlp`` is refused: the MLP's size differs by half between the two.
    A model whose every layer is MoE (``moe_experts`` and ``moe_ffn`` given, no ``moe_dense_layers``)
    needs no ``ffn``: no layer has a dense MLP (the field is set to the expert width, unused).
    """
    if row.get("model"):
        return get_model(row.get("model"))
    # a model whose every layer is MoE (experts given, no leading dense layers) has no dense FFN width
    all_moe = bool(row.get("moe_experts")) and bool(row.get("moe_ffn")) and not row.get("moe_dense_layers")
    missing = [c for c in ARCH_COLUMNS if row.get(c) is None and not (c == "ffn" and all_moe)]
    if missing:
        raise UserInputError(
            f"no model preset and no architecture: column(s) {', '.join(missing)} blank", field=missing[0]
        )
    if row.get("gated_mlp") is None:
        raise UserInputError("gated_mlp blank: 1 for a gated MLP (SwiGLU/GeGLU), 0 for a classic two-matrix MLP",
                             field="gated_mlp")
    gated = bool(row.get("gated_mlp"))
    moe = None
    if row.get("moe_experts"):
        moe = MoEConfig(
            n_routed_experts=row.get("moe_experts"), top_k=row.get("moe_top_k") or 1,
            expert_ffn_dim=row.get("moe_ffn") or row.get("ffn"), n_shared_experts=row.get("moe_shared_experts") or 0,
            n_dense_layers=row.get("moe_dense_layers") or 0,
        )
    ident = "row-" + re.sub(r"[^a-z0-9.\-_]+", "-", row.id.lower()).strip("-")
    return ModelArch(
        id=ident, name=f"architecture of row {row.id}", n_layers=row.get("layers"), d_model=row.get("d_model"),
        n_heads=row.get("heads"), n_kv_heads=row.get("kv_heads"), head_dim=row.get("head_dim"),
        ffn_dim=row.get("ffn") or row.get("moe_ffn"), vocab_size=row.get("vocab"), mlp="gated" if gated else "classic",
        norm="rmsnorm" if gated else "layernorm", tied_embeddings=not gated, moe=moe,
        position="rope" if gated else "learned",
        max_seq_len=max(row.get("seq_len") or MIN_ROW_MODEL_CONTEXT, MIN_ROW_MODEL_CONTEXT),
    )
