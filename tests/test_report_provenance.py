"""The provenance header every study report opens with (plots/provenance.py): the commit, marked
loudly when the tree was dirty, the machine, and the training time summed over the runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from src.jobs.declared import StudyRun
from plots.provenance import commit_line, header, training_seconds
from src import rundir as names
from src.rundir import RunDir


@dataclass
class FakeJob:
    path: Path
    seconds: float = 0.0

    @property
    def run(self) -> RunDir:
        return RunDir(self.path)


def _jobs(tmp_path: Path, seconds: list[float | None]) -> list[FakeJob]:
    jobs = []
    for i, s in enumerate(seconds):
        path = tmp_path / f"run{i}"
        path.mkdir()
        if s is not None:
            (path / names.SUMMARY).write_text(json.dumps({"train_seconds": s}))
        jobs.append(FakeJob(path, seconds=5.0 if i == 0 else 0.0))
    return jobs


def test_the_training_time_is_summed_over_the_runs_not_the_last_invocation(tmp_path):
    jobs = _jobs(tmp_path, [100.5, 200.25, None])
    assert training_seconds(jobs) == (300.75, 2)
    text = "\n".join(
        header(
            "A study", StudyRun(jobs, tmp_path, False, 7.0, "python -m scripts.x", {"commit": "a" * 40, "dirty": False})
        )
    )
    assert "3 runs; their training loops took 5.0 min in all (301 s, one process per run" in text
    assert "2 runs recorded it" in text and "trained 1 of them in 7 s" in text
    assert "commit aaaaaaaaaaaa (clean tree)" in text and "CPU cores" in text


def test_a_dirty_tree_is_marked_loudly():
    line = commit_line({"commit": "b" * 40, "dirty": True})
    assert "**with uncommitted changes" in line and "do not ship it**" in line
    assert commit_line({"commit": None, "dirty": None}).startswith("commit unknown")
