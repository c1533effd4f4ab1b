"""The one writer of run directories, for every system: settings -> the system's trainer -> the
loop (src/loop.py) with checkpoints -> the system's files and summary -> the analyses that apply.

    check_target(settings, out, overwrite=False, resume=False)   # before any work; one-line errors
    outcome = execute(settings, out, runner="runners.x", argv=[...])

A new run is written into `out` (an existing run of ours only with `overwrite`, and then into a
staging sibling swapped in on success, so a failed rerun keeps the old run). `resume` continues
a run from its checkpoint: only when its config.json holds the same settings and the checkpoint
is this run's (src/checkpoint.py); otherwise nothing is touched.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import jax
import numpy as np

from src import checkpoint, tracking
from src.batched import shown
from src.files import JsonlLogger, to_jsonable
from src.loop import LoopResult, Progress, train
from src.provenance import run_record
from src.registry import registry
from src.rundir import names
from src.rundir.run import RunDir
from src.rundir.staging import RunDirError, kept_replacement, remove_temporaries_below
from src.settings import Settings
from src.together import train_together
from src.systems import Arrays, SystemTrainer, build
from src.tracking import WandbSpec


class ResumeRefused(RunDirError):
    """--resume cannot continue this directory; the message is one line; nothing was changed."""


class Outcome(NamedTuple):
    run: RunDir
    result: LoopResult
    trainer: SystemTrainer


def write_file(run: RunDir, name: str, value: Any) -> None:
    """One output by the type of its value: Arrays -> .npz, dict/list -> JSON, array -> .npy,
    bytes as they are, str as text."""
    if isinstance(value, Arrays):
        run.write_npz(name, value)
    elif isinstance(value, (dict, list)):
        run.write_json(name, value)
    elif isinstance(value, np.ndarray):
        run.write_npy(name, value)
    elif isinstance(value, bytes):
        run.write_bytes(name, value)
    else:
        run.write_text(name, str(value))


def applicable_analyses(settings: Settings) -> list:
    """The registered analyses (registry "analysis") that apply to a run of `settings`."""
    return [entry for entry in registry("analysis") if entry.is_applicable(settings)]


def run_analyses(run: RunDir, settings: Settings) -> list[str]:
    """Every registered analysis that applies to this run, in registry order; returns names."""
    done = []
    for entry in applicable_analyses(settings):
        entry.build(None).run(run)
        done.append(entry.name)
    return done


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The dotted path of the first value that differs between two settings mappings."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
            if found:
                return found
        return None
    return None if a == b else f"{path} ({b!r} there, {a!r} here)"


def load_progress(settings: Settings, out: Path, trainer: SystemTrainer | None = None) -> Progress:
    """The checkpoint of run `out` for these settings, checked in full (ResumeRefused). What needs
    no model is checked first (a finished run, no checkpoint, other settings); the trainer (built
    here unless given) only shapes the checkpoint's arrays."""
    run = RunDir(out)
    if run.is_ours() and run.exists(names.SUMMARY):
        kept = kept_replacement(Path(out))
        hint = (
            f"; an interrupted replacement of it is kept in {kept}: continue that with --overwrite --resume"
            if (kept / names.CHECKPOINT).is_file()
            else " (retrain this one with --overwrite)"
        )
        raise ResumeRefused(
            f"--resume: {out} has finished (it has {names.SUMMARY}); nothing was changed; "
            f"accepted: a run that was stopped before its end{hint}"
        )
    if not (run.is_ours() and run.exists(names.CHECKPOINT)):
        raise ResumeRefused(
            f"--resume: {out} has no checkpoint of ours; accepted: the directory of "
            "a run started by this workbench (it writes checkpoint.npz as it trains)"
        )
    stored = run.load_config()["settings"]
    here = json.loads(json.dumps(settings.to_dict(), default=str))
    if stored.get("system") != here["system"] or first_difference(
        {k: v for k, v in here.items() if k != "schema_version"},
        {k: v for k, v in stored.items() if k != "schema_version"},
    ):
        diff = first_difference(here, stored) or "system"
        raise ResumeRefused(
            f"--resume: {out} was started with other settings (first difference: "
            f"{diff}); nothing was changed; accepted: the command that started it"
        )
    try:
        arrays = run.load_arrays(names.CHECKPOINT)
    except RunDirError as err:
        raise ResumeRefused(f"--resume: {err}") from None
    trainer = trainer if trainer is not None else build(settings)
    with trainer.context():
        like = jax.eval_shape(trainer.init_state)
        try:
            progress = checkpoint.from_arrays(arrays, like, settings.digest(), trainer.steps)
        except checkpoint.CheckpointError as err:
            raise ResumeRefused(
                f"--resume: {run.file(names.CHECKPOINT)} is unusable ({err}); nothing "
                "was changed; start the run afresh with --overwrite"
            ) from None
    rows = run.read_metrics() if run.exists(names.METRICS) else []
    progress.history = [r for r in rows if r.get(trainer.unit, 0) <= progress.step]
    return progress


