"""Where the store lives: ``--db`` / ``XPUPLAN_DB_URL`` / the user's data directory.

Kept free of SQLAlchemy imports so that asking "is there a database at all?" is cheap.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Environment variable holding a SQLAlchemy URL for the store (e.g. ``postgresql+psycopg://...``).
ENV_DB_URL = "XPUPLAN_DB_URL"
#: File name of the default SQLite database inside the data directory.
DB_FILE_NAME = "xpuplan.db"
APP_DIR_NAME = "xpuplan"


def data_dir() -> Path:
    """The user's data directory for xpuplan (created on first write, not here).

    Linux and other Unix: ``$XDG_DATA_HOME/xpuplan`` or ``~/.local/share/xpuplan``; macOS:
    ``~/Library/Application Support/xpuplan``; Windows: ``%LOCALAPPDATA%\\xpuplan``.
    """
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg:
        return Path(xdg) / APP_DIR_NAME
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP_DIR_NAME
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return (Path(local) if local else Path.home() / "AppData" / "Local") / APP_DIR_NAME
    return Path.home() / ".local" / "share" / APP_DIR_NAME


def default_db_path() -> Path:
    return data_dir() / DB_FILE_NAME


def default_db_url() -> str:
    """``XPUPLAN_DB_URL`` when set, else SQLite in the data directory."""
    env = os.environ.get(ENV_DB_URL, "").strip()
    if env:
        return env
    return f"sqlite:///{default_db_path()}"


def db_url_or_default(db_url: str | None) -> str:
    """An explicit URL (``--db``) wins; a bare file path is taken as a SQLite file."""
    if db_url is None or not db_url.strip():
        return default_db_url()
    db_url = db_url.strip()
    if "://" not in db_url:
        return f"sqlite:///{Path(db_url).expanduser().resolve()}"
    return db_url


def sqlite_file(url: str) -> Path | None:
    """The file behind a SQLite URL; None for other databases and in-memory SQLite.

    Handles ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` and driver suffixes
    (``sqlite+pysqlite://``). Query strings are ignored.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.split("+", 1)[0] == "sqlite":
        return None
    path = rest.split("?", 1)[0]
    if path.startswith("/"):
        path = path[1:]  # sqlite:///x -> 'x' (relative); sqlite:////x -> '/x' (absolute)
    if path in ("", ":memory:") or path.startswith("file:"):
        return None
    return Path(path)


def is_sqlite(url: str) -> bool:
    return url.partition("://")[0].split("+", 1)[0] == "sqlite"
