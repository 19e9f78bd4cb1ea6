"""Development and porting effort from the catalog's software-stack facts and the team's skills.

A team that already works in the target device's software stack (``ecosystem.software_stack``,
matched by its first word: CUDA, ROCm, CANN, Neuware, XLA/JAX, ...) pays no porting effort. Otherwise
the effort in engineer-months comes from the price book's ``porting`` table, keyed by how the target
runs PyTorch (``ecosystem.pytorch``: native, plugin, xla, limited, none). Only levels with a public
anchor are in the built-in table (see ``catalog/data/prices/people.yaml``); for the others the
result says the effort is unknown and the user gives ``porting_engineer_months``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from xpuplan.catalog.prices import PriceBook, PriceFigure, user_figure
from xpuplan.errors import UnknownIdError, UserInputError


def stack_key(software_stack: str) -> str:
    """First word of a stack name, case-folded: ``'Neuware (CNToolkit, ...)'`` -> ``'neuware'``."""
    word = software_stack.strip().split()[0] if software_stack.strip() else ""
    return word.split("/")[0].casefold()


def team_knows(software_stack: str, team_stacks: tuple[str, ...] | list[str]) -> bool:
    """True when one of the team's stacks names the device's software stack."""
    key = stack_key(software_stack)
    return any(stack_key(t) == key for t in team_stacks if t.strip())


def check_team_stacks(team_stacks: tuple[str, ...] | list[str], software_stacks: Iterable[str], *,
                      field: str = "team_stacks", allow_empty: bool = False) -> None:
    """Each of the team's stacks must name one of ``software_stacks`` (the catalog's ``ecosystem.software_stack``
    values) as :func:`team_knows` matches them: an unknown name would silently count as a stack the team
    does not know. An empty list is refused unless ``allow_empty`` (a team that knows no stack)."""
    known: dict[str, str] = {}
    for s in software_stacks:
        if s.strip():
            known.setdefault(stack_key(s), s.strip().split()[0].split("/")[0])
    names = ", ".join(sorted(known.values(), key=str.casefold))
    if not any(t.strip() for t in team_stacks) and not allow_empty:
        raise UserInputError(f"name the software stacks the team knows, comma-separated (known: {names})", field=field)
    for t in team_stacks:
        if stack_key(t) not in known:
            err = UnknownIdError("software stack", t, known.values(), field=field)
            raise UserInputError(f"{err.message} (known: {names})", field=field, hint=err.hint)


@dataclass(frozen=True)
class PortingEstimate:
    """Engineer-months and USD to bring one workload onto a device (None: not known)."""

    device_stack: str
    pytorch_support: str
    team_stacks: tuple[str, ...]
    engineer_months: float | None
    usd: float | None
    figures: tuple[PriceFigure, ...]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "device_stack": self.device_stack,
            "pytorch_support": self.pytorch_support,
            "team_stacks": list(self.team_stacks),
            "engineer_months": self.engineer_months,
            "usd": self.usd,
            "figures": [f.to_dict() for f in self.figures],
            "reason": self.reason,
        }


def porting_estimate(
    software_stack: str,
    pytorch_support: str,
    team_stacks: tuple[str, ...] | list[str],
    book: PriceBook,
    *,
    engineer_months: float | None = None,
    engineer_usd_per_year: float | None = None,
) -> PortingEstimate:
    """Porting effort for a team knowing ``team_stacks`` to a device with the given stack facts.

    ``engineer_months`` / ``engineer_usd_per_year`` override the price book's assumption and wage.
    """
    team = tuple(team_stacks)
    wage = user_figure("engineer.usd_per_year", engineer_usd_per_year, "USD/year") if engineer_usd_per_year \
        else book.labor.get("engineer")
    if team_knows(software_stack, team):
        return PortingEstimate(software_stack, pytorch_support, team, 0.0, 0.0, (),
                               f"team already works in {stack_key(software_stack)}")
    if engineer_months is not None:
        months: PriceFigure | None = user_figure("porting.engineer_months", engineer_months, "engineer-months")
    else:
        months = book.porting.get(pytorch_support)
    if months is None:
        return PortingEstimate(software_stack, pytorch_support, team, None, None, (),
                               f"no public effort figure for PyTorch support '{pytorch_support}'; "
                               "give porting_engineer_months")
    figs = (months,) + ((wage,) if wage else ())
    usd = months.value * wage.value / 12.0 if wage else None
    return PortingEstimate(software_stack, pytorch_support, team, months.value, usd, figs,
                           f"team ({', '.join(team) or 'none'}) does not know {stack_key(software_stack)}; "
                           f"PyTorch support '{pytorch_support}'")
