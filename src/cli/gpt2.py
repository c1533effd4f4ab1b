"""The command line of limits_of_icl ("Not All Attention Is Created Equal", on Garg et al. 2022):
`python -m runners.train --config FILE.yaml [--set key=value ...] [--resume] [--choices]`. The
YAML format itself (its keys, the length study's layout, `--set`) is src/formats/limits_of_icl.py;
every key and value is checked by the settings before any work, and a refusal names the YAML key
(one line, exit 2). The run directory (out_dir) holds the contract files plus the original's
training_log.csv and <attention_type>_loss.png; checkpoint.npz every save_every_steps (kept copies
at keep_every_steps), so `--resume` continues a killed run bit for bit.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from src.cli.command import train_from_args
from src.flags import OneLineParser, PrintChoices, UsageError, add_set_flag, fail, path_text, summary

# the format, named here too for the callers of the command line's module
from src.formats.limits_of_icl import (  # noqa: F401
    OURS_TO_YAML,
    YAML_TO_OURS,
    apply_sets,
    default_out,
    read_config,
    read_run_config,
    read_run_configs,
    settings_from_config,
    settings_mapping,
)

PROG = "python -m runners.train"


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument(
        "config_path",
        nargs="?",
        metavar="CONFIG",
        help="the YAML config (the length study's train.py takes it this way)",
    )
    parser.add_argument(
        "--config",
        help="the YAML config, e.g. configs/dummy.yaml or configs/lengthgen/tasks/linear_regression/alibi.yaml",
    )
    add_set_flag(
        parser,
        "sets",
        "override a config key by its dotted path (repeatable)",
    )
    parser.add_argument("--out", type=path_text(), default=None, help="run directory (overrides the config's out_dir)")
    parser.add_argument("--resume", action="store_true", help="continue out_dir from its checkpoint")
    parser.add_argument("--overwrite", action="store_true", help="replace out_dir if it is one of our runs")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--skip_analysis",
        action="store_true",
        help="do not run the analyses at the end (ICL curve, inductive bias, robustness; "
        "python -m analysis.<name> --run RUN runs one later)",
    )
    parser.add_argument("--choices", action=PrintChoices)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    evaluation = next((a for a in argv if a.split("=")[0] in ("--eval-only", "--eval_only")), None)
    if evaluation is not None:  # the length study's eval.sh passes it to its train.py
        return fail(
            PROG,
            f"{evaluation}: a trained run is evaluated by its analyses here, not by "
            "retraining; accepted: python -m analysis.length_gen --run RUN --factor 8 "
            "(eval.sh), analysis.recency (eval_attn.sh), analysis.prompt_tests "
            "(eval_atk.sh); docs/length_generalisation.md",
        )
    args = parser.parse_args(argv)
    if (args.config is None) == (args.config_path is None):
        parser.error("one config is needed: CONFIG or --config CONFIG")
    try:
        runs = read_run_configs(args.config or args.config_path, args.sets)
    except UsageError as err:
        return fail(PROG, err)
    for settings, out, spec in runs:
        if args.out:  # several lengths: --out DIR gives DIR_max_length<L>
            out = Path(args.out + (out.name[out.name.rindex("_max_length") :] if len(runs) > 1 else ""))
        code = train_from_args(PROG, settings, out, args, runner="runners.train", argv=argv, wandb=spec)
        if code:
            return code
    return 0
