"""`python -m runners.run --config RUN/config.json --out DIR`: train the Settings a run recorded,
for any system (its config.json names the system), through the same pipeline: same settings
and seed, same metrics, bit for bit. `--config` also takes a bare settings mapping; `--set`
overrides any setting by its dotted path (ours, as config.json writes them); `--resume`
continues DIR from its checkpoint.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

from src.cli import OneLineParser, UsageError, fail, summary
from src.cli.command import adopt_xla_flags, train_command, validated
from src.overrides import apply_overrides
from src.settings import Settings, SettingsError
from src.systems import settings_from_record

PROG = "python -m runners.run"


def read_settings(path: str) -> Settings:
    """The validated settings of a config.json (or of a bare settings mapping; `-`: standard
    input, as the job engine sends them): UsageError naming the file and what is wrong with it,
    in one line."""
    try:
        if path == "-":
            raw = json.loads(sys.stdin.read())
        else:
            with open(path, encoding="utf-8") as handle:
                raw = json.load(handle)
    except OSError as err:
        raise UsageError(f"--config {path}: cannot be read ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise UsageError(f"--config {path}: is not a text file; accepted: a run's config.json") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"--config {path}: is not JSON ({err.msg} at line {err.lineno}); accepted: "
                         "a run's config.json") from None
    adopt_xla_flags(raw)                   # a run the job engine trained on one thread
    raw = raw.get("settings", raw) if isinstance(raw, dict) else raw
    if not isinstance(raw, dict):
        raise UsageError(f"--config {path}: holds no settings mapping (a JSON {type(raw).__name__}); "
                         "accepted: a run's config.json")
    try:
        return settings_from_record(raw)
    except SettingsError as err:
        raise UsageError(f"--config {path}: is not a settings mapping of this workbench ({err})") from None


def main(argv: Sequence[str] | None = None, description: str = "") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = OneLineParser(prog=PROG, description=description or summary(__doc__))
    parser.add_argument("--config", required=True, help="a run's config.json, or a JSON settings mapping")
    parser.add_argument("--out", required=True, help="run directory to create")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace --out if it is one of our run directories")
    parser.add_argument("--resume", action="store_true", help="continue --out from its checkpoint")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any setting by its dotted path (repeatable)")
    parser.add_argument("--save_attention", action="store_true",
                        help="the paper's system: save attention (the same as --set save_attention=true)")
    parser.add_argument("--skip_analysis", action="store_true", help="no analyses at the end")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        settings = read_settings(args.config)
        sets = list(args.overrides) + (["save_attention=true"] if args.save_attention else [])
        try:
            settings = apply_overrides(settings, sets)
        except ValueError as err:
            raise UsageError(str(err)) from None
        settings = validated(settings)
    except UsageError as err:
        return fail(PROG, err)
    return train_command(PROG, settings, Path(args.out), runner="runners.run", argv=argv,
                         overwrite=args.overwrite, resume=args.resume, quiet=args.quiet,
                         skip_analysis=args.skip_analysis)
