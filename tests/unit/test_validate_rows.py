"""Reading validation CSVs as users have them: clear messages naming file, line and field."""

from __future__ import annotations

import pytest

from xpuplan.errors import UserInputError
from xpuplan.validate.rows import read_rows

HEADER = "id,kind,source,trust,hardware,n_devices,precision,metric,value,model,seq_len\n"
ROW = "R1,train,Test 2024,A,nvidia-a100-sxm-80gb,8,bf16,tokens_per_s_per_device,1000,llama2-7b,4096\n"


def write(tmp_path, data: bytes, name: str = "rows.csv"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def error(path) -> UserInputError:
    with pytest.raises(UserInputError) as info:
        read_rows(path)
    return info.value


def test_plain_and_excel_bom_files_read_the_same(tmp_path):
    plain = read_rows(write(tmp_path, (HEADER + ROW).encode()))
    bom = read_rows(write(tmp_path, b"\xef\xbb\xbf" + (HEADER + ROW).encode(), "bom.csv"))
    assert [r.raw for r in plain] == [r.raw for r in bom]
    assert bom[0].id == "R1" and bom[0].line == 2 and bom[0].file.endswith("bom.csv")


def test_crlf_line_endings_are_read(tmp_path):
    rows = read_rows(write(tmp_path, (HEADER + ROW).replace("\n", "\r\n").encode()))
    assert rows[0].get("seq_len") == 4096


def test_utf16_file_is_refused_with_advice(tmp_path):
    for data in ((HEADER + ROW).encode("utf-16"), (HEADER + ROW).encode("utf-16-le")):
        e = error(write(tmp_path, data))
        assert "UTF-16" in e.message and "UTF-8" in e.message and e.line == 1 and e.file.endswith("rows.csv")


def test_binary_file_is_refused(tmp_path):
    e = error(write(tmp_path, b"PK\x03\x04\x14\x00\x00\x00binary zip"))
    assert "not a text file" in e.message and e.line == 1
    e = error(write(tmp_path, (HEADER + ROW).encode() + b"\xff\xfe\xfa garbage"))
    assert "not UTF-8" in e.message and e.line == 3


def test_header_only_and_empty_files(tmp_path):
    e = error(write(tmp_path, HEADER.encode()))
    assert "no measurement rows" in e.message and e.line == 2
    e = error(write(tmp_path, b""))
    assert "empty file" in e.message and e.line == 1


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "abc"])
def test_measured_value_must_be_a_positive_number(tmp_path, value):
    e = error(write(tmp_path, (HEADER + ROW + ROW.replace("R1", "R2").replace(",1000,", f",{value},")).encode()))
    assert e.field == "value" and e.line == 3 and e.file.endswith("rows.csv")
    assert "positive" in e.message or "not a number" in e.message


@pytest.mark.parametrize("grade", ["Z", "", "a", "AB"])
def test_a_rows_trust_grade_must_be_one_of_a_to_d(tmp_path, grade):
    e = error(write(tmp_path, (HEADER + ROW + ROW.replace("R1", "R2").replace(",A,", f",{grade},")).encode()))
    assert e.field == "trust" and e.line == 3 and "A, B, C, D" in e.message


def test_device_count_must_be_a_positive_whole_number(tmp_path):
    for n in ("0", "2.5"):
        e = error(write(tmp_path, (HEADER + ROW.replace(",8,", f",{n},")).encode()))
        assert e.field == "n_devices" and e.line == 2


def test_missing_column_duplicate_id_and_bad_number(tmp_path):
    e = error(write(tmp_path, b"id,kind,value\nR1,train,3\n"))
    assert e.field == "source" and e.line == 1 and "missing column" in e.message
    e = error(write(tmp_path, (HEADER + ROW + ROW).encode()))
    assert e.field == "id" and e.line == 3 and "line 2" in e.message
    e = error(write(tmp_path, (HEADER + ROW.replace(",4096", ",long")).encode()))
    assert e.field == "seq_len" and e.line == 2
    e = error(write(tmp_path, (HEADER + ROW.replace(",4096", ",4096.5")).encode()))
    assert e.field == "seq_len" and "whole number" in e.message
    e = error(write(tmp_path, (HEADER + ROW.replace(",4096", ",inf")).encode()))
    assert e.field == "seq_len" and "finite" in e.message


def test_line_numbers_count_multi_line_quoted_fields(tmp_path):
    two_line = ROW.replace("Test 2024", '"Test 2024\nsecond line"')
    data = HEADER + two_line + ROW.replace("R1", "R2").replace(",1000,", ",-1,")
    e = error(write(tmp_path, data.encode()))
    assert e.line == 4  # R1 spans lines 2-3


def test_file_not_found_and_directory(tmp_path):
    assert "file not found" in error(tmp_path / "nope.csv").message
    assert "directory" in error(tmp_path).message
