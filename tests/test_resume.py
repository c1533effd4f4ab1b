"""Every system resumes, and reruns from its config.json alone, bit for bit: a run is SIGKILLed
after a checkpoint, continued with --resume, and compared with an uninterrupted run made by
`runners.run --config RUN/config.json` (every metrics row, summary number, parameter and the
system's own outputs). A checkpoint of other settings, or a corrupted one, is refused in one
line and nothing in the run directory changes."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from golden_systems import read_run

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
LOG, CHECKPOINT = 20, 30  # a checkpoint at 30, between the log points 20 and 40 (and at 90, 150, ...)
# system -> (runner, argv without --out): small, with a checkpoint every 30 steps and a row every 20
RUNS = {
    "lsa": (
        "runners.run_concat_inputs_targets",
        [
            "--steps",
            "200",
            "--batch_size",
            "32",
            "--eval_size",
            "50",
            "--log_every",
            f"{LOG}",
            "--save_attention",
            "--set",
            f"train.checkpoint_every={CHECKPOINT}",
            "--quiet",
        ],
    ),
    "gpt2": (
        "runners.train",
        [
            "--config",
            "configs/quick.yaml",
            "--set",
            "quick=false",
            "--set",
            "model.n_embd=16",
            "--set",
            "model.n_layer=1",
            "--set",
            "training.batch_size=8",
            "--set",
            "training.train_steps=120",
            "--set",
            f"training.log_every={LOG}",
            "--set",
            f"training.save_every_steps={CHECKPOINT}",
            "--set",
            "training.eval_size=40",
            "--quiet",
        ],
    ),
    "lm": (
        "runners.recipe",
        [
            "task:mqar",
            "--task.vocab_size",
            "32",
            "--task.seq_len",
            "16",
            "--task.num_pairs",
            "2",
            "--model.width",
            "16",
            "--model.n_head",
            "2",
            "--train.batch_size",
            "8",
            "--train.train_steps",
            "120",
            "--train.log_every",
            f"{LOG}",
            "--train.checkpoint_every",
            f"{CHECKPOINT}",
            "--train.eval_size",
            "16",
            "--quiet",
        ],
    ),
    # a hybrid stack (Zoology's Based model: a BaseConv layer, then Based) of the same system
    "lm_hybrid": (
        "runners.recipe",
        [
            "task:mqar",
            "model.seq_mixer:based",
            "--model.seq_mixer.feature_dim",
            "4",
            "--model.seq_mixers",
            "base_conv,based",
            "--task.vocab_size",
            "32",
            "--task.seq_len",
            "16",
            "--task.num_pairs",
            "2",
            "--model.width",
            "16",
            "--model.n_head",
            "2",
            "--train.batch_size",
            "8",
            "--train.train_steps",
            "120",
            "--train.log_every",
            f"{LOG}",
            "--train.checkpoint_every",
            f"{CHECKPOINT}",
            "--train.eval_size",
            "16",
            "--quiet",
        ],
    ),
    "dynamics": (
        "runners.dynamics",
        [
            "--model",
            "attnS",
            "--head",
            "2",
            "--in_dim",
            "3",
            "--seq_len",
            "6",
            "--trainset_size",
            "100",
            "--testset",
            "20",
            "--epoch",
            "301",
            "--log_every",
            f"{LOG}",
            "--checkpoint_every",
            f"{CHECKPOINT}",
            "--show",
            "--quiet",
        ],
    ),
    "nonlinear": ("runners.run", ["--config", "NONLINEAR", "--quiet"]),
}
# what may differ between two runs of the same settings: wall-clock times
TIMES = ("elapsed_s", "train_seconds", "ms_per_epoch", "seconds")


def nonlinear_settings(folder: Path) -> str:
    """A small run of the von Oswald non-linear regression system, as a settings file."""
    from src.systems.nonlinear import NonlinearSettings, NonlinearTrain

    train = NonlinearTrain(steps=200, batch_size=16, eval_size=50, log_every=LOG, checkpoint_every=CHECKPOINT)
    settings = NonlinearSettings(train=train)
    settings = replace(settings, model=replace(settings.model, options=replace(settings.model.options, width=8)))
    path = folder / "nonlinear.json"
    path.write_text(json.dumps(settings.validate().to_dict()))
    return str(path)


def argv_of(system: str, folder: Path) -> tuple[str, list[str]]:
    runner, argv = RUNS[system]
    return runner, [nonlinear_settings(folder) if a == "NONLINEAR" else a for a in argv]


def call(runner: str, argv: list[str]) -> int:
    return importlib.import_module(runner).main(argv)


def tree_digest(path: Path) -> dict:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def without_times(path: Path) -> dict:
    """Every file of a run directory, its bytes, but JSON lines and documents with their wall-clock
    times removed."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in TIMES}
        return [strip(v) for v in value] if isinstance(value, list) else value

    out = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        data = file.read_bytes()
        if file.suffix in (".json", ".jsonl"):
            lines = data.decode().splitlines() if file.suffix == ".jsonl" else [data.decode()]
            data = json.dumps([strip(json.loads(line)) for line in lines if line.strip()], sort_keys=True).encode()
        out[str(file.relative_to(path))] = data
    return out


