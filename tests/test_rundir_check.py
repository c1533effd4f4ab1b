"""`python -m src.rundir RUN`: an unfinished run is checked against what its own system writes
(src/rundir/completeness.py expected_outputs): the four files every system writes until its summary lists
the rest, not von Oswald et al.'s system's files (which runs made before summaries listed their
outputs keep: tests/test_v1_rundirs.py)."""

from __future__ import annotations

import json

import pytest

from src import rundir as names
from src.rundir import RunDir
from src.rundir.__main__ import check_main


def unfinished(tmp_path, system: str):
    """A run directory as a run of `system` leaves it when stopped before the end: config.json,
    metrics.jsonl and a checkpoint, no summary, no parameters."""
    run = RunDir.create(tmp_path / system).commit()
    run.write_json(
        names.CONFIG, {"command": f"python -m runners.train --out {run.path}", "settings": {"system": system}}
    )
    run.write_text(names.METRICS, "")
    run.write_bytes(names.CHECKPOINT, b"")
    return run


@pytest.mark.parametrize("system", ["gpt2", "lm", "dynamics", "lsa"])
def test_an_unfinished_run_lists_only_what_every_system_writes(tmp_path, system, capsys):
    run = unfinished(tmp_path, system)
    assert check_main([str(run.path)]) == 1
    missing = sorted(
        line.split()[1].rsplit("/", 1)[-1]
        for line in capsys.readouterr().err.splitlines()
        if line.startswith("MISSING")
    )
    assert missing == sorted([names.SUMMARY, names.PARAMS])


def test_a_finished_run_is_checked_against_the_outputs_its_summary_lists(tmp_path, capsys):
    run = unfinished(tmp_path, "gpt2")
    run.write_json(names.SUMMARY, {"status": "complete", "outputs": [names.CONFIG, names.SUMMARY, "extra.json"]})
    assert check_main([str(run.path)]) == 1
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("MISSING")] == [
        f"MISSING {run.path / 'extra.json'} (create it with: python -m runners.train --out {run.path} "
        "--overwrite (retrains the run))"
    ]
    assert json.loads((run.path / names.CONFIG).read_text())["settings"]["system"] == "gpt2"