def check_target(settings: Settings, out: Path, *, overwrite: bool = False, resume: bool = False) -> Progress | None:
    """Before any work: RunExists / ResumeRefused (one line) when `out` cannot take this run;
    the checkpoint to continue from when resuming (with `overwrite` too: of the interrupted
    replacement kept beside `out`, src/rundir/staging.kept_replacement)."""
    if resume and overwrite:
        kept = kept_replacement(Path(out))
        if not (RunDir(kept).is_ours() and RunDir(kept).exists(names.CHECKPOINT)):
            raise ResumeRefused(
                f"--overwrite --resume continues an interrupted replacement of {out}, and none is "
                f"kept ({kept} holds no checkpoint of ours); accepted: --overwrite (replace it "
                "afresh) or --resume (continue the run itself)"
            )
        return load_progress(settings, kept)
    if resume:
        return load_progress(settings, Path(out))
    RunDir.check_creatable(out, overwrite)
    return None


def execute(
    settings: Settings,
    out: Path,
    *,
    runner: str,
    argv: Sequence[str],
    overwrite: bool = False,
    start: Progress | None = None,
    progress: bool = True,
    analyses: Sequence[str] | None = None,
    wandb: WandbSpec | None = None,
) -> Outcome:
    """Train `settings` into run directory `out` (checked beforehand with `check_target`) and
    write every output; `start` continues from a checkpoint of `out` in place; `wandb` also logs
    the metrics rows to a wandb run in the run directory (src/tracking.py); `analyses`: the names
    of the registered analyses to run at the end (None: every one that applies; (): none)."""
    trainer = build(settings)
    if start is None:
        with RunDir.create(out, overwrite=overwrite) as run:  # a replacement swaps in on success
            run.write_json(names.CONFIG, run_record(settings.to_dict(), runner, argv, out))
            for name, value in trainer.outputs_before().items():
                write_file(run, name, value)
            result = _train_and_write(run, settings, trainer, None, progress, analyses, wandb)
    elif overwrite:  # an interrupted replacement, continued where it is kept
        run = RunDir(kept_replacement(Path(out)))
        run.target = Path(out)
        remove_temporaries_below(run.path)
        with run:  # swapped in when it finishes; kept as it is if stopped again
            result = _train_and_write(run, settings, trainer, start, progress, analyses, wandb)
    else:
        run = RunDir(out)
        remove_temporaries_below(run.path)  # what the killed process was writing
        result = _train_and_write(run, settings, trainer, start, progress, analyses, wandb)
    return Outcome(run, result, trainer)


def _train_and_write(
    run: RunDir,
    settings: Settings,
    trainer: SystemTrainer,
    start,
    progress: bool,
    analyses: Sequence[str] | None,
    wandb: WandbSpec | None = None,
) -> LoopResult:
    tracker = tracking.start(wandb, run.path, settings.to_dict(), (run.target or run.path).name, trainer.unit)
    try:
        return _train_and_write_logged(run, settings, trainer, start, progress, analyses, tracker)
    finally:
        if tracker is not None:
            tracker.finish()


def _train_and_write_logged(
    run: RunDir,
    settings: Settings,
    trainer: SystemTrainer,
    start,
    progress: bool,
    analyses: Sequence[str] | None,
    tracker,
) -> LoopResult:
    logger = JsonlLogger(run.file(names.METRICS), rows=start.history if start else ())

    def log(row: dict) -> None:
        logger.log(row)
        if tracker is not None:
            tracker.log(row)

    digest = settings.digest()

    def save(snapshot: Progress) -> None:
        write_checkpoint(run, trainer, snapshot, digest)

    result = train(trainer, start=start, on_log=log, on_checkpoint=save, progress=progress, label=trainer.label)
    if not result.history:  # the log exists even when nothing was logged
        logger.write()
    _write_outputs(run, settings, trainer, result, analyses, progress)
    return result


