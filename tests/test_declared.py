"""Studies declared as data (src/jobs/declared.py): a grid of cells x learning rates x seeds is one
run each, named and seeded as the declaration says; a study's command checks its flags before any
work (one line, exit 2), plans its runs, and hands its report a StudyRun."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from src.jobs.declared import Cell, Study, StudyRun, cell_runs
from src.jobs.study import read_settings, study_command
from src.flags import DRY_RUN, UsageError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def base():
    return read_settings(str(ROOT / "configs" / "matrix.yaml"))


def test_cells_times_rates_times_seeds_are_one_run_each(base, tmp_path):
    cells = [Cell("a", base, {"mixer": "softmax"}), Cell("b", replace(base, train=replace(base.train, steps=7)))]
    jobs = cell_runs(cells, (0, 2), tmp_path, learning_rates=(1e-3, 3e-4))
    assert [j.name for j in jobs] == [
        "a_lr0.001_seed0",
        "a_lr0.001_seed2",
        "a_lr0.0003_seed0",
        "a_lr0.0003_seed2",
        "b_lr0.001_seed0",
        "b_lr0.001_seed2",
        "b_lr0.0003_seed0",
        "b_lr0.0003_seed2",
    ]
    assert [j.settings.train.seed for j in jobs] == [0, 2] * 4 and jobs[2].settings.train.learning_rate == 3e-4
    assert [j.seed for j in jobs] == [0, 2] * 4 and jobs[2].learning_rate == 3e-4 and jobs[2].cell == "a"
    assert jobs[0].cost == float(base.train.steps) and jobs[-1].cost == 7.0
    assert all(j.state == "absent" and j.path == tmp_path / j.name for j in jobs)
    assert jobs[0].mixer == "softmax"  # a cell's tags read as the job's attributes
    with pytest.raises(AttributeError, match="has no 'width'"):
        jobs[0].width
    assert getattr(jobs[4], "mixer", None) is None


def test_a_study_of_whole_runs_keeps_their_names_seeds_and_places(base, tmp_path):
    seeded = replace(base, train=replace(base.train, seed=5))
    elsewhere = tmp_path / "other" / "x"
    jobs = cell_runs([Cell("x_seed5", seeded, path=elsewhere, cost=3.0), Cell("y", base)], None, tmp_path)
    assert [(j.name, j.seed, j.cost) for j in jobs] == [("x_seed5", 5, 3.0), ("y", base.train.seed, base.train.steps)]
    assert jobs[0].path == elsewhere and jobs[1].path == tmp_path / "y"


def test_a_bad_cell_is_refused_by_its_settings_check(base, tmp_path):
    from src.settings import SettingsError

    with pytest.raises(SettingsError):
        cell_runs([Cell("bad", replace(base, train=replace(base.train, steps=0)))], (0,), tmp_path)


def _study(report, base, seen: list) -> Study:
    def add_flags(parser):
        parser.add_argument("--sizes", default="7,9")

    def sizes(flags) -> list[int]:
        try:
            return [int(s) for s in flags.sizes.split(",")]
        except ValueError:
            raise UsageError(f"--sizes={flags.sizes!r} is not accepted; accepted: a comma list of integers") from None

    def cells(flags, runs_dir):
        seen.append(runs_dir)
        return [Cell(f"steps{n}", replace(base, train=replace(base.train, steps=n)), {"n": n}) for n in sizes(flags)]

    return Study("scratch", "A scratch study.", "one seed", cells, report, flags=add_flags, check=sizes)


def test_the_command_checks_its_flags_before_any_work(base, tmp_path, capsys):
    main = study_command(_study(lambda run: [], base, []))
    code = main(["--sizes", "x", "--runs-dir", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "report")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == (
        "python -m scripts.scratch: error: --sizes='x' is not accepted; accepted: a comma list of integers"
    )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "report").exists()


def test_a_dry_run_plans_every_run_and_writes_nothing(base, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(DRY_RUN, "1")
    seen: list = []
    main = study_command(_study(lambda run: [], base, seen))
    assert main(["--runs-dir", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "report")]) == 0
    assert "would make 2 runs in" in capsys.readouterr().out and seen == [tmp_path / "runs"]
    assert not (tmp_path / "runs").exists()


def test_the_report_gets_the_study_run(base, tmp_path, monkeypatch):
    """With training stubbed out, the report function receives the planned jobs, the report
    directory, --quick, the command and the flags."""
    import src.jobs.study as study

    got: list[StudyRun] = []

    def no_training(prog, jobs, runs_dir, workers, write_report, executor=None, quiet=False):
        return 0 if write_report(1.5, {"commit": "abc"}) is not None else 1

    monkeypatch.setattr(study, "run_study", no_training)
    main = study_command(_study(lambda run: got.append(run) or [], base, []))
    argv = ["--quick", "--sizes", "3", "--runs-dir", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "r")]
    assert main(argv) == 0
    (run,) = got
    assert [j.name for j in run.jobs] == ["steps3_seed0"] and run.jobs[0].n == 3 and run.quick
    assert run.report_dir == tmp_path / "r" and run.seconds == 1.5 and run.head == {"commit": "abc"}
    assert run.command.startswith("python -m scripts.scratch --quick --sizes 3") and run.flags.sizes == "3"
