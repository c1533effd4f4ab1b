"""The GPU queue (scripts/device/gpu_queue.py) and report/PAPER_SCALE.md (plots/paper_scale.py): every job
fits one device command, `next` names the first job not run and its exact call, `record` files what
came back with provenance, the report's verdicts follow its numbers, `all` runs every job not
recorded (a job run here: tests/test_gpu_job_runs.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from plots import paper_scale
from scripts.device import gpu_job, gpu_queue
from scripts.device.gpu_queue_jobs import BY_NAME, JOBS
from src.flags import UsageError

ROOT = Path(__file__).resolve().parents[1]


def test_every_job_fits_one_device_command():
    assert gpu_job.JOB_LIMIT_S <= 9 * 60 and gpu_queue.DEVICE_TIMEOUT_S <= 600
    assert gpu_queue.DEVICE_TIMEOUT_S - gpu_job.JOB_LIMIT_S >= 30  # the wheels' install before the job
    for job in JOBS:
        assert job.expected.total <= gpu_job.JOB_LIMIT_S, job.name
        assert job.kind in ("mechanisms", "speed", "study")
        assert (job.kind == "mechanisms") == bool(job.runs) and (job.kind == "study") == (job.study is not None)
        if job.study:  # the study's own command, its files present; the job names the folders
            for args in (job.study.args, job.study.rehearsal):
                assert (ROOT / (args[0].replace(".", "/") + ".py")).is_file()
                assert not {"--runs-dir", "--report-dir"} & set(args)
            assert all((ROOT / a).is_file() for a in job.study.args if a.startswith("configs/"))
    assert len({job.name for job in JOBS}) == len(JOBS)


def test_the_recorded_plan_is_the_queues():
    """report/measurements/gpu_queue_plan.json (the docs quote its expected seconds) is what the
    queue computes now: `python -m scripts.device.gpu_queue list --json <it>` rewrites it."""
    shipped = json.loads((ROOT / "report/measurements/gpu_queue_plan.json").read_text())
    now = gpu_queue.plan("any")
    assert {k: v for k, v in shipped.items() if k not in ("commit", "produced")} == {
        k: v for k, v in now.items() if k not in ("commit", "produced")
    }


@pytest.mark.parametrize("runs", [1, 4, 8])
@pytest.mark.parametrize("budget", [120, 300, 540])
def test_planned_steps_leave_the_start_compilation_and_evaluation(runs, budget):
    steps = gpu_job.planned_steps(runs, budget)
    assert 100 <= steps <= gpu_job.PAPER_STEPS and steps % 100 == 0
    train = steps * gpu_job.MS_PER_STEP_PER_RUN * runs / 1000
    fixed = gpu_job.START_S + gpu_job.COMPILE_S + gpu_job.EVALUATE_S + gpu_job.MARGIN_S
    assert train + fixed <= budget or steps == 100
    assert gpu_job.planned_steps(runs, budget + 200) >= steps


def fake_device_output(folder: Path, job: str, *, rehearsal: bool = False, pieces=None, commit="abc1234") -> Path:
    folder.mkdir(parents=True)
    (folder / "job.json").write_text(
        json.dumps(
            {
                "job": job,
                "commit": commit,
                "clean": True,
                "rehearsal": rehearsal,
                "device": "NVIDIA H200, 143771 MiB",
                "jax": "0.11.2",
                "began_utc": "2026-11-29 10:00:00",
                "wall_s": 512.3,
                "state": "done",
                "pieces": pieces or [],
            }
        )
    )
    (folder / "job.log").write_text("[0.0 s] began\n")
    return folder


def test_next_names_the_first_job_not_run_and_its_device_call(tmp_path, capsys):
    records = tmp_path / "records"
    assert gpu_queue.main(["next", "--records-dir", str(records)]) == 0
    first = JOBS[0]
    out = capsys.readouterr().out
    assert out.startswith(f"next: {first.name}: ")
    assert f"python3 -m scripts.device.gpu_queue run {first.name} --out $OUT --commit " in out
    assert "timeout_s: 600" in out and json.dumps(list(first.carry)) in out
    gpu_queue.record(first, fake_device_output(tmp_path / "back", first.name), records)
    gpu_queue.main(["next", "--records-dir", str(records)])
    assert capsys.readouterr().out.startswith(f"next: {JOBS[1].name}: ")
    for i, job in enumerate(JOBS[1:]):
        gpu_queue.record(job, fake_device_output(tmp_path / f"back{i}", job.name), records)
    gpu_queue.main(["next", "--records-dir", str(records)])
    assert "none waits" in capsys.readouterr().out


def test_record_files_what_came_back_with_its_provenance(tmp_path):
    job = BY_NAME["speed"]
    back = fake_device_output(tmp_path / "back", "speed")
    (back / "paper_cell_bench.json").write_text(json.dumps({"variants": {"float32": {"ms_per_run_step": 12.09}}}))
    target = gpu_queue.record(job, back, tmp_path / "records")
    assert target == tmp_path / "records" / "speed" / "2026-11-29_abc1234"
    rec = json.loads((target / "record.json").read_text())
    assert {k: rec[k] for k in ("job", "commit", "clean", "device", "jax", "device_seconds", "rehearsal")} == {
        "job": "speed",
        "commit": "abc1234",
        "clean": True,
        "device": "NVIDIA H200, 143771 MiB",
        "jax": "0.11.2",
        "device_seconds": 512.3,
        "rehearsal": False,
    }
    assert rec["files"] == ["job.json", "job.log", "paper_cell_bench.json"]
    assert (target / "paper_cell_bench.json").read_text() == (back / "paper_cell_bench.json").read_text()
    with pytest.raises(UsageError, match="recorded already"):
        gpu_queue.record(job, back, tmp_path / "records")
    with pytest.raises(UsageError, match="holds job 'speed'"):
        gpu_queue.record(BY_NAME["mechanisms_a"], back, tmp_path / "records")
    rehearsal = fake_device_output(tmp_path / "rehearsal", "speed", rehearsal=True)
    with pytest.raises(UsageError, match="is a rehearsal"):
        gpu_queue.record(job, rehearsal, gpu_queue.RECORDS)
    assert not list((tmp_path / "records" / "speed").glob(".*staging"))


@pytest.mark.parametrize(
    "argv, named",
    [
        (["run", "nope", "--out", "x"], "job='nope'"),
        (["run", "speed"], "--out"),
        (["list", "speed"], "job='speed'"),
        (["next", "--budget-s", "900"], "--budget-s=900"),
        (["record", "speed", "--from", "/no/such/folder"], "--from='/no/such/folder'"),
        (["run", "speed", "--out", "x", "--steps", "0"], "--steps=0"),
    ],
)
def test_bad_flags_are_refused_in_one_line_before_any_work(argv, named, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "scripts.device.gpu_queue", *argv, "--records-dir", str(tmp_path / "r")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and named in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def piece(name: str, standard: float, flipped: float, steps: int = 7000) -> dict:
    errors = {
        "standard": {"model": standard, "least_squares": 0.0},
        "query x2.1": {"model": 2 * standard, "least_squares": 0.0},
        "10 dims flipped": {"model": flipped, "least_squares": 0.0},
        "orthogonal query": {"model": 3 * standard, "least_squares": 0.0},
    }
    return {
        "name": name,
        "exit": 0,
        "steps": steps,
        "planned_steps": 7000,
        "errors": errors,
        "settings": {"batch_size": 256},
        "metrics": [{"step": steps, "eval_error_last": standard / 20}],
    }


def test_the_report_puts_each_number_beside_the_paper_by_the_rule(tmp_path):
    records = tmp_path / "records"
    a = [
        piece("softmax_causal", 0.030, 0.20),
        piece("favor", 0.080, 5.0),
        piece("rebased", 0.09, 7.0),
        piece("local_global", 5.3, 9.0, steps=6400),
    ]
    b = [piece("mqa", 0.041, 0.5), piece("rela", 0.15, 2.0), piece("linear", 1.0, 3.0)]
    gpu_queue.record(BY_NAME["mechanisms_a"], fake_device_output(tmp_path / "a", "mechanisms_a", pieces=a), records)
    gpu_queue.record(BY_NAME["mechanisms_b"], fake_device_output(tmp_path / "b", "mechanisms_b", pieces=b), records)
    pieces, _ = paper_scale.mechanism_pieces(records)
    rows = {r.claim: r for r in paper_scale.rows(pieces)}
    assert rows["limits_of_icl.softmax_error"].value == pytest.approx(0.030 / 20)
    assert rows["limits_of_icl.kernel_quadrant"].value == pytest.approx((5.0 / 0.08) / (0.20 / 0.030))
    assert rows["limits_of_icl.rebased_quadrant"].value == pytest.approx((7.0 / 0.09) / (0.20 / 0.030))
    assert rows["limits_of_icl.local_fails"].value == pytest.approx(5.3 / 0.030)
    assert rows["limits_of_icl.mechanism_order"].value == 0  # ranked as the paper ranks them
    assert rows["limits_of_icl.rela_error"].unlike  # our ReLA's gate is not the original's
    assert rows["limits_of_icl.softmax_error"].budget.sequences == 7000 * 256
    path = gpu_queue.write_report(records, tmp_path / "PAPER_SCALE.md")
    text = path.read_text()
    verdict = {
        line.split(" | ")[0]: line.rstrip(" |").rsplit(" | ", 1)[-1]
        for line in text.splitlines()
        if line.startswith("| limits_of_icl")
    }
    by_claim = {k.split(": ", 1)[1]: v for k, v in verdict.items()}
    assert by_claim[
        "kernelised attention breaks under the opposite-quadrant shift (FAVOR+ 0.083 → 4.99, softmax 0.035 → 0.20)"
    ].startswith("**agrees**")
    # 0.0015 lies outside [0.00164, 0.00188], at 1.79M of the paper's 6.4M sequences, under the claim's half
    assert any(v.startswith("**not comparable**: at 1/") for v in verdict.values())
    assert "| local_global | 6400 of 7000 (stopped at the deadline) | 5.300 | 5.330 |" in text
    assert "abc1234" in text and "NVIDIA H200" in text


def test_a_report_with_nothing_recorded_lists_the_queue(tmp_path):
    text = gpu_queue.write_report(tmp_path / "none", tmp_path / "P.md").read_text()
    assert text.count("| waiting |") == len(JOBS)
    assert "No claim of a paper is measured by this report." in text


def test_all_runs_every_job_not_recorded_in_order_then_reports(tmp_path, monkeypatch, capsys):
    """`make paper_scale_all` on a GPU of one's own: each job not yet recorded runs, is recorded, and
    the report is rebuilt; a job recorded already is skipped (the device part stubbed here)."""
    from scripts.device import gpu_job

    ran = []

    def fake_run_job(job, out, budget_s, commit, clean, rehearse, steps, runs_dir):
        ran.append(job.name)
        fake_device_output(out, job.name, commit="0000000")

    monkeypatch.setattr(gpu_job, "run_job", fake_run_job)
    records = tmp_path / "records"
    first = JOBS[0]
    gpu_queue.record(first, fake_device_output(tmp_path / "earlier", first.name), records)
    assert (
        gpu_queue.main(
            [
                "all",
                "--records-dir",
                str(records),
                "--runs-dir",
                str(tmp_path / "runs"),
                "--report",
                str(tmp_path / "P.md"),
            ]
        )
        == 0
    )
    assert ran == [job.name for job in JOBS[1:]]
    assert all(gpu_queue.records(job.name, records) for job in JOBS)
    assert f"{first.name}: recorded already" in capsys.readouterr().out
    assert "| waiting |" not in (tmp_path / "P.md").read_text()
