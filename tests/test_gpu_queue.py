"""The GPU queue (scripts/gpu_queue.py) and report/PAPER_SCALE.md (plots/paper_scale.py): every job
fits one device command, `next` names the first job not run and its exact call, `record` files what
came back with provenance, the report's verdicts follow its numbers; in the study tier every job
rehearses end to end on the CPU, and a job killed at its limit has returned every finished piece."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plots import paper_scale
from scripts import gpu_job, gpu_queue
from src.flags import UsageError

ROOT = Path(__file__).resolve().parents[1]


def test_every_job_fits_one_device_command():
    assert gpu_job.JOB_LIMIT_S <= 9 * 60 and gpu_queue.DEVICE_TIMEOUT_S <= 600
    assert gpu_queue.DEVICE_TIMEOUT_S - gpu_job.JOB_LIMIT_S >= 30      # the wheels' install before the job
    for job in gpu_queue.JOBS:
        assert job.expected.total <= gpu_job.JOB_LIMIT_S, job.name
        assert job.kind in ("mechanisms", "speed", "study")
        assert (job.kind == "mechanisms") == bool(job.runs) and (job.kind == "study") == (job.study is not None)
        if job.study:                 # the study's own command, its files present; the job names the folders
            for args in (job.study.args, job.study.rehearsal):
                assert (ROOT / (args[0].replace(".", "/") + ".py")).is_file()
                assert not {"--runs-dir", "--report-dir"} & set(args)
            assert all((ROOT / a).is_file() for a in job.study.args if a.startswith("configs/"))
    assert len({job.name for job in gpu_queue.JOBS}) == len(gpu_queue.JOBS)


def test_the_recorded_plan_is_the_queues():
    """report/measurements/gpu_queue_plan.json (the docs quote its expected seconds) is what the
    queue computes now: `python -m scripts.gpu_queue list --json <it>` rewrites it."""
    shipped = json.loads((ROOT / "report/measurements/gpu_queue_plan.json").read_text())
    now = gpu_queue.plan("any")
    assert {k: v for k, v in shipped.items() if k not in ("commit", "produced")} == \
        {k: v for k, v in now.items() if k not in ("commit", "produced")}


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
    (folder / "job.json").write_text(json.dumps({
        "job": job, "commit": commit, "clean": True, "rehearsal": rehearsal, "device": "NVIDIA H200, 143771 MiB",
        "jax": "0.11.2", "began_utc": "2026-11-29 10:00:00", "wall_s": 512.3, "state": "done",
        "pieces": pieces or []}))
    (folder / "job.log").write_text("[0.0 s] began\n")
    return folder


def test_next_names_the_first_job_not_run_and_its_device_call(tmp_path, capsys):
    records = tmp_path / "records"
    assert gpu_queue.main(["next", "--records-dir", str(records)]) == 0
    first = gpu_queue.JOBS[0]
    out = capsys.readouterr().out
    assert out.startswith(f"next: {first.name}: ")
    assert f"python3 -m scripts.gpu_queue run {first.name} --out $OUT --commit " in out
    assert "timeout_s: 600" in out and json.dumps(list(first.carry)) in out
    gpu_queue.record(first, fake_device_output(tmp_path / "back", first.name), records)
    gpu_queue.main(["next", "--records-dir", str(records)])
    assert capsys.readouterr().out.startswith(f"next: {gpu_queue.JOBS[1].name}: ")
    for i, job in enumerate(gpu_queue.JOBS[1:]):
        gpu_queue.record(job, fake_device_output(tmp_path / f"back{i}", job.name), records)
    gpu_queue.main(["next", "--records-dir", str(records)])
    assert "none waits" in capsys.readouterr().out


def test_record_files_what_came_back_with_its_provenance(tmp_path):
    job = gpu_queue.BY_NAME["speed"]
    back = fake_device_output(tmp_path / "back", "speed")
    (back / "paper_cell_bench.json").write_text(json.dumps({"variants": {"float32": {"ms_per_run_step": 12.09}}}))
    target = gpu_queue.record(job, back, tmp_path / "records")
    assert target == tmp_path / "records" / "speed" / "2026-11-29_abc1234"
    rec = json.loads((target / "record.json").read_text())
    assert {k: rec[k] for k in ("job", "commit", "clean", "device", "jax", "device_seconds", "rehearsal")} == {
        "job": "speed", "commit": "abc1234", "clean": True, "device": "NVIDIA H200, 143771 MiB", "jax": "0.11.2",
        "device_seconds": 512.3, "rehearsal": False}
    assert rec["files"] == ["job.json", "job.log", "paper_cell_bench.json"]
    assert (target / "paper_cell_bench.json").read_text() == (back / "paper_cell_bench.json").read_text()
    with pytest.raises(UsageError, match="recorded already"):
        gpu_queue.record(job, back, tmp_path / "records")
    with pytest.raises(UsageError, match="holds job 'speed'"):
        gpu_queue.record(gpu_queue.BY_NAME["mechanisms_a"], back, tmp_path / "records")
    rehearsal = fake_device_output(tmp_path / "rehearsal", "speed", rehearsal=True)
    with pytest.raises(UsageError, match="is a rehearsal"):
        gpu_queue.record(job, rehearsal, gpu_queue.RECORDS)
    assert not list((tmp_path / "records" / "speed").glob(".*staging"))


@pytest.mark.parametrize("argv, named", [
    (["run", "nope", "--out", "x"], "job='nope'"), (["run", "speed"], "--out"),
    (["list", "speed"], "job='speed'"), (["next", "--budget-s", "900"], "--budget-s=900"),
    (["record", "speed", "--from", "/no/such/folder"], "--from='/no/such/folder'"),
    (["run", "speed", "--out", "x", "--steps", "0"], "--steps=0")])
def test_bad_flags_are_refused_in_one_line_before_any_work(argv, named, tmp_path):
    done = subprocess.run([sys.executable, "-m", "scripts.gpu_queue", *argv, "--records-dir", str(tmp_path / "r")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and named in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def piece(name: str, standard: float, flipped: float, steps: int = 7000) -> dict:
    errors = {"standard": {"model": standard, "least_squares": 0.0},
              "query x2.1": {"model": 2 * standard, "least_squares": 0.0},
              "10 dims flipped": {"model": flipped, "least_squares": 0.0},
              "orthogonal query": {"model": 3 * standard, "least_squares": 0.0}}
    return {"name": name, "exit": 0, "steps": steps, "planned_steps": 7000, "errors": errors,
            "settings": {"batch_size": 256}, "metrics": [{"step": steps, "eval_error_last": standard / 20}]}


def test_the_report_puts_each_number_beside_the_paper_by_the_rule(tmp_path):
    records = tmp_path / "records"
    a = [piece("softmax_causal", 0.030, 0.20), piece("favor", 0.080, 5.0), piece("rebased", 0.09, 7.0),
         piece("local_global", 5.3, 9.0, steps=6400)]
    b = [piece("mqa", 0.041, 0.5), piece("rela", 0.15, 2.0), piece("linear", 1.0, 3.0)]
    gpu_queue.record(gpu_queue.BY_NAME["mechanisms_a"], fake_device_output(tmp_path / "a", "mechanisms_a", pieces=a), records)
    gpu_queue.record(gpu_queue.BY_NAME["mechanisms_b"], fake_device_output(tmp_path / "b", "mechanisms_b", pieces=b), records)
    pieces, _ = paper_scale.mechanism_pieces(records)
    rows = {r.claim: r for r in paper_scale.rows(pieces)}
    assert rows["limits_of_icl.softmax_error"].value == pytest.approx(0.030 / 20)
    assert rows["limits_of_icl.kernel_quadrant"].value == pytest.approx((5.0 / 0.08) / (0.20 / 0.030))
    assert rows["limits_of_icl.rebased_quadrant"].value == pytest.approx((7.0 / 0.09) / (0.20 / 0.030))
    assert rows["limits_of_icl.local_fails"].value == pytest.approx(5.3 / 0.030)
    assert rows["limits_of_icl.mechanism_order"].value == 0      # ranked as the paper ranks them
    assert rows["limits_of_icl.rela_error"].unlike                 # our ReLA's gate is not the original's
    assert rows["limits_of_icl.softmax_error"].budget.sequences == 7000 * 256
    path = gpu_queue.write_report(records, tmp_path / "PAPER_SCALE.md")
    text = path.read_text()
    verdict = {line.split(" | ")[0]: line.rstrip(" |").rsplit(" | ", 1)[-1] for line in text.splitlines() if line.startswith("| limits_of_icl")}
    by_claim = {k.split(": ", 1)[1]: v for k, v in verdict.items()}
    assert by_claim["kernelised attention breaks under the opposite-quadrant shift (FAVOR+ 0.083 → 4.99, softmax 0.035 → 0.20)"].startswith("**agrees**")
    # 0.0015 lies outside [0.00164, 0.00188], at 1.79M of the paper's 6.4M sequences, under the claim's half
    assert any(v.startswith("**not comparable**: at 1/") for v in verdict.values())
    assert "| local_global | 6400 of 7000 (stopped at the deadline) | 5.300 | 5.330 |" in text
    assert "abc1234" in text and "NVIDIA H200" in text


def test_a_report_with_nothing_recorded_lists_the_queue(tmp_path):
    text = gpu_queue.write_report(tmp_path / "none", tmp_path / "P.md").read_text()
    assert text.count("| waiting |") == len(gpu_queue.JOBS)
    assert "No claim of a paper is measured by this report." in text


# --- the study tier: rehearsals on the CPU ---------------------------------------------------------

def rehearse(job: str, tmp_path: Path, *extra: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scripts.gpu_queue", "run", job, "--rehearse", "--out",
                           str(tmp_path / "out"), "--runs-dir", str(tmp_path / "runs"), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.study
@pytest.mark.parametrize("job", [job.name for job in gpu_queue.JOBS])
def test_every_job_rehearses_end_to_end(job, tmp_path):
    done = rehearse(job, tmp_path, "--steps", "30", "--budget-s", "400")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "out"
    manifest = json.loads((out / "job.json").read_text())
    assert manifest["state"] == "done" and manifest["rehearsal"] is True
    assert len(list(out.iterdir())) <= 8                      # what a device command can bring back
    spec = gpu_queue.BY_NAME[job]
    if spec.kind == "mechanisms":
        assert sorted(p["name"] for p in manifest["pieces"]) == sorted(r.name for r in spec.runs)
        for p in manifest["pieces"]:
            assert p["exit"] == 0 and p["steps"] == 30
            assert set(p["errors"]) == {"standard", *paper_scale.SHIFTS}
    elif spec.kind == "study":
        assert manifest["pieces"] and all(p["finished"] and p["summary"] for p in manifest["pieces"])
        assert manifest["exit"] == 0 and manifest["report_files"]
        assert all((out / name).is_file() for name in manifest["report_files"])
    else:
        assert "paper_cell_bench.json" in manifest["pieces"]
    target = gpu_queue.record(spec, out, tmp_path / "records")
    text = gpu_queue.write_report(tmp_path / "records", tmp_path / "P.md").read_text()
    assert target.name.split("_")[-1] in text


@pytest.mark.study
def test_a_job_killed_at_its_limit_has_returned_every_finished_piece(tmp_path):
    """Runs that cannot end in time are stopped at the training deadline and evaluated from their
    last checkpoint; the command is then killed (as the device tool kills one at its limit) while
    the other evaluations run: job.json holds every piece finished before."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "scripts.gpu_queue", "run", "mechanisms_a", "--rehearse",
                             "--out", str(out), "--runs-dir", str(tmp_path / "runs"), "--steps", "20000",
                             "--budget-s", "150"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    began, pieces = time.time(), []
    try:
        while time.time() - began < 400 and proc.poll() is None:
            time.sleep(0.5)
            try:
                pieces = json.loads((out / "job.json").read_text())["pieces"]
            except (OSError, ValueError, KeyError):
                continue
            if pieces:
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert pieces, "no piece within 400 s"
    manifest = json.loads((out / "job.json").read_text())       # whole, as the last save left it
    # The four evaluations start together; on a machine with four cores or more they end within one
    # poll of the job, so the kill can come after the job's end: then every piece is in.
    assert manifest["state"] == "running" or (manifest["state"] == "done" and len(manifest["pieces"]) == 4)
    logged = re.findall(r"piece (\S+): exit", (out / "job.log").read_text())
    assert logged and set(logged) <= {p["name"] for p in manifest["pieces"]}   # saved before logged
    for piece in manifest["pieces"]:
        assert piece["stopped_at_deadline"], piece                # training stopped at the training deadline
        if "evaluate_error" in piece:        # an evaluation the job's own deadline cut (a loaded CPU): said so
            assert "stopped at the deadline" in piece["evaluate_error"], piece
            continue
        if "errors" not in piece:            # stopped before its first checkpoint (a loaded CPU): nothing to evaluate
            assert piece["exit"] != 0 and "log_tail" in piece, piece
            continue
        assert piece["planned_steps"] == 20000 and 0 < piece["steps"] < 20000
        assert set(piece["errors"]) == {"standard", *paper_scale.SHIFTS}
        # the training's own evaluations too, once it reached its first log point (every 2,000 steps)
        assert piece.get("metrics") or piece["steps"] < 20000 // 10, piece


