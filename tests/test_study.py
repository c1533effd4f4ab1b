"""The study front end's line per finished run (src/jobs/study.py): its name, time, headline number
and how many are left with an estimate of the time left; nothing for a failed run (run_jobs says
FAILED with its log)."""

import json

from src.jobs import study
from src.jobs.engine import Job
from src.settings import Settings


def job(tmp_path, name, cost, summary=None, returncode=0, state="complete", seconds=10.0):
    path = tmp_path / name
    path.mkdir()
    if summary is not None:
        (path / "metrics_summary.json").write_text(json.dumps(summary))
    return Job(name, Settings(), path, cost=cost, state=state, seconds=seconds, returncode=returncode)


def test_a_line_per_finished_run_with_its_headline_and_the_time_left(tmp_path, monkeypatch):
    jobs = [
        job(tmp_path, "a", 1.0, {"eval_loss": 0.123456, "eval_acc": 0.5}),
        job(tmp_path, "b", 1.0, {"steps": 3, "eval_acc": 0.875}),
        job(tmp_path, "c", 2.0, None, returncode=1, state="incomplete"),
    ]
    clock = iter([100.0, 130.0, 160.0])
    monkeypatch.setattr(study.time, "monotonic", lambda: next(clock))
    said = []
    line = study.finished_line(said.append, jobs, start=70.0)
    for j in jobs:
        line(j)
    assert said == [
        "  done a (10s; eval_loss 0.1235) [1/3, about 90 s left]",  # 30 s for 1 of 4 cost units
        "  done b (10s; eval_acc 0.875) [2/3, about 60 s left]",
    ]  # 60 s for 2 of 4


def test_the_headline_of_a_run_without_a_summary_is_empty(tmp_path):
    assert study.headline(tmp_path) == ""
    (tmp_path / "metrics_summary.json").write_text(json.dumps({"eval_ok": True, "eval_n": 3}))
    assert study.headline(tmp_path) == " eval_n 3"
