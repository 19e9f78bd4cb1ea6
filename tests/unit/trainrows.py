"""A small training validation file written for a test: the common columns of one layout, and per row the
recompute mode and one extra column (``recompute_modules``, ``offload_modules``...) the test is about."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HEAD = ("id,kind,source,trust,model,hardware,n_devices,precision,metric,value,seq_len,global_batch_tokens,"
        "micro_batch,tp,pp,dp,cp,ep,zero_stage,recompute,{column},framework\n")


def train_rows(tmp_path: Path, column: str, common: str, cells: list[tuple[str, str]]) -> list[Any]:
    """Rows R1, R2... of a file whose columns are :data:`HEAD` with ``column``: ``common`` holds the cells from kind
    to zero_stage, each of ``cells`` the row's recompute and ``column`` cells; the framework is Megatron-Core."""
    from xpuplan.validate.rows import read_rows

    path = tmp_path / "rows.csv"
    lines = [f"R{i},{common},{rec},{extra},Megatron-Core" for i, (rec, extra) in enumerate(cells, start=1)]
    path.write_text(HEAD.format(column=column) + "\n".join(lines) + "\n", encoding="utf-8")
    return read_rows(str(path))
