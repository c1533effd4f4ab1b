"""Times and memory the docs quote come from a recorded measurement: the length study's own config
at the laptop size (make lengthgen_laptop -> report/measurements/lengthgen_laptop.json, with its
commit, machine and date). A quote that differs from the record fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "report" / "measurements" / "lengthgen_laptop.json"


def quoted(part: dict) -> tuple[str, str]:
    """How the docs write a part's wall time and peak memory."""
    return f"{part['seconds'] / 60:.0f} min", f"peak memory {part['peak_rss_gib']:.1f} GiB"


def test_the_record_is_complete_and_from_a_clean_commit():
    record = json.loads(RECORD.read_text())
    assert record["dirty"] is False and len(record["commit"]) == 40 and record["machine"]
    for part in ("train", "eval"):
        assert record[part]["exit"] == 0 and record[part]["seconds"] > 0 and record[part]["peak_rss_gib"] > 0
    assert record["eval"]["evaluated_points"] == 8 * 201 and record["eval"]["eval_tasks"] == 64


@pytest.mark.parametrize("doc", ["README.md", "docs/length_generalisation.md"])
def test_the_docs_quote_the_recorded_laptop_figures(doc):
    from scripts.bench.laptop_lengthgen import LAPTOP

    record = json.loads(RECORD.read_text())
    text = (ROOT / doc).read_text()
    assert " ".join(f"--set {value}" for value in LAPTOP) in text, doc  # the command measured
    for part in ("train", "eval"):
        for figure in quoted(record[part]):
            assert figure in text, (doc, part, figure)


def test_the_length_test_announced_at_least_the_memory_it_was_measured_to_use(monkeypatch):
    """What analysis.length_gen announces (and checks) for the recorded evaluation covers its
    recorded peak resident memory."""
    from analysis.icl_curve import check_memory_for
    from scripts.bench.laptop_lengthgen import CONFIG, EVAL_TASKS, LAPTOP
    from src import bounds
    from src.cli.gpt2 import read_config

    monkeypatch.setattr(bounds, "available_bytes", lambda: None)
    record = json.loads(RECORD.read_text())
    settings, _ = read_config(str(ROOT / CONFIG), list(LAPTOP))
    announced = check_memory_for(settings, record["eval"]["evaluated_points"], EVAL_TASKS, "the length test")
    assert announced / 2**30 >= record["eval"]["peak_rss_gib"], (announced / 2**30, record["eval"])
