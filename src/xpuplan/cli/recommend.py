"""``xpuplan recommend``: the main job — which hardware (or mix), ranked, explained, with uncertainty."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from xpuplan.cli.common import cli_command, console, print_json, table
from xpuplan.errors import UserInputError
from xpuplan.report.format import fmt_energy_j as _fmt_kwh
from xpuplan.report.format import fmt_time as _fmt_time
from xpuplan.report.format import fmt_usd as _fmt_usd


@cli_command
def recommend_cmd(
    scenario: Annotated[str | None, typer.Argument(help="scenario YAML/JSON file (see examples/)")] = None,
    preset: Annotated[str | None, typer.Option(help="built-in scenario preset (without a file)")] = None,
    lang: Annotated[str, typer.Option(help="language of explanations and reports: en or zh")] = "en",
    json_: Annotated[bool, typer.Option("--json", help="machine-readable result")] = False,
    report: Annotated[str | None, typer.Option(help="write a report: out.html (self-contained) or out.md")] = None,
    samples: Annotated[int | None, typer.Option(help="Monte Carlo samples (default: the scenario's)")] = None,
    seed: Annotated[int | None, typer.Option(help="Monte Carlo seed")] = None,
    weight: Annotated[list[str] | None, typer.Option(help="CRITERION=POINTS, repeatable; leaves must sum to 100")] = None,
    top: Annotated[int, typer.Option(help="options shown in the table (at least 1)")] = 10,
) -> None:
    """Rank hardware and hybrid deployments for a scenario with the guide's weighted criteria."""
    from xpuplan.decide.scenario import list_presets
    from xpuplan.decide.weights import parse_weight_flags
    from xpuplan.i18n import LANGS, t
    from xpuplan.jobs.recommend import RecommendRequest, recommend

    if lang not in LANGS:
        raise UserInputError(f"expected one of {', '.join(LANGS)}, got {lang!r}", field="--lang")
    if scenario is not None and preset is not None:
        raise UserInputError("give a scenario file or --preset, not both (a file names its preset with scenario:)",
                             field="--preset")
    if preset is not None and preset not in list_presets():
        from xpuplan.errors import UnknownIdError

        err = UnknownIdError("preset", preset, list_presets(), field="--preset")
        raise UserInputError(f"{err.message} (presets: {', '.join(list_presets())})", field="--preset")
    if report is not None:
        from xpuplan.report import report_format

        report_format(report)
    if samples is not None and samples < 0:
        raise UserInputError("must be >= 0", field="--samples")
    if seed is not None and seed < 0:
        raise UserInputError("must be >= 0", field="--seed")
    if top < 1:
        raise UserInputError(f"must be >= 1 (options shown in the table), got {top}", field="--top")
    w = parse_weight_flags(weight) if weight else None
    rec = recommend(RecommendRequest(scenario=scenario, preset=preset, lang=lang, samples=samples, seed=seed,
                                     weights=w))
    if report is not None:
        from xpuplan.report import write_report

        write_report(rec, report)
    if json_:
        print_json(rec.to_dict())
        return
    rows = []
    for o in rec.options[:top]:
        u = o.uncertainty
        rows.append([o.rank, o.label, f"{o.score:.1f}", o.devices, _fmt_time(o.time_s), _fmt_usd(o.cost_usd),
                     _fmt_kwh(o.energy_j),
                     None if u is None else f"{u.p_rank_first:.0%}", o.min_trust])
    console.print(table(
        t("cli.ranked_title", lang, title=rec.title or rec.scenario),
        [t(k, lang) for k in ("report.rank", "report.option", "report.score", "report.devices", "report.time",
                              "report.cost", "report.energy", "report.p_first", "report.trust")],
        rows,
    ))
    e = rec.explanation
    console.print(f"[bold]{escape(e.summary)}[/]", highlight=False)
    for head, lines in (("report.why", e.why), ("report.what_would_change", e.what_would_change),
                        ("report.benchmark_first", e.benchmark_first), ("report.caveats", e.caveats)):
        if lines:
            console.print(f"[bold]{t(head, lang)}[/]", highlight=False)
            for line in lines:
                console.print(f"  - {escape(line)}", highlight=False, soft_wrap=True)
    if rec.rejected:
        console.print(f"[bold]{t('cli.rejected_title', lang)}[/]", highlight=False)
        for r in rec.rejected:
            console.print(f"  [yellow]{escape(r.key)}[/] ({r.constraint}): {escape('; '.join(r.reasons))}",
                          highlight=False, soft_wrap=True)
    if report is not None:
        console.print(f"report: {report}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend_cmd)
