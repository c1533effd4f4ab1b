"""scripts/bench/record_timing.py: the command runs in the repository's root and its record lands
in report/measurements/<name>.json there, with its exit status, time and provenance."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scripts.bench import record_timing

ROOT = Path(__file__).resolve().parents[1]


def test_the_command_runs_in_the_repository_and_its_record_is_written(tmp_path, monkeypatch, capsys):
    assert record_timing.ROOT == ROOT and record_timing.MEASUREMENTS == ROOT / "report" / "measurements"
    monkeypatch.setattr(record_timing, "MEASUREMENTS", tmp_path)
    command = [sys.executable, "-c", "import os, sys; sys.exit(0 if os.path.isfile('Makefile') else 3)"]
    assert record_timing.main(["probe", "--note", "a test", "--", *command]) == 0
    record = json.loads((tmp_path / "probe.json").read_text())
    assert record["exit"] == 0 and record["note"] == "a test" and record["seconds"] >= 0
    assert {"produced", "commit", "dirty", "machine", "load_before", "peak_rss_gib"} <= set(record)
    failing = [sys.executable, "-c", "import sys; sys.exit(5)"]
    assert record_timing.main(["probe_fails", "--", *failing]) == 5  # recorded, and its status passed on
    assert json.loads((tmp_path / "probe_fails.json").read_text())["exit"] == 5
