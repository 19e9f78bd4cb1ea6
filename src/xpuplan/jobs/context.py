"""Everything a run needs, resolved once into explicit inputs: the run context.

A :class:`RunContext` holds the hardware catalog, the assumption bundle (package defaults, the
user's override files, stored calibration profiles) and how the store is reached. It is the one
place that reads the environment:

* ``XPUPLAN_USE_CALIBRATION`` ("0" ignores stored calibration profiles),
* ``XPUPLAN_DB_URL`` (the store; read by :mod:`xpuplan.store.paths` when the context asks it),
* ``XPUPLAN_ASSUMPTIONS_PATH`` (override files, read by ``catalog.assumptions.load_assumptions``),
* ``XPUPLAN_HW_FIGURES`` (user hardware figures, ``--hw-figure``; set by :func:`use_hw_figures` and
  read by ``catalog.load_catalog``, so every job and every planner sees the same figures). A context
  may also carry figures of its own (:meth:`RunContext.with_hw_figures`, the HTTP API's per-request
  ``hw_figures``), seen by every lookup inside :meth:`RunContext.applied` in that thread only.

Planners receive what the context resolved (an ``Efficiency`` or ``Assumptions``) and never read
any of these themselves. Scenario files are read here too (``training_scenario`` /
``serving_scenario``), so a job sees a validated scenario object and the user's flags.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from xpuplan.errors import UserInputError

if TYPE_CHECKING:
    from xpuplan.catalog.assumptions import Assumptions
    from xpuplan.catalog.device import Device
    from xpuplan.catalog.loader import Catalog
    from xpuplan.models.arch import ModelArch
    from xpuplan.perf.efficiency import Efficiency
    from xpuplan.workload.serving import ServingScenario
    from xpuplan.workload.training import TrainingScenario

#: Set to "0" to ignore stored calibration profiles (tests and reproducible runs); the same name as
#: ``xpuplan.calibrate.ENV_USE_CALIBRATION`` (not imported here: start-up time).
ENV_USE_CALIBRATION: Final = "XPUPLAN_USE_CALIBRATION"


@dataclass
class RunContext:
    """Resolved inputs of one run (catalog, assumptions, calibration); build with :func:`resolve_context`."""

    use_calibration: bool = False
    db_url: str | None = None
    assumption_files: tuple[str, ...] = ()
    #: user hardware figures of this run only (``DEVICE:PATH=VALUE``), laid over the catalog after
    #: ``$XPUPLAN_HW_FIGURES`` while :meth:`applied` is active; build with :meth:`with_hw_figures`
    hw_figures: tuple[str, ...] = ()
    _calibrated: dict[str, Efficiency | None] = field(default_factory=dict, repr=False)
    _assumptions: Assumptions | None = field(default=None, repr=False)

    # -- catalog -----------------------------------------------------------------------------
    @property
    def catalog(self) -> Catalog:
        from xpuplan.catalog import load_catalog

        with self.applied():
            return load_catalog()

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Within this block (this thread or task only) every catalog lookup, the planners' included,
        sees this context's :attr:`hw_figures`; a no-op without any."""
        if not self.hw_figures:
            yield
            return
        from xpuplan.catalog.loader import scoped_figures

        with scoped_figures(";".join(self.hw_figures)):
            yield

    def with_hw_figures(self, entries: list[str] | tuple[str, ...], *, field: str = "hw_figures") -> RunContext:
        """A copy of this context with user figures ``entries`` (each ``DEVICE:PATH=VALUE``, optional
        ``[LOW..HIGH]`` and ``@TRUST``; never a file name) added; each is checked now, an error names
        ``field[i]``. The copy resolves its own calibration profiles (figures change devices)."""
        from xpuplan.catalog.overrides import parse_figure_override
        from xpuplan.errors import UnknownIdError

        entries = tuple(entries)
        if not entries:
            return self
        catalog = self.catalog
        for i, e in enumerate(entries):
            where = f"{field}[{i}]"
            if not isinstance(e, str) or "=" not in e or any(c in e for c in ";\n"):
                raise UserInputError(f"one figure DEVICE:PATH=VALUE per entry, e.g. enflame-s60:dense_tflops.bf16=150 "
                                     f"(got {e!r})", field=where)
            o = parse_figure_override(e, field=where)
            try:
                catalog.resolve(o.device)
            except UnknownIdError as exc:
                raise UserInputError(exc.message, field=where, hint=exc.hint) from None
        return replace(self, hw_figures=(*self.hw_figures, *entries), _calibrated={})

    def device(self, name: str, *, field: str = "--hw") -> Device:
        """A catalog device by id or alias; unknown -> UnknownIdError naming ``field``."""
        from xpuplan.errors import UnknownIdError

        try:
            return self.catalog.get(name)
        except UnknownIdError as exc:
            exc.field = field
            raise UserInputError(exc.message, field=field, hint=exc.hint) from None

    def model(self, name: str, *, field: str = "--model") -> ModelArch:
        """A model by preset id, alias or config.json path; errors name ``field``."""
        from xpuplan.models import get_model

        try:
            return get_model(name)
        except UserInputError as exc:
            if exc.file is not None:
                raise
            raise UserInputError(exc.message, field=field, hint=exc.hint) from None

    # -- assumptions -------------------------------------------------------------------------
    @property
    def base_assumptions(self) -> Assumptions:
        """Package defaults with the user's override files (no calibration)."""
        if self._assumptions is None:
            from xpuplan.catalog.assumptions import load_assumptions

            self._assumptions = load_assumptions(self.assumption_files)
        return self._assumptions

    def calibration(self, device: Device) -> Efficiency | None:
        """The stored calibration profile of ``device`` (None: none stored, or calibration off)."""
        if not self.use_calibration:
            return None
        if device.id not in self._calibrated:
            from xpuplan.calibrate import stored_profile

            # the stored fitted values laid over this context's assumptions (user overrides included)
            self._calibrated[device.id] = stored_profile(device, self.db_url, self.base_assumptions)
        return self._calibrated[device.id]

    def assumptions(self, devices: list[Device] | tuple[Device, ...] = ()) -> Assumptions:
        """The assumption bundle for a run on ``devices``: defaults, overrides, calibration profiles."""
        profiles = {d.id: p for d in devices if (p := self.calibration(d)) is not None}
        base = self.base_assumptions
        return base.with_calibration(profiles) if profiles else base

    def efficiency(self, device: Device) -> Efficiency:
        """Achievable efficiency of ``device`` under this context's assumptions (with its source)."""
        return self.assumptions([device]).efficiency(device)

    # -- scenarios ---------------------------------------------------------------------------
    @staticmethod
    def training_scenario(source: str | Mapping[str, Any] | None) -> TrainingScenario | None:
        """A training scenario from a file path, or from a mapping of the same shape (the HTTP API's
        JSON body: no file is read)."""
        if source is None or (isinstance(source, str) and not source):
            return None
        from xpuplan.workload.training import TrainingScenario, load_training_scenario

        if isinstance(source, Mapping):
            from xpuplan.datafile import load_model

            return load_model(TrainingScenario, dict(source), "<scenario>", {})
        return load_training_scenario(source)

    @staticmethod
    def serving_scenario(source: str | Mapping[str, Any] | None) -> ServingScenario | None:
        """A serving scenario from a file path, or from a mapping of the same shape (no file read)."""
        if source is None or (isinstance(source, str) and not source):
            return None
        from xpuplan.workload.serving import ServingScenario, load_serving_scenario

        if isinstance(source, Mapping):
            from xpuplan.datafile import load_model

            return load_model(ServingScenario, dict(source), "<scenario>", {})
        return load_serving_scenario(source)


