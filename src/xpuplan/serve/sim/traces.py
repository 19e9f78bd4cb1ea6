"""Parsing request traces and empirical length lists from their text (the files are read by the
job layer, ``xpuplan.jobs.simulate``; nothing in the simulator package touches the disk).

* **Trace** (CSV with a header, or JSONL): ``timestamp`` (s; offsets from the first row are used),
  ``input_len``, ``output_len``, optional ``class``. A bad row is a UserInputError naming the file,
  the line and the field.
* **Lengths**: a vLLM benchmark result JSON (``benchmark_serving.py --save-result`` writes
  ``input_lens`` and ``output_lens`` lists), or a ShareGPT-style length list: a JSON list of
  ``{"input_len": .., "output_len": ..}`` objects or of ``[input, output]`` pairs. Raw ShareGPT
  conversations (text) are not read: token counts need the model's tokenizer.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from xpuplan.errors import UserInputError, echo
from xpuplan.serve.sim.config import EmpiricalLengths, TraceData

_FIELDS = ("timestamp", "input_len", "output_len")


def _num(value: Any, field: str, file: str, line: int, *, integer: bool) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UserInputError(f"not a number: {echo(value)}", field=field, file=file, line=line) from None
    if not math.isfinite(x) or x < 0 or (integer and (x < 1 or x != int(x))):
        what = "a positive integer" if integer else "a finite number >= 0"
        raise UserInputError(f"must be {what} (got {echo(value)})", field=field, file=file, line=line)
    return x


def parse_trace(text: str, source: str) -> TraceData:
    """Parse trace text (CSV with a header, or JSONL when the first non-blank character is ``{``)."""
    rows: list[tuple[int, dict[str, Any]]] = []
    stripped = text.lstrip()
    if stripped.startswith("{"):
        for i, raw_line in enumerate(text.splitlines(), 1):
            if not raw_line.strip():
                continue
            try:
                obj = json.loads(raw_line)
            except json.JSONDecodeError as exc:
                raise UserInputError(f"not a JSON object: {exc.msg}", file=source, line=i, field="line") from None
            if not isinstance(obj, dict):
                raise UserInputError("not a JSON object", file=source, line=i, field="line")
            rows.append((i, obj))
    else:
        reader = csv.DictReader(io.StringIO(text))
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [f for f in _FIELDS if f not in header]
        if missing:
            raise UserInputError(f"header lacks column {missing[0]!r} (needs {', '.join(_FIELDS)}[, class])",
                                 file=source, line=1, field=missing[0])
        for row in reader:
            rows.append((reader.line_num, {(k or "").strip(): v for k, v in row.items()}))
    if not rows:
        raise UserInputError("trace has no requests", file=source, field="timestamp")
    times: list[float] = []
    ins: list[int] = []
    outs: list[int] = []
    classes: list[str] = []
    has_class = False
    for line, r in rows:
        for f in _FIELDS:
            if r.get(f) in (None, ""):
                raise UserInputError("missing value", field=f, file=source, line=line)
        t = _num(r["timestamp"], "timestamp", source, line, integer=False)
        if times and t < times[-1]:
            raise UserInputError(f"timestamps must not decrease ({t:g} after {times[-1]:g})", field="timestamp",
                                 file=source, line=line)
        times.append(t)
        ins.append(int(_num(r["input_len"], "input_len", source, line, integer=True)))
        outs.append(int(_num(r["output_len"], "output_len", source, line, integer=True)))
        c = r.get("class")
        has_class = has_class or bool(c)
        classes.append(str(c or "").strip())
    t0 = times[0]
    return TraceData(times_s=[t - t0 for t in times], input_len=ins, output_len=outs,
                     classes=classes if has_class else None, source=source)


def parse_lengths(text: str, source: str) -> EmpiricalLengths:
    """Parse a vLLM benchmark JSON or a length list (module doc)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserInputError(f"not JSON: {exc.msg}", file=source, line=exc.lineno, field="lengths") from None
    if isinstance(data, dict) and "input_lens" in data and "output_lens" in data:
        ins, outs = data["input_lens"], data["output_lens"]
        if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
            raise UserInputError("input_lens and output_lens must be lists of equal length", file=source,
                                 field="input_lens")
        pairs = list(zip(ins, outs, strict=True))
    elif isinstance(data, list):
        pairs = []
        for i, item in enumerate(data):
            if isinstance(item, dict):
                pairs.append((item.get("input_len"), item.get("output_len")))
            elif isinstance(item, list | tuple) and len(item) == 2:
                pairs.append((item[0], item[1]))
            else:
                raise UserInputError(f"item {i} is neither {{input_len, output_len}} nor [input, output]",
                                     file=source, field=f"[{i}]")
    else:
        raise UserInputError("expected a vLLM benchmark JSON (input_lens, output_lens) or a list of lengths",
                             file=source, field="lengths")
    if not pairs:
        raise UserInputError("no lengths", file=source, field="lengths")
    ins_out: list[int] = []
    outs_out: list[int] = []
    for i, (a, b) in enumerate(pairs):
        ins_out.append(int(_num(a, f"[{i}].input_len", source, 0, integer=True)))
        outs_out.append(int(_num(b, f"[{i}].output_len", source, 0, integer=True)))
    return EmpiricalLengths(input_len=ins_out, output_len=outs_out, source=source)
