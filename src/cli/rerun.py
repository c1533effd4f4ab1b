"""`python -m runners.run --config RUN/config.json --out DIR`: train the Settings a run recorded,
for any system (its config.json names the system), through the same pipeline: same settings
and seed, same metrics, bit for bit. `--config` also takes a bare settings mapping; `--set`
overrides any setting by its dotted path (ours, as config.json writes them); `--resume`
continues DIR from its checkpoint. `--together FILE` trains runs that differ only in their seed
as one program (src/together.py), each into its own directory: what a study's
`--seeds-together` runs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Sequence

from src.flags import (
    add_set_flag,
    OneLineParser,
    UsageError,
    dry_run,
    dry_run_requested,
    fail,
    path_text,
    read_user_file,
    refuse_repeats,
    summary,
)
from src.files import loads_json
from src.cli.command import adopt_threads, train_from_args, validated
from src.overrides import apply_overrides
from src.pipeline import check_target
from src.rundir import RunDirError
from src.rundir.lock import RunDirLocks
from src.settings import Settings, SettingsError
from src.systems import settings_from_file, settings_from_record

PROG = "python -m runners.run"


GROUP_FORMAT = '{"runs": [{"settings": ..., "out": DIR}, ...]}'


def read_json(flag: str, path: str, accepted: str):
    """The JSON document of a file (`-`: standard input, as the job engine sends it): UsageError
    naming the flag, the file and what is wrong with it, in one line."""
    text = sys.stdin.read() if path == "-" else read_user_file(path, flag, accepted)
    try:
        return loads_json(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{flag} {path}: is not JSON ({err.msg} at line {err.lineno}); accepted: {accepted}") from None
    except ValueError as err:  # nested too deeply (src.files.loads_json)
        raise UsageError(f"{flag} {path}: is not accepted ({err}); accepted: {accepted}") from None


def read_settings(path: str) -> Settings:
    """The validated settings of a config.json (or of a bare settings mapping; `-`: standard
    input, as the job engine sends them): UsageError naming the file and what is wrong with it,
    in one line."""
    raw = read_json("--config", path, "a run's config.json")
    adopt_threads(raw)  # a run the job engine trained on one core
    raw = raw.get("settings", raw) if isinstance(raw, dict) else raw
    return settings_from_file(raw, f"--config {path}")


def read_group(path: str) -> tuple[list[Settings], list[Path]]:
    """The runs of a `--together` file: {"runs": [{"settings": ..., "out": DIR}, ...]} whose
    settings differ only in train.seed (UsageError, one line)."""
    from src.together import together_refusal

    raw = read_json("--together", path, GROUP_FORMAT)
    runs = raw.get("runs") if isinstance(raw, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("out"), str) for r in runs):
        raise UsageError(f"--together {path}: holds no list of runs; accepted: {GROUP_FORMAT}")
    try:
        settings = [validated(settings_from_record(r.get("settings"))) for r in runs]
    except SettingsError as err:
        raise UsageError(f"--together {path}: {err}") from None
    why = together_refusal(settings)
    if why:
        raise UsageError(
            f"--together {path}: these runs cannot train together: {why}; accepted: "
            "runs whose settings differ only in train.seed, of a system that offers it"
        )
    outs = [Path(r["out"]) for r in runs]
    seen: dict[Path, int] = {}
    for i, out in enumerate(outs):
        key = Path(os.path.abspath(out))
        if key in seen:
            raise UsageError(
                f"--together {path}: runs {seen[key]} and {i} both write into {out}; accepted: "
                "a run directory of its own for every run"
            )
        seen[key] = i
    return settings, outs


def analyses_of(text: str | None, settings: Settings, skip: bool = False) -> tuple[str, ...] | None:
    """--analyses: the registered analyses that apply to a run of `settings`, a comma list (None
    when not given: every one that applies; () with --skip_analysis); UsageError (one line) naming
    those that apply."""
    from src.pipeline import applicable_analyses

    if skip:
        return ()
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    refuse_repeats("--analyses", text, names)
    applicable = [entry.name for entry in applicable_analyses(settings)]
    if not names or any(n not in applicable for n in names):
        raise UsageError(
            f"--analyses={text!r} is not accepted; accepted: a comma list of the analyses that "
            f"apply to this run: {', '.join(applicable) or '(none)'}"
        )
    return names


def together_command(
    path: str, *, argv: Sequence[str], overwrite: bool, quiet: bool, skip_analysis: bool, analyses: str | None = None
) -> int:
    from src.pipeline import execute_together

    try:
        settings, outs = read_group(path)
        chosen = analyses_of(analyses, settings[0], skip_analysis)
    except UsageError as err:
        return fail(PROG, err)
    try:
        with RunDirLocks(outs, f"{PROG} {' '.join(argv)}", check_only=dry_run_requested()):
            for s, out in zip(settings, outs):
                check_target(s, out, overwrite=overwrite)
            if dry_run(PROG, f"train {len(settings)} seeds of {settings[0].describe()} together"):
                return 0
            outcomes = execute_together(
                settings,
                outs,
                runner="runners.run",
                argv=argv,
                overwrite=overwrite,
                progress=not quiet,
                analyses=chosen,
            )
    except RunDirError as err:
        return fail(PROG, err)
    for outcome in outcomes:
        print(f"{outcome.trainer.report(outcome.result, outcome.run)} -> {outcome.run.path}")
    return 1 if any(o.result.diverged for o in outcomes) else 0


def flags(description: str = "") -> OneLineParser:
    parser = OneLineParser(prog=PROG, description=description or summary(__doc__))
    parser.add_argument("--config", help="a run's config.json, or a JSON settings mapping (required unless --together)")
    parser.add_argument("--out", type=path_text(), help="run directory to create (required unless --together)")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it is one of our run directories")
    parser.add_argument("--resume", action="store_true", help="continue --out from its checkpoint")
    add_set_flag(
        parser,
        "overrides",
        "override any setting by its dotted path (repeatable)",
    )
    parser.add_argument(
        "--save_attention",
        action="store_true",
        help="the paper's system: save attention (the same as --set save_attention=true)",
    )
    parser.add_argument("--skip_analysis", action="store_true", help="no analyses at the end")
    parser.add_argument(
        "--analyses",
        metavar="NAMES",
        default=None,
        help="comma list of the analyses to run at the end (default: every one that applies)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--together",
        metavar="FILE",
        help="instead of --config/--out: train runs that differ only in train.seed as "
        f"one program, JSON {GROUP_FORMAT} (-: standard input; the job engine's "
        "--seeds-together)",
    )
    return parser


def main(argv: Sequence[str] | None = None, description: str = "") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = flags(description)
    args = parser.parse_args(argv)
    if args.analyses is not None and args.skip_analysis:
        parser.error("--analyses and --skip_analysis: give one of them")
    if args.together is not None:
        mixed = [
            flag
            for flag, value in (
                ("--config", args.config),
                ("--out", args.out),
                ("--resume", args.resume),
                ("--set", args.overrides),
                ("--save_attention", args.save_attention),
            )
            if value
        ]
        if mixed:
            parser.error(
                f"--together takes the runs' settings and directories from its file; "
                f"{', '.join(mixed)} not accepted with it"
            )
        return together_command(
            args.together,
            argv=argv,
            overwrite=args.overwrite,
            quiet=args.quiet,
            skip_analysis=args.skip_analysis,
            analyses=args.analyses,
        )
    missing = [flag for flag, value in (("--config", args.config), ("--out", args.out)) if value is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    try:
        settings = read_settings(args.config)
        sets = list(args.overrides) + (["save_attention=true"] if args.save_attention else [])
        try:
            settings = apply_overrides(settings, sets)
        except ValueError as err:
            raise UsageError(str(err)) from None
        settings = validated(settings)
        analyses = analyses_of(args.analyses, settings, args.skip_analysis)
    except UsageError as err:
        return fail(PROG, err)
    return train_from_args(PROG, settings, Path(args.out), args, runner="runners.run", argv=argv, analyses=analyses)
