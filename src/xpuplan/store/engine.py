"""Engine, schema migrations and sessions.

``open_store(url)`` returns a :class:`Store` whose schema is at the newest Alembic revision
(migrating an older database in place). Writes go through :meth:`Store.transaction`, one
transaction per logical record, so a process killed half-way leaves every committed record
intact and nothing half-written: SQLite's journal (and any server database) rolls an
interrupted transaction back.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from xpuplan.errors import UserInputError
from xpuplan.store.paths import db_url_or_default, is_sqlite, sqlite_file

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

#: SQLite waits this long for a lock held by another process (a collectives rank, a second
#: bench run) before failing, in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 30_000


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cur.close()


def make_engine(url: str) -> Engine:
    """A SQLAlchemy engine for ``url`` (SQLite: foreign keys on, parent directory created)."""
    try:
        if is_sqlite(url):
            path = sqlite_file(url)
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise UserInputError(f"cannot create the database directory {path.parent}: {exc.strerror}",
                                         field="db") from None
            engine = create_engine(url)
            event.listen(engine, "connect", _sqlite_pragmas)
            return engine
        return create_engine(url, pool_pre_ping=True)
    except (ArgumentError, ModuleNotFoundError, ImportError) as exc:
        raise UserInputError(f"cannot use database URL {url!r}: {exc}", field="db") from None


def alembic_config(url: str) -> Config:
    """Alembic configuration pointing at the packaged migrations (no alembic.ini needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (idempotent)."""
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


@dataclass
class Store:
    """An open store: an engine plus a session factory."""

    url: str
    engine: Engine

    def __post_init__(self) -> None:
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session whose work is committed as one transaction (rolled back on error)."""
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A read session (nothing is committed unless the caller commits)."""
        with self._sessions() as session:
            yield session

    def dispose(self) -> None:
        self.engine.dispose()

    @property
    def display_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)


def open_store(db_url: str | None = None, *, migrate: bool = True) -> Store:
    """Open (and by default create or migrate) the store at ``db_url`` / ``XPUPLAN_DB_URL`` /
    the default SQLite file. Connection problems raise :class:`UserInputError` naming ``db``."""
    url = db_url_or_default(db_url)
    engine = make_engine(url)
    try:
        if migrate and current_revision(engine) != head_revision():
            upgrade(engine)
    except OperationalError as exc:
        engine.dispose()
        raise UserInputError(f"cannot open database {url!r}: {exc.orig}", field="db") from None
    except SQLAlchemyError as exc:
        engine.dispose()
        raise UserInputError(f"database error on {url!r}: {exc}", field="db") from None
    return Store(url=url, engine=engine)