def killed_after_a_checkpoint(runner: str, argv: list[str], out: Path) -> int:
    """Run it in a process that SIGKILLs itself as soon as its first checkpoint is on disk
    (tests/kill_after_checkpoint.py); returns the step of the checkpoint it left."""
    import numpy as np

    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "kill_after_checkpoint.py"), runner, *argv, "--out", str(out)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (out / "metrics_summary.json").exists(), "the run finished before it was killed"
    with np.load(out / "checkpoint.npz") as data:
        return int(data["step"])


@pytest.mark.parametrize("system", list(RUNS))
def test_sigkill_between_log_points_then_resume_gives_the_same_run_directory(system, tmp_path, monkeypatch):
    """SIGKILL at a checkpoint between two log points, then --resume: every file of the run
    directory is the uninterrupted run's, byte for byte but for wall-clock times."""
    monkeypatch.chdir(ROOT)
    runner, argv = argv_of(system, tmp_path)
    out, reference = tmp_path / "run", tmp_path / "uninterrupted"
    assert call(runner, [*argv, "--out", str(out)]) == 0
    out.rename(reference)
    step = killed_after_a_checkpoint(runner, argv, out)
    assert step % LOG, f"the checkpoint it left is at a log point ({step}): the case is not tested"
    assert call(runner, [*argv, "--out", str(out), "--resume"]) == 0
    resumed, uninterrupted = without_times(out), without_times(reference)
    assert sorted(resumed) == sorted(uninterrupted)
    assert [name for name in resumed if resumed[name] != uninterrupted[name]] == []


@pytest.mark.parametrize("system", list(RUNS))
def test_a_rerun_from_config_json_alone_in_one_step_chunks_is_bit_identical(system, tmp_path, monkeypatch):
    """The rerun is cut into chunks of one step, as the loop does for a slow model (ChunkSizer):
    how a run is chunked changes none of its numbers."""
    from src import loop

    monkeypatch.chdir(ROOT)
    runner, argv = argv_of(system, tmp_path)
    first, again = tmp_path / "first", tmp_path / "again"
    assert call(runner, [*argv, "--out", str(first)]) == 0
    monkeypatch.setattr(loop, "FIRST_STEP_PARAMS", 0)  # one step first ...
    monkeypatch.setattr(loop, "CHUNK_SECONDS", 0.0)  # ... and every chunk after
    monkeypatch.setattr(loop, "LEAST_STEPS", 1)
    sizes, measured = [], loop.ChunkSizer.measured

    def record(sizer, num_steps, *seconds):
        sizes.append(num_steps)
        measured(sizer, num_steps, *seconds)

    monkeypatch.setattr(loop.ChunkSizer, "measured", record)
    assert call("runners.run", ["--config", str(first / "config.json"), "--out", str(again), "--quiet"]) == 0
    assert set(sizes) == {1}
    assert read_run(first) == read_run(again)
    assert json.loads((first / "config.json").read_text())["settings"]["system"] == system.split("_")[0]
    assert sorted(p.name for p in first.rglob("*")) == sorted(p.name for p in again.rglob("*"))


