"""Alembic environment for xpuplan's store, usable from the installed package.

``xpuplan.store.engine.upgrade`` passes an open connection in ``config.attributes``; the
``alembic`` command line works too with ``-x url=...`` or ``sqlalchemy.url`` set.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from xpuplan.store.models import Base
from xpuplan.store.paths import db_url_or_default

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    x = context.get_x_argument(as_dictionary=True).get("url")
    return db_url_or_default(x or config.get_main_option("sqlalchemy.url"))


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    # render_as_batch: SQLite cannot ALTER most things; batch mode recreates tables instead.
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
        conn.commit()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