def write_checkpoint(
    run: RunDir, trainer: SystemTrainer, snapshot: Progress, digest: str, *, latest: bool = True
) -> None:
    """checkpoint.npz (when `latest`), and checkpoint_<step>.npz at multiples of keep_every."""
    arrays = checkpoint.to_arrays(snapshot, digest)
    if latest:
        run.write_npz(names.CHECKPOINT, arrays)
    if trainer.keep_every and snapshot.step % trainer.keep_every == 0:
        run.write_npz(names.kept_checkpoint(snapshot.step), arrays)


def _write_outputs(
    run: RunDir,
    settings: Settings,
    trainer: SystemTrainer,
    result: LoopResult,
    analyses: Sequence[str] | None,
    progress: bool = False,
) -> None:
    """Everything a run writes after training: params, the system's files, the summary, analyses
    (those named in `analyses`, every one that applies when it is None; with `progress`, a line on
    stderr as each starts and ends: some take minutes)."""
    run.write_npz(names.PARAMS, trainer.params_arrays(result))
    files = trainer.outputs(result)
    for name, value in files.items():
        write_file(run, name, value)
    entries = (
        []
        if result.diverged
        else [entry for entry in applicable_analyses(settings) if analyses is None or entry.name in analyses]
    )
    written = [
        names.CONFIG,
        names.METRICS,
        names.SUMMARY,
        names.PARAMS,
        *([names.CHECKPOINT] if run.exists(names.CHECKPOINT) else []),  # none when diverged at once
        *trainer.outputs_before(),
        *files,
    ]
    expected = written + [o for entry in entries for o in entry.build(None).outputs(settings)]
    summary = {
        "status": "diverged" if result.diverged else "complete",
        "message": result.diverged,
        "system": settings.system,
        **trainer.summary(result),
        "outputs": list(dict.fromkeys(expected)),
    }
    run.write_json(names.SUMMARY, summary)
    for i, entry in enumerate(entries, 1):
        if progress:
            hint = " (--skip_analysis leaves the analyses out)" if i == 1 else ""
            print(f"{trainer.label}: analysis {i}/{len(entries)} {entry.name} ...{hint}", file=sys.stderr, flush=True)
        began = time.perf_counter()
        with shown(f"{trainer.label}: {entry.name}") if progress else contextlib.nullcontext():
            entry.build(None).run(run)  # a bar for each computation of several blocks (src/batched.py)
        if progress:
            print(
                f"{trainer.label}: analysis {entry.name} done in {time.perf_counter() - began:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    jax.block_until_ready(result.state.params)


def execute_together(
    settings_list: Sequence[Settings],
    outs: Sequence[Path],
    *,
    runner: str,
    argv: Sequence[str],
    overwrite: bool = False,
    progress: bool = True,
    analyses: Sequence[str] | None = None,
) -> list[Outcome]:
    """Train runs that differ only in their seed as one program (src/together.py) and write each
    run directory as `execute` would: config, metrics, checkpoints, params, files, summary and
    analyses. The directories are written when the group finishes (a killed group leaves the
    targets as they were). When a seed diverges, every run is trained alone instead."""
    trainers = [build(s) for s in settings_list]
    trained = train_together(trainers, progress=progress, label=trainers[0].label)
    if trained is None:
        return [
            execute(s, out, runner=runner, argv=argv, overwrite=overwrite, progress=progress, analyses=analyses)
            for s, out in zip(settings_list, outs)
        ]
    outcomes = []
    for settings, out, trainer, result, kept in zip(settings_list, outs, trainers, *trained):
        with RunDir.create(out, overwrite=overwrite) as run:
            run.write_json(names.CONFIG, run_record(settings.to_dict(), runner, argv, out))
            for name, value in trainer.outputs_before().items():
                write_file(run, name, value)
            JsonlLogger(run.file(names.METRICS), rows=map(to_jsonable, result.history)).write()
            for step, snapshot in kept.items():
                write_checkpoint(run, trainer, snapshot, settings.digest(), latest=step == result.step)
            _write_outputs(run, settings, trainer, result, analyses, progress)
        outcomes.append(Outcome(run, result, trainer))
    return outcomes
