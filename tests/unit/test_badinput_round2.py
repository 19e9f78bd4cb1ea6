"""Bad input, second round: `cost` figures of the other mode (owned vs --cloud), `bench run --device-id`,
`import sglang --kv-dtype`, and an API body that is not JSON. Exit 2 / HTTP 422 naming the flag or field
(400 for a body that is not JSON), never an ignored value or a traceback."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.unit import clicheck
from tests.unit.benchfixtures import SGLANG
from tests.unit.clicheck import run
from xpuplan.errors import UserInputError
from xpuplan.store.engine import open_store
from xpuplan.store.records import list_runs

#: every refusal here is one line
assert_user_error = partial(clicheck.assert_user_error, one_line=True)

runner = CliRunner()
TCO = ("cost", "tco", "--hw", "H100", "--devices", "8")
TRAIN = ("cost", "train", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--tokens", "1e12")
SERVE = ("cost", "serve", "--model", "llama3-8b", "--hw", "H100", "--qps", "5", "--hours", "24")


@pytest.fixture
def client(api_client: Any) -> Any:
    return api_client


def _stored(db_url: str) -> int:
    return len(list_runs(open_store(db_url), limit=100))


# -- 1. cost: owned-only figures with --cloud, cloud-only figures without it ---------------------------
OWNED_ONLY = [("--devices-per-node", "4"), ("--device-price-usd", "30000"), ("--node-system-price-usd", "300000"),
              ("--node-overhead-usd", "20000"), ("--network-usd-per-device", "3000"), ("--fabric", "infiniband-ndr"),
              ("--electricity-usd-per-kwh", "0.1"), ("--usd-per-eur", "1.1"), ("--space-usd-per-kw-year", "100")]


@pytest.mark.parametrize("flag, value", OWNED_ONLY)
def test_tco_owned_only_flag_with_cloud(flag, value):
    assert_user_error(run(*TCO, "--cloud", "aws", flag, value), flag, "--cloud aws", "--owned")
    assert_user_error(run(*TCO, "--cloud", "any", "--cloud-usd-per-device-hour", "2", flag, value), flag, "--cloud")


@pytest.mark.parametrize("cmd", [TRAIN, SERVE])
def test_train_and_serve_owned_only_flag_with_cloud(cmd):
    for flag, value in (("--device-price-usd", "30000"), ("--electricity-usd-per-kwh", "0.1")):
        assert_user_error(run(*cmd, "--cloud", "lambda", flag, value), flag, "--cloud lambda")


@pytest.mark.parametrize("cmd", [TCO, TRAIN, SERVE])
def test_cloud_rate_without_cloud(cmd):
    r = run(*cmd, "--cloud-usd-per-device-hour", "2")
    assert_user_error(r, "--cloud-usd-per-device-hour", "--cloud PROVIDER")
    assert_user_error(run(*cmd, "--owned", "--cloud-usd-per-device-hour", "2"), "--cloud-usd-per-device-hour")


@pytest.mark.parametrize("term", ["spot", "reserved_1y"])
def test_cloud_term_without_cloud(term):
    assert_user_error(run(*TCO, "--term", term), "--term", f"--term {term}", "--cloud")


def test_each_mode_keeps_its_own_figures():
    r = run(*TCO, "--cloud", "any", "--cloud-usd-per-device-hour", "2", "--term", "reserved_1y", "--pue", "1.2",
            "--grid-kg-co2e-per-kwh", "0.4", "--operations-usd-per-year", "1000", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["mode"] == "cloud" and d["lines_usd"]["cloud_usd"] > 0 and d["carbon_t_co2e"] > 0
    r = run(*TCO, "--term", "on_demand", "--device-price-usd", "30000", "--devices-per-node", "8", "--json")
    assert r.exit_code == 0, r.output  # the default term names nothing of the cloud
    assert json.loads(r.stdout)["mode"] == "owned"


def test_other_mode_figures_in_the_api(client):
    url = "/api/v1/cost/tco"
    base = {"hw": "H100", "devices": 8}
    for extra, field in (({"mode": "cloud", "devices_per_node": 4}, "devices_per_node"),
                         ({"provider": "aws", "electricity_usd_per_kwh": 0.1}, "electricity_usd_per_kwh"),
                         ({"cloud_usd_per_device_hour": 2.0}, "cloud_usd_per_device_hour"),
                         ({"mode": "owned", "term": "spot"}, "term")):
        r = client.post(url, json={**base, **extra})
        assert r.status_code == 422 and r.json()["field"] == field, (extra, r.text)
    assert client.post(url, json={**base, "mode": "cloud", "cloud_usd_per_device_hour": 2.0}).status_code == 200


# -- 2. bench run --device-id ----------------------------------------------------------------------
def test_resolve_device_id_names_the_flag() -> None:
    from xpuplan.bench.runner import resolve_device_id

    backend: Any = SimpleNamespace(catalog_id="generic-cpu")
    with pytest.raises(UserInputError) as exc:
        resolve_device_id(backend, "nope")
    assert exc.value.field == "--device-id" and "unknown hardware 'nope'" in exc.value.message
    with pytest.raises(UserInputError) as exc:
        resolve_device_id(backend, "h100x")
    assert exc.value.field == "--device-id" and exc.value.hint and "H100" in exc.value.hint
    assert resolve_device_id(backend, "H100") == "nvidia-h100-sxm-80gb"
    assert resolve_device_id(backend, None) == "generic-cpu"


def test_bench_run_unknown_device_id(db_url: str) -> None:
    pytest.importorskip("torch")
    r = run("bench", "run", "--device", "cpu", "--quick", "--device-id", "nope")
    assert_user_error(r, "--device-id", "unknown hardware 'nope'")
    assert_user_error(run("bench", "run", "--device", "cpu", "--quick", "--dtype", "fp64"), "--dtype")
    assert_user_error(run("bench", "run", "--device", "cpu", "--quick", "--only", "gpu-magic"), "--only")
    assert _stored(db_url) == 0


# -- 3. import sglang --kv-dtype -------------------------------------------------------------------
@pytest.mark.parametrize("kv", ["zz", "int4", "fp64"])
def test_sglang_unknown_kv_dtype(db_url: str, kv: str) -> None:
    r = run("import", "sglang", str(SGLANG), "--device-id", "H100", "--kv-dtype", kv)
    assert_user_error(r, "--kv-dtype", f"'{kv}'", "fp8")
    assert _stored(db_url) == 0


def test_sglang_known_kv_dtype_is_accepted(db_url: str) -> None:
    for kv in ("fp8", "FP8", "auto"):
        r = run("import", "sglang", str(SGLANG), "--device-id", "H100", "--kv-dtype", kv, "--json")
        assert r.exit_code == 0, r.output
    assert _stored(db_url) == 3


# -- 5. API: a body that is not JSON is 400, JSON that is not a request 422 ---------------------------
def test_malformed_json_is_400_naming_the_body(client):
    headers = {"Content-Type": "application/json"}
    r = client.post("/api/v1/cost/tco", content=b'{"hw": "H100",\n "devices": 8 "x": 1}', headers=headers)
    assert r.status_code == 400, r.text
    d = r.json()
    assert d["field"] == "body" and "not valid JSON" in d["error"] and "line 2, column 15" in d["error"], d
    for junk in (b"{not json", b"nul", b"\xff\xfe", b'{"hw": "\xff"}'):
        r = client.post("/api/v1/train/estimate", content=junk, headers=headers)
        assert r.status_code == 400 and r.json()["field"] == "body", (junk, r.text)


def test_json_that_is_not_an_object_is_422_naming_the_body(client):
    headers = {"Content-Type": "application/json"}
    for body, needle in ((b"[1, 2]", "JSON object"), (b"null", "JSON object"), (b"", "no request body")):
        r = client.post("/api/v1/cost/tco", content=body, headers=headers)
        assert r.status_code == 422 and r.json()["field"] == "body" and needle in r.json()["error"], (body, r.text)


def test_openapi_documents_400_for_invalid_json(client):
    responses = client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/cost/tco"]["post"]["responses"]
    assert "not valid JSON" in responses["400"]["description"] and "422" in responses


FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet-hybrid-online.yaml"
H100_ONLY = ("  - hardware: nvidia-a100-sxm-80gb\n    tp: [1, 2]\n    max_devices: 4             # what is left in the "
             "existing A100 servers\n  - hardware: huawei-ascend-910b\n    tp: [1, 2]\n")


@pytest.mark.parametrize(("price", "pricing"), [
    ("    usd_per_hour: 2.5\n    purchase_usd: 30000\n", "pricing: {mode: owned, years: 3, region: us}"),
    ("", "pricing: {mode: owned, years: 3, region: us, term: spot}"),
    ("    purchase_usd: 30000\n", "pricing: {mode: cloud, provider: aws, years: 3, region: us}"),
])
def test_fleet_training_is_priced_in_one_mode(tmp_path, price, pricing):
    """The fleet's training run takes the candidate's price as _price does (a rate rents, a purchase price buys)
    and a rental term only when renting: none of these scenarios is refused by the cost request's mode checks."""
    text = FLEET.read_text(encoding="utf-8")
    assert H100_ONLY in text and "pricing: {mode: owned, years: 3, region: us}" in text
    text = text.replace(H100_ONLY, "").replace("  - hardware: nvidia-h100-sxm-80gb\n    tp: [1, 2]\n",
                                               "  - hardware: nvidia-h100-sxm-80gb\n    tp: [1, 2]\n" + price, 1)
    text = text.replace("pricing: {mode: owned, years: 3, region: us}", pricing)
    f = tmp_path / "fleet.yaml"
    f.write_text(text, encoding="utf-8")
    r = run("fleet", "optimize", str(f), "--json")
    assert r.exit_code == 0, r.output
    training = json.loads(r.stdout)["training"]
    assert training["total_cost"] > 0 and training["hardware"] == "nvidia-h100-sxm-80gb"