def test_a_checkpoint_of_other_settings_or_a_corrupted_one_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    runner, argv = RUNS["gpt2"]
    narrow, wide = tmp_path / "narrow", tmp_path / "wide"
    assert call(runner, [*argv, "--out", str(narrow)]) == 0
    assert call(runner, [*(a.replace("n_embd=16", "n_embd=32") for a in argv), "--out", str(wide)]) == 0
    capsys.readouterr()
    cases = [
        ([*argv, "--set", "training.learning_rate=0.01"], "other settings"),  # another config
        (argv, "other settings"),  # wide's checkpoint copied over narrow's
        (argv, "unusable"),  # a truncated checkpoint
    ]
    for name in ("narrow", "wide"):  # as if each had been stopped after its last checkpoint
        (tmp_path / name / "metrics_summary.json").unlink()
    before = tree_digest(narrow)
    for i, (command, words) in enumerate(cases):
        if i == 1:
            (narrow / "checkpoint.npz").write_bytes((wide / "checkpoint.npz").read_bytes())
        if i == 2:
            (narrow / "checkpoint.npz").write_bytes(before["checkpoint.npz"].encode()[:40])
        state = tree_digest(narrow)
        assert call(runner, [*command, "--out", str(narrow), "--resume"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err
        assert tree_digest(narrow) == state  # nothing changed


def test_resume_checks_that_need_no_model_come_before_the_model_is_built(tmp_path, monkeypatch):
    """--resume on a finished run, or on another run's settings, is refused without building a
    model (a finished paper-scale run was refused only after 18-20 s of building)."""
    import src.pipeline as pipeline
    from src.pipeline import ResumeRefused
    from src.systems.gpt2 import GPT2Settings

    settings = GPT2Settings().validate()
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"settings": settings.to_dict()}))
    (run / "checkpoint.npz").write_bytes(b"")
    from src.rundir import names

    (run / names.MARKER).write_text("")
    built = []
    monkeypatch.setattr(pipeline, "build", lambda s: built.append(s) or pytest.fail("built a model"))
    (run / "metrics_summary.json").write_text("{}")
    with pytest.raises(ResumeRefused, match="has finished"):
        pipeline.check_target(settings, run, resume=True)
    (run / "metrics_summary.json").unlink()
    other = replace(settings, train=replace(settings.train, learning_rate=0.5))
    with pytest.raises(ResumeRefused, match="other settings"):
        pipeline.check_target(other, run, resume=True)
    assert not built


def test_a_rerun_adopts_the_xla_flags_and_the_core_its_run_was_trained_with(tmp_path):
    """The job engine trains parallel runs on one XLA thread and one core each (XLA_FLAGS and the
    core in ICL_WORKBENCH_CPU), and XLA's CPU code rounds differently with its thread count (a
    GPT-2 run on 2 cores: other parameter bytes). The run records its XLA_FLAGS and its CPUs, and
    `runners.run --config` trains with them: one CPU again, same bytes."""
    from src.process import CPU_ENV
    from src.jobs.engine import SINGLE_THREAD_XLA
    from src.provenance import usable_cores

    argv = [
        "--config",
        "configs/quick.yaml",
        "--set",
        "model.n_layer=1",
        "--set",
        "training.eval_size=50",
        "--set",
        "training.train_steps=20",
        "--quiet",
    ]  # 20 steps: the bytes differ without adopting
    plain = {k: v for k, v in ENV.items() if k not in ("XLA_FLAGS", CPU_ENV)}
    pinned = {CPU_ENV: str(usable_cores()[-1])} if usable_cores() else {}
    first = subprocess.run(
        [sys.executable, "-m", "runners.train", *argv, "--out", str(tmp_path / "a")],
        cwd=ROOT,
        env={**plain, "XLA_FLAGS": SINGLE_THREAD_XLA, **pinned},
        capture_output=True,
        text=True,
    )
    assert first.returncode == 0, first.stderr
    record = json.loads((tmp_path / "a" / "config.json").read_text())
    assert record["xla_flags"] == SINGLE_THREAD_XLA and record["cpus"] == (1 if pinned else os.cpu_count())
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "runners.run",
            "--config",
            str(tmp_path / "a" / "config.json"),
            "--out",
            str(tmp_path / "b"),
            "--quiet",
            "--skip_analysis",
        ],
        cwd=ROOT,
        env=plain,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "b" / "config.json").read_text())["cpus"] == record["cpus"]
    assert (tmp_path / "a" / "params.npz").read_bytes() == (tmp_path / "b" / "params.npz").read_bytes()
