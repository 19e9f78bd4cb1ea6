"""The OpenAPI schema fuzzed with Schemathesis: no 5xx, and every response matches the schema.

Bounded: a few examples per operation (``MAX_EXAMPLES``), no shrinking, no example database, so the
whole module runs in well under a minute on two cores. Background jobs submitted by the fuzzer run
in the app's pool and are cancelled when the app stops.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("fastapi")

from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from xpuplan.api.app import create_app  # noqa: E402

#: Examples generated per operation.
MAX_EXAMPLES = 10
#: Operations that take about a second per call (the decision engine): fewer examples.
SLOW = r"/recommend$"
SLOW_EXAMPLES = 2

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]
_TMP = tempfile.mkdtemp(prefix="xpuplan-fuzz-")
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
_DB = Path(_TMP) / "fuzz.db"
APP = create_app(store_url=f"sqlite:///{_DB}", use_calibration=False, workers=1)
schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", APP)
_SETTINGS = {"deadline": None, "database": None, "derandomize": True, "phases": [Phase.explicit, Phase.generate],
             "suppress_health_check": list(HealthCheck)}


def _check(case: schemathesis.Case) -> None:
    # what the API promises: no 5xx; status codes, content types, headers and bodies as documented.
    # (Not "every schema-valid request is accepted": a schema cannot say which strings are catalog ids,
    # so a well-typed request naming an unknown device is rightly refused with 422.)
    case.call_and_validate(checks=CHECKS)


@schema.exclude(path_regex=SLOW).parametrize()
@settings(max_examples=MAX_EXAMPLES, **_SETTINGS)
def test_api_conforms_to_its_schema(case: schemathesis.Case) -> None:
    _check(case)


@schema.include(path_regex=SLOW).parametrize()
@settings(max_examples=SLOW_EXAMPLES, **_SETTINGS)
def test_slow_operations_conform_to_the_schema(case: schemathesis.Case) -> None:
    _check(case)
