"""What every training command line does once its dialect has made Settings: check the target
directory (and the checkpoint when resuming) before any work, run the pipeline, print one line.

    return train_command(PROG, settings, out, runner="runners.x", argv=argv, overwrite=...,
                         resume=..., quiet=...)

Exit codes: 0 done, 1 training diverged (the parameters of the last good step are kept),
2 a one-line refusal before any work, 130 interrupted (what was kept is said in one line).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping, Sequence

from src.flags import UsageError, dry_run, dry_run_requested, fail
from src.files import read_json
from src.pipeline import check_target, execute
from src.provenance import usable_cores
from src.rundir import names
from src.rundir.lock import RunDirLock
from src.rundir.staging import RunDirError, interrupted_note, remove_temporaries_below, will_replace
from src.settings import Settings, SettingsError


def adopt_threads(record) -> None:
    """Train with the XLA_FLAGS and the number of CPUs a run's config.json recorded, unless
    XLA_FLAGS is set here, or this process has fewer CPUs. The job engine trains parallel runs on
    one thread and one core each, and XLA's CPU code rounds differently with its thread count, so
    a rerun or resume of such a run must do the same to give the same numbers. Takes effect only
    before this process's first JAX computation."""
    if not isinstance(record, dict):
        return
    flags = record.get("xla_flags")
    if isinstance(flags, str) and flags and "XLA_FLAGS" not in os.environ:
        os.environ["XLA_FLAGS"] = flags
    cpus, mine = record.get("cpus"), usable_cores()
    if type(cpus) is int and 1 <= cpus < len(mine):
        os.sched_setaffinity(0, set(mine[:cpus]))


def validated(settings: Settings, translate: Mapping[str, str] | None = None) -> Settings:
    """`settings.validate()`, its error as a UsageError in the dialect's words."""
    try:
        return settings.validate()
    except SettingsError as err:
        raise UsageError(err.translate(translate or {})) from None


def train_command(
    prog: str,
    settings: Settings,
    out: Path,
    *,
    runner: str,
    argv: Sequence[str],
    overwrite: bool = False,
    resume: bool = False,
    quiet: bool = False,
    analyses: Sequence[str] | None = None,
    wandb=None,
) -> int:
    if resume:
        try:
            adopt_threads(read_json(Path(out) / names.CONFIG))
        except (OSError, ValueError):
            pass  # check_target names what is wrong with the run directory
    try:
        with RunDirLock(Path(out), f"{prog} {' '.join(argv)}", check_only=dry_run_requested()):
            return _locked_train(
                prog,
                settings,
                Path(out),
                runner=runner,
                argv=argv,
                overwrite=overwrite,
                resume=resume,
                quiet=quiet,
                analyses=analyses,
                wandb=wandb,
            )
    except RunDirError as err:
        return fail(prog, err)


_SKIP_FLAG = object()


def train_from_args(
    prog: str,
    settings: Settings,
    out: Path,
    args,
    *,
    runner: str,
    argv: Sequence[str],
    analyses=_SKIP_FLAG,
    wandb=None,
) -> int:
    """train_command with the parsed command line's --overwrite, --resume and --quiet, and its
    analyses: `analyses` where given, else none under --skip_analysis and the default set."""
    if analyses is _SKIP_FLAG:
        analyses = () if args.skip_analysis else None
    return train_command(
        prog,
        settings,
        out,
        runner=runner,
        argv=argv,
        overwrite=args.overwrite,
        resume=args.resume,
        quiet=args.quiet,
        analyses=analyses,
        wandb=wandb,
    )


def _locked_train(
    prog: str,
    settings: Settings,
    out: Path,
    *,
    runner: str,
    argv: Sequence[str],
    overwrite: bool,
    resume: bool,
    quiet: bool,
    analyses: Sequence[str] | None,
    wandb,
) -> int:
    """train_command's work, with the run directory's lock held."""
    start = check_target(settings, out, overwrite=overwrite, resume=resume)
    if dry_run(prog, f"train {settings.describe()} into {out}"):
        return 0
    replacing = will_replace(out) and (overwrite or not resume)  # the previous run stays until the new one ends
    try:
        outcome = execute(
            settings,
            out,
            runner=runner,
            argv=argv,
            overwrite=overwrite,
            start=start,
            progress=not quiet,
            analyses=analyses,
            wandb=wandb,
        )
    except KeyboardInterrupt:
        remove_temporaries_below(out, own=True)  # a write the interrupt cut short
        print("\n" + interrupted_note(out, replacing), file=sys.stderr)
        return 130
    if outcome.result.diverged:
        print(
            f"{prog}: training stopped: {outcome.result.diverged}; parameters saved to "
            f"{outcome.run.file(names.PARAMS)}",
            file=sys.stderr,
        )
        return 1
    print(f"{outcome.trainer.report(outcome.result, outcome.run)} -> {outcome.run.path}")
    return 0