def test_all_runs_every_job_not_recorded_in_order_then_reports(tmp_path, monkeypatch, capsys):
    """`make paper_scale_all` on a GPU of one's own: each job not yet recorded runs, is recorded, and
    the report is rebuilt; a job recorded already is skipped (the device part stubbed here)."""
    from scripts import gpu_job
    ran = []

    def fake_run_job(job, out, budget_s, commit, clean, rehearse, steps, runs_dir):
        ran.append(job.name)
        fake_device_output(out, job.name, commit="0000000")
    monkeypatch.setattr(gpu_job, "run_job", fake_run_job)
    records = tmp_path / "records"
    first = gpu_queue.JOBS[0]
    gpu_queue.record(first, fake_device_output(tmp_path / "earlier", first.name), records)
    assert gpu_queue.main(["all", "--records-dir", str(records), "--runs-dir", str(tmp_path / "runs"),
                           "--report", str(tmp_path / "P.md")]) == 0
    assert ran == [job.name for job in gpu_queue.JOBS[1:]]
    assert all(gpu_queue.records(job.name, records) for job in gpu_queue.JOBS)
    assert f"{first.name}: recorded already" in capsys.readouterr().out
    assert "| waiting |" not in (tmp_path / "P.md").read_text()


FAKE_STUDY = '''
import argparse, json, signal, sys, time
from pathlib import Path
parser = argparse.ArgumentParser()
parser.add_argument("--runs-dir")
parser.add_argument("--report-dir")
args = parser.parse_args()
for name, finished in (("a", True), ("b", False)):
    run = Path(args.runs_dir) / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"settings": {"train": {"learning_rate": 0.01, "other": 1}}}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 10, "eval_loss": 1.5}) + "\\n")
    if finished:
        (run / "metrics_summary.json").write_text(json.dumps({"eval_loss": 1.5, "curve": [1, 2]}))
signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
time.sleep(120)
'''