def resolve_context(*, use_calibration: bool | None = None, db_url: str | None = None,
                    assumption_files: tuple[str, ...] = ()) -> RunContext:
    """A run context from explicit arguments, falling back to the environment (module doc)."""
    if use_calibration is None:
        use_calibration = os.environ.get(ENV_USE_CALIBRATION, "1").strip() != "0"
    return RunContext(use_calibration=use_calibration, db_url=db_url, assumption_files=tuple(assumption_files))


def use_hw_figures(entries: list[str] | tuple[str, ...]) -> None:
    """Lay user hardware figures over the catalog for the rest of this process (every command).

    Each entry is ``DEVICE:PATH=VALUE`` (optionally ``[LOW..HIGH]`` and ``@TRUST``) or the path of a
    YAML file ``device: {path: value}``; ``--hw-figure`` on the command line. They are checked now
    (unknown device, path or file -> an error naming ``--hw-figure``) and added to
    ``$XPUPLAN_HW_FIGURES`` after any already there.
    """
    from xpuplan.catalog.loader import ENV_FIGURES, load_catalog
    from xpuplan.catalog.overrides import parse_override_specs

    entries = [e.strip() for e in entries if e and e.strip()]
    if not entries:
        return
    for e in entries:
        if ";" in e:
            raise UserInputError(f"one figure per --hw-figure (got {e!r})", field="--hw-figure")
        parse_override_specs(e)  # syntax, path and file errors now, naming the flag
    old = os.environ.get(ENV_FIGURES, "").strip()
    new = ";".join([*([old] if old else []), *entries])
    os.environ[ENV_FIGURES] = new
    try:
        load_catalog()  # unknown devices now
    except UserInputError:
        if old:
            os.environ[ENV_FIGURES] = old
        else:
            os.environ.pop(ENV_FIGURES, None)
        raise


def default_context() -> RunContext:
    """The context of a plain run: the environment as it is now."""
    return resolve_context()


def offline_context() -> RunContext:
    """A context that ignores the store and override files: built-in assumptions only."""
    return RunContext(use_calibration=False)
