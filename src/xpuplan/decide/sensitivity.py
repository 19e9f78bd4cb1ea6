"""How far each weight must move to change the top choice.

Moving leaf ``i`` by ``d`` points while scaling every other leaf by ``(100 - w_i - d) / (100 - w_i)``
keeps the total at 100. An option's total is linear in ``d``, so the gap between the winner ``W``
and option ``k``,

    G_k(d) = G_k(0) + d * (a - B / (100 - w_i)),   a = s_W,i - s_k,i,   B = G_k(0) - w_i * a,

reaches zero at ``d* = -G_k(0) / (a - B / (100 - w_i))``. The smallest ``|d*|`` over ``k`` with
``0 <= w_i + d* <= 100`` is the weight's margin; ``None`` means no weight in 0..100 changes the winner.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xpuplan.decide.scoring import F
from xpuplan.decide.weights import TOTAL


def weight_sensitivity(scores: dict[str, F], weights: dict[str, float], keys: list[str]) -> list[dict[str, Any]]:
    """One entry per leaf: its weight, the smallest change that changes the winner, and the new winner."""
    leaves = list(weights)
    if len(keys) < 2:
        return [{"criterion": leaf, "weight": weights[leaf], "change_points": None, "new_winner": None}
                for leaf in leaves]
    s = np.vstack([scores[leaf] for leaf in leaves])  # [L, K]
    w = np.array([weights[leaf] for leaf in leaves])
    total = w @ s
    win = int(np.argmax(total))
    out = []
    for i, leaf in enumerate(leaves):
        rest = TOTAL - w[i]
        best: tuple[float, int] | None = None
        for k in range(len(keys)):
            if k == win:
                continue
            g0 = total[win] - total[k]
            a = s[i, win] - s[i, k]
            b = g0 - w[i] * a
            slope = a - (b / rest if rest > 0 else 0.0)
            if abs(slope) < 1e-12:
                continue
            d = -g0 / slope
            if not (0.0 <= w[i] + d <= TOTAL):
                continue
            if best is None or abs(d) < abs(best[0]):
                best = (float(d), k)
        out.append({"criterion": leaf, "weight": float(w[i]),
                    "change_points": None if best is None else best[0],
                    "new_winner": None if best is None else keys[best[1]]})
    return out
