"""The exception table of `cestore._errors` is the binary's (`cestore exit-codes`)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import cestore
from cestore._errors import _BY_CODE, _KINDS, from_json


def binary_table() -> list[dict[str, Any]]:
    """The binary's table: every error kind with its exit code."""
    out = subprocess.run(
        [cestore.find_binary(), "exit-codes", "--json"], capture_output=True, text=True, check=True
    ).stdout
    table = json.loads(out)
    assert table["ok"] is True, table
    return table["exit_codes"]


def test_each_kind_has_the_binarys_exit_code() -> None:
    table = binary_table()
    assert len({e["kind"] for e in table}) == len(table), "a kind listed twice"
    assert {e["kind"]: e["code"] for e in table} == {kind: code for kind, (code, _) in _KINDS.items()}


def test_each_kind_raises_the_exception_of_its_code() -> None:
    for e in binary_table():
        exc = from_json({"code": e["code"], "kind": e["kind"], "message": "m"}, ["cestore"])
        assert (exc.code, exc.kind) == (e["code"], e["kind"])
        assert type(exc) is _KINDS[e["kind"]][1] is _BY_CODE[e["code"]], e
        assert isinstance(exc, cestore.Error)


def test_the_documented_table_is_the_binarys() -> None:
    """docs/python.md's table of exceptions lists each kind under its class and code."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "python.md"
    if not doc.exists():
        pytest.skip("docs/python.md is not beside these tests")
    documented: dict[str, tuple[int, str]] = {}
    for line in doc.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`cestore.") or not cells[1].isdigit():
            continue
        cls = cells[0].strip("`").removeprefix("cestore.")
        # The kinds come first; a note after `;` or `(` may name other things.
        for kind in re.findall(r"`([a-z-]+)`", re.split(r"[;(]", cells[2])[0]):
            documented[kind] = (int(cells[1]), cls)
    assert documented == {
        e["kind"]: (e["code"], _KINDS[e["kind"]][1].__name__) for e in binary_table()
    }
