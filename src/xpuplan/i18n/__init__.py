"""One translation catalogue for every user-facing message of the decision layer and its reports.

Messages live in ``en.yaml`` and ``zh.yaml`` (same keys; a test checks every English key has a
Chinese entry). ``t(key, lang, **params)`` formats a message with ``str.format`` placeholders.
Numbers are formatted by the caller; the catalogue holds words only.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from xpuplan.errors import UnknownIdError

LANGS = ("en", "zh")
_DIR = Path(__file__).parent


@cache
def catalogue(lang: str) -> dict[str, str]:
    """Every message of ``lang`` (flat mapping key -> template)."""
    if lang not in LANGS:
        raise UnknownIdError("language", lang, LANGS, field="--lang")
    with open(_DIR / f"{lang}.yaml", encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return {str(k): str(v) for k, v in data.items()}


def t(key: str, lang: str = "en", /, **params: Any) -> str:
    """The message ``key`` in ``lang`` with ``params`` filled in (falls back to English)."""
    msgs = catalogue(lang)
    template = msgs.get(key) or catalogue("en")[key]
    return template.format(**params)


__all__ = ["LANGS", "catalogue", "t"]
