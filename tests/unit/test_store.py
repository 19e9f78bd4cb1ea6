"""Store: migrations, transactional records, run references, scenarios, the raw calibration look-up."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.perf.efficiency import Efficiency, efficiency_for
from xpuplan.store import paths
from xpuplan.store.calibrations import (
    CalibrationRow,
    latest_calibration_row,
    list_calibrations,
    save_calibration,
)
from xpuplan.store.engine import current_revision, head_revision, open_store
from xpuplan.store.records import (
    Record,
    RunInfo,
    add_measurement,
    count_measurements,
    effective_status,
    finish_run,
    get_scenario,
    list_runs,
    list_scenarios,
    record_import,
    resolve_run,
    run_measurements,
    save_scenario,
    start_run,
)

runner = CliRunner()


def _rec(i: int) -> Record:
    return Record(kind="gemm", name=f"gemm {i}", metric="tflops", value=1.0 + i, unit="TFLOP/s", dtype="bf16",
                  time_s=1e-3, flops=2e9, bytes=1e6, params={"m": 64, "n": 64, "k": 64})


def test_migrated_schema_matches_models(db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from xpuplan.store.models import Base

    store = open_store(db_url)
    assert current_revision(store.engine) == head_revision()
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diffs == []


def test_open_is_idempotent_and_creates_parent_dirs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a' / 'b' / 'x.db'}"
    open_store(url).dispose()
    store = open_store(url)
    assert current_revision(store.engine) == head_revision()


def test_run_lifecycle_and_references(db_url: str) -> None:
    store = open_store()
    rid = start_run(store, RunInfo(kind="bench", device_id="generic-cpu", device_name="CPU", config={"quick": True}))
    assert [add_measurement(store, rid, _rec(i)) for i in range(3)] == [0, 1, 2]
    finish_run(store, rid, "completed")
    run = resolve_run(store, "latest")
    assert run.id == rid and run.status == "completed" and run.finished_at is not None
    assert resolve_run(store, str(rid)).id == rid
    assert resolve_run(store, "latest:bench").id == rid
    assert [m.seq for m in run_measurements(store, rid)] == [0, 1, 2]
    assert count_measurements(store, [rid]) == {rid: 3}
    assert list_runs(store, kind="bench", device_id="generic-cpu")[0].id == rid
    with pytest.raises(UserInputError, match="unknown run 999"):
        resolve_run(store, "999")
    with pytest.raises(UserInputError, match="expected a run id"):
        resolve_run(store, "yesterday")
    with pytest.raises(UserInputError, match="no runs of kind collectives"):
        resolve_run(store, "latest:collectives")


def test_import_is_all_or_nothing(db_url: str) -> None:
    store = open_store()
    bad = [_rec(0), Record(kind="gemm", name="broken", metric="tflops", value=None, unit="x")]  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        record_import(store, RunInfo(kind="import-csv"), bad)
    assert list_runs(store) == []
    rid = record_import(store, RunInfo(kind="import-csv", source="x.csv"), [_rec(0), _rec(1)])
    assert count_measurements(store, [rid]) == {rid: 2}


def test_killed_run_shows_aborted(db_url: str) -> None:
    store = open_store()
    rid = start_run(store, RunInfo(kind="bench"))
    with store.transaction() as s:
        from xpuplan.store.models import Run

        run = s.get(Run, rid)
        assert run is not None
        run.pid = 2**22 + 12345  # beyond pid_max: no such process
    assert effective_status(resolve_run(store, rid)) == "aborted"


def test_scenarios_round_trip(db_url: str) -> None:
    store = open_store()
    sid = save_scenario(store, "llama70b-h100", "train", {"model": "llama3-70b"}, {"step_time_s": 5.0})
    assert get_scenario(store, "llama70b-h100").id == sid
    assert get_scenario(store, str(sid)).result == {"step_time_s": 5.0}
    assert [s.name for s in list_scenarios(store, kind="train")] == ["llama70b-h100"]
    with pytest.raises(UserInputError):
        get_scenario(store, "nope")
    with pytest.raises(UserInputError):
        save_scenario(store, " ", "train", {})


def test_latest_calibration_without_database_is_none_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "x.db"
    assert latest_calibration_row("generic-cpu", f"sqlite:///{missing}") is None
    assert not missing.exists() and not missing.parent.exists()


def test_latest_calibration_survives_broken_stores(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database")
    assert latest_calibration_row("generic-cpu", f"sqlite:///{junk}") is None
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # a valid SQLite file without our tables
    assert latest_calibration_row("generic-cpu", f"sqlite:///{empty}") is None
    assert latest_calibration_row("generic-cpu", "postgresql+nosuchdriver://u@localhost/x") is None


def test_latest_calibration_row_is_raw_and_newest(db_url: str) -> None:
    from xpuplan.catalog import load_catalog

    store = open_store()
    base = efficiency_for(load_catalog().get("generic-cpu"))
    save_calibration(store, "generic-cpu", base.merged({"gemm_peak_fraction": 0.1}, "fit"), run_ids=[1], report={})
    cal_id, eff = save_calibration(store, "generic-cpu", base.merged({"gemm_peak_fraction": 0.2}, "fit"), run_ids=[2],
                                   report={})
    assert isinstance(eff, Efficiency) and eff.source.startswith(f"calibration:#{cal_id} for generic-cpu")
    row = latest_calibration_row("generic-cpu", db_url)
    assert isinstance(row, CalibrationRow)
    # the store returns what was saved: a plain mapping, no defaults laid over it
    assert row.id == cal_id and row.run_ids == (2,) and isinstance(row.efficiency, dict)
    assert row.efficiency["gemm_peak_fraction"] == pytest.approx(0.2)
    assert latest_calibration_row("nvidia-h100-sxm-80gb", db_url) is None
    assert [c.id for c in list_calibrations(store, "generic-cpu")][0] == cal_id


def test_default_location_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(paths.ENV_DB_URL, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert paths.default_db_url() == f"sqlite:///{tmp_path / 'xpuplan' / 'xpuplan.db'}"
    monkeypatch.setenv(paths.ENV_DB_URL, "postgresql://db/x")
    assert paths.default_db_url() == "postgresql://db/x"
    assert paths.db_url_or_default(str(tmp_path / "f.db")) == f"sqlite:///{tmp_path / 'f.db'}"
    assert paths.sqlite_file("sqlite:////abs/x.db") == Path("/abs/x.db")
    assert paths.sqlite_file("sqlite:///rel.db") == Path("rel.db")
    assert paths.sqlite_file("sqlite://") is None and paths.sqlite_file("postgresql://h/x") is None


def test_db_cli(db_url: str) -> None:
    res = runner.invoke(app, ["db", "info", "--json"])
    assert res.exit_code == 0, res.output
    from xpuplan.store.engine import head_revision

    head = head_revision()
    assert head is not None and f'"revision": "{head}"' in res.stdout
    res = runner.invoke(app, ["db", "upgrade"])
    assert res.exit_code == 0 and head in res.stdout


def test_bad_db_url_is_a_user_error(tmp_path: Path) -> None:
    res = runner.invoke(app, ["bench", "list", "--db", "nosuchdialect://x"])
    assert res.exit_code == 2
    assert "db" in res.output and "Traceback" not in res.output
    blocked = tmp_path / "file"
    blocked.write_text("x")
    res = runner.invoke(app, ["bench", "list", "--db", f"sqlite:///{blocked}/sub/x.db"])
    assert res.exit_code == 2, res.output


def test_bench_list_and_show_cli(db_url: str) -> None:
    store = open_store()
    rid = start_run(store, RunInfo(kind="bench", device_id="generic-cpu", device_name="Test CPU"))
    add_measurement(store, rid, _rec(0))
    finish_run(store, rid)
    res = runner.invoke(app, ["bench", "list"])
    assert res.exit_code == 0 and "Test CPU" in res.stdout
    res = runner.invoke(app, ["bench", "show", "latest", "--json"])
    assert res.exit_code == 0 and '"gemm 0"' in res.stdout
    res = runner.invoke(app, ["bench", "show", "42"])
    assert res.exit_code == 2 and "unknown run 42" in res.output
    res = runner.invoke(app, ["bench", "list", "--kind", "nope"])
    assert res.exit_code == 2


def test_tests_never_touch_the_users_store() -> None:
    # the suite's conftest points the data directory at a temporary one and unsets XPUPLAN_DB_URL
    home = os.environ["XPUPLAN_TEST_DATA_HOME"]
    assert str(paths.data_dir()).startswith(home)
    assert paths.default_db_url().startswith(f"sqlite:///{home}")


def test_a_0001_database_migrates_in_place_to_the_jobs_table(db_url: str) -> None:
    from xpuplan.store.engine import make_engine, upgrade
    from xpuplan.store.jobs import create_job, finish_job, get_job, interrupt_unfinished

    engine = make_engine(db_url)
    upgrade(engine, "0001")
    assert current_revision(engine) == "0001"
    engine.dispose()
    store = open_store(db_url)  # migrates to head: scenarios kept, jobs table added
    assert current_revision(store.engine) == head_revision() != "0001"
    save_scenario(store, "kept", "train", {"model": "llama3-8b"})
    create_job(store, "a" * 32, "recommend", {"preset": "pretraining"})
    create_job(store, "b" * 32, "simulate", {})
    assert finish_job(store, "a" * 32, "succeeded", result={"x": 1})
    assert not finish_job(store, "a" * 32, "failed")  # a finished job never changes
    assert interrupt_unfinished(store) == 1
    assert get_job(store, "a" * 32).result == {"x": 1}
    assert get_job(store, "b" * 32).status == "interrupted"
    store.dispose()
