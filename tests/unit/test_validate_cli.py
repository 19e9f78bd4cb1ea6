"""``xpuplan validate`` invoked as a user would: packaged files by default, clear errors (exit 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
HEADER = "id,kind,source,trust,hardware,n_devices,precision,metric,value,model,seq_len,tp,pp,global_batch_tokens\n"
ROW = "R1,train,Test 2024,A,nvidia-a100-sxm-80gb,8,bf16,tokens_per_s_per_device,3000,llama2-7b,4096,1,1,1048576\n"


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def public_json():
    r = run("validate", "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_no_path_validates_every_packaged_file(public_json):
    from xpuplan.validate import PUBLIC_FILES

    assert [Path(f).name for f in public_json["files"]] == list(PUBLIC_FILES)
    assert len(public_json["rows"]) == public_json["summary"]["rows"] > 200
    assert public_json["schema_version"] and "by_family" in public_json["summary"]
    assert "NVIDIA Ampere" in public_json["families"]["train"]
    for r in public_json["rows"]:  # every row: an error or a reason
        assert (r["error"] is None) == (r["predicted"] is None) and (r["predicted"] is not None or r["reason"])


def test_public_flag_and_filters():
    r = run("validate", "--public", "--kind", "infer", "--trust", "b", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert rows and {x["kind"] for x in rows} == {"infer"} and {x["trust"] for x in rows} == {"B"}


def test_readme_example_works_in_a_plain_clone():
    line = next(x for x in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
                if x.startswith("xpuplan validate") and "--local" not in x)
    args = line.split("#")[0].split()[1:]
    assert all(not a.startswith("..") for a in args), "the README example must not need ../shared"
    r = run(*args, "--kind", "train", "--trust", "D")
    assert r.exit_code == 0, r.output


def test_table_shows_the_error_on_every_row(tmp_path):
    p = tmp_path / "mine.csv"
    p.write_text(HEADER + ROW + ROW.replace("R1", "R2").replace(",llama2-7b,", ",,"), encoding="utf-8")
    r = run("validate", str(p))
    assert r.exit_code == 0, r.output
    assert re.search(r"R1 .*[+-]\d+\.\d%", r.stdout)
    assert "no model preset" in r.stdout and "1/2 rows predicted" in r.stdout


def test_no_layout_row_shows_conventional_layout_and_best_plan(tmp_path):
    p = tmp_path / "nolayout.csv"
    p.write_text(HEADER + ROW.replace(",8,", ",16,").replace(",1,1,", ",,,"), encoding="utf-8")
    r = run("validate", str(p), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["rows"][0]["details"]
    assert "conventional layout" in d["layout"] and d["plan"].startswith("tp8-pp1")
    assert d["best_plan"]["predicted"] > 0
    r = run("validate", str(p))
    assert "conventional layout; best plan, an upper bound" in r.stdout


@pytest.mark.parametrize("data, message, line, field", [
    ("\ufeff" + HEADER + ROW, None, None, None),  # Excel's UTF-8 BOM is read
    (HEADER, "no measurement rows", 2, None),
    (HEADER + ROW.replace(",3000,", ",-3,"), "positive", 2, "value"),
    (HEADER + ROW.replace(",3000,", ",0,"), "positive", 2, "value"),
])
def test_csv_as_users_have_it(tmp_path, data, message, line, field):
    p = tmp_path / "user.csv"
    p.write_bytes(data.encode("utf-8"))
    r = run("validate", str(p), "--json")
    if message is None:
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["rows"][0]["predicted"] > 0
        return
    assert r.exit_code == 2, r.output
    err = json.loads(r.stdout)
    assert message in err["error"] and err["line"] == line and err["field"] == field and err["file"] == str(p)
    r = run("validate", str(p))
    assert r.exit_code == 2 and f"user.csv:{line}" in r.output and "Traceback" not in r.output


def test_utf16_and_binary_files_exit_2(tmp_path):
    p = tmp_path / "excel16.csv"
    p.write_bytes((HEADER + ROW).encode("utf-16"))
    r = run("validate", str(p))
    assert r.exit_code == 2 and "UTF-16" in r.output and "excel16.csv:1" in r.output
    b = tmp_path / "model.bin"
    b.write_bytes(bytes(range(256)))
    r = run("validate", str(b))
    assert r.exit_code == 2 and "not a text file" in r.output


def test_unknown_trust_grade_and_kind_exit_2():
    r = run("validate", "--trust", "A,E")
    assert r.exit_code == 2 and "--trust" in r.output and "E" in r.output
    r = run("validate", "--trust", "E", "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["field"] == "--trust"
    r = run("validate", "--kind", "fit")
    assert r.exit_code == 2 and "--kind" in r.output


def test_files_and_public_or_local_are_exclusive(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text(HEADER + ROW, encoding="utf-8")
    assert run("validate", str(p), "--public").exit_code == 2
    assert run("validate", str(p), "--local", "latest").exit_code == 2
