"""A second hostile review of issue 13's analytics (ledger query / export / report): where their
output files go. A link planted in the output directory must never make an export or a report
write through it into the ledger."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from ledger.proof.verify import verify
from ledger.store.log import list_segments
from tests.test_views import build_gate_ledger


@pytest.fixture()
def gate(tmp_path) -> Path:
    path = tmp_path / "gate"
    build_gate_ledger(path, segment_bytes=4096)
    return path


def test_a_link_planted_at_the_reports_temporary_name_does_not_overwrite_a_segment(gate, tmp_path):
    # the page used to be written to OUT/.<name>.<pid>.tmp, a name anyone writing OUT could guess
    # and plant as a link to a segment: the report then replaced the ledger's first line with HTML
    out = tmp_path / "shared"
    out.mkdir()
    segment = list_segments(gate)[0]
    before = segment.read_bytes()
    (out / f".report.html.{os.getpid()}.tmp").symlink_to(segment)
    result = CliRunner().invoke(app, ["ledger", "report", str(gate), "--out", str(out / "report.html")])
    assert result.exit_code == 0, result.output
    assert segment.read_bytes() == before
    assert (out / "report.html").read_bytes().startswith(b"<!DOCTYPE html>")
    assert verify(gate).ok


def test_a_link_planted_at_the_exports_temporary_name_does_not_overwrite_a_segment(gate, tmp_path):
    out = tmp_path / "shared"
    out.mkdir()
    segment = list_segments(gate)[1]
    before = segment.read_bytes()
    (out / f".events.jsonl.{os.getpid()}.tmp").symlink_to(segment)
    result = CliRunner().invoke(app, ["ledger", "export", str(gate), "--out", str(out), "--format", "jsonl",
                                      "--view", "events"])
    assert result.exit_code == 0, result.output
    assert segment.read_bytes() == before
    assert verify(gate).ok