def test_a_study_job_stopped_at_its_deadline_returns_its_finished_and_its_stopped_runs(tmp_path, monkeypatch):
    """A study still training at the job's deadline is stopped with Ctrl-C; the run it finished is a
    piece with its summary's numbers, the run it was training one stopped at the deadline with its
    last evaluation; no report came, and job.json says so."""
    from scripts import gpu_study
    (tmp_path / "fake_study.py").write_text(FAKE_STUDY)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    job = gpu_job.Job("fake", "a fake study", "study",
                      study=gpu_job.Study(("fake_study",), ("fake_study",), 2, 10, gpu_job.Shape(8, 1, 4, 2), 30.0))
    out, saved, began = tmp_path / "out", {}, time.time()
    out.mkdir()
    gpu_study.run_study(job, out, began, began + 4, False, tmp_path / "runs", lambda text: None, saved.update)
    assert time.time() - began < 4 + gpu_study.STOP_GRACE_S
    pieces = {p["name"]: p for p in saved["pieces"]}
    assert pieces["a"]["finished"] and pieces["a"]["summary"] == {"eval_loss": 1.5}
    assert pieces["a"]["settings"] == {"learning_rate": 0.01}
    assert pieces["b"]["stopped_at_deadline"] and pieces["b"]["steps"] == 10 and "summary" not in pieces["b"]
    assert saved["stopped_at_deadline"] and saved["exit"] == 130 and saved["report_files"] == []
    assert (out / "study.log").exists()


@pytest.mark.parametrize("job", [job.name for job in gpu_queue.JOBS if job.kind == "study"])
def test_a_study_jobs_command_checks_out_and_makes_the_runs_it_plans(job, tmp_path):
    """The device command's flags and config files pass the study's own checks (a dry run), and it
    makes as many runs as the job's plan counts."""
    spec = gpu_queue.BY_NAME[job]
    done = subprocess.run([sys.executable, "-m", *spec.study.args, "--runs-dir", str(tmp_path / "runs"),
                           "--report-dir", str(tmp_path / "report")], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "WORKBENCH_DRY_RUN": "1"}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"would make {spec.study.runs} runs" in done.stdout, done.stdout
