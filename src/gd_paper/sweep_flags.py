"""The sweep drivers' flags (`eval_order`, `eval_noise`; src/gd_paper/sweep.py runs them): what
differs between the two drivers (DriverDefaults) and the parser, group by group."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from src.flags import OneLineParser, add_both_spellings, int_at_least, path_text, positive_number
from src.gd_paper.config import NOISE_MODES, ORDERINGS, PLACEMENTS
from src.gd_paper.presets import MODEL_PRESETS
from src.gd_paper.sweep_grid import AUTO
from src.jobs.study import add_executor_flags

PHASE_FIELDS = ("ordering", "noise_mode", "noise_p", "noise_sigma", "noise_placement")


@dataclass(frozen=True)
class DriverDefaults:
    """What differs between eval_order and eval_noise: defaults and text, not logic."""

    prog: str
    description: str
    out: str
    runs_dir: str
    figures: str  # figure folder name under report/figures/ (for the hint)
    epilog: str = ""
    ordering: str = "random"
    noise_mode: str = "clean"
    p: str | None = None
    sigma: str | None = None
    placement: str = "mixed"

    @staticmethod
    def of(module: str, doc: str, figures: str, **grid) -> "DriverDefaults":
        """The defaults of driver `module` (its docstring: description, then epilog)."""
        lines = doc.splitlines()
        return DriverDefaults(
            prog=f"python -m {module}",
            description=lines[0],
            out=f"results_{figures}.csv",
            runs_dir=f"runs/{module}",
            figures=figures,
            epilog="\n".join(lines[1:]),
            **grid,
        )


def build_parser(d: DriverDefaults) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=d.prog, description=d.description, epilog=d.epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _grid_flags(parser, d)
    o = parser.add_argument_group("train/eval overrides (comma lists; auto = the shared value)")
    for phase in ("train", "eval"):
        for f in PHASE_FIELDS:
            o.add_argument(
                f"--{phase}_{f}", default=AUTO, metavar="LIST", help=f"{phase} {f.replace('_', ' ')} (default: auto)"
            )
    s = _training_and_sweep_flags(parser, d)
    add_executor_flags(parser)
    s.add_argument(
        "--dry_run", action="store_true", help="print the plan (one line per run: status and command) and exit"
    )
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _grid_flags(parser, d: DriverDefaults) -> None:
    """The grid's axes: models, orderings, noise modes, fractions, sigmas, placements and seeds."""
    g = parser.add_argument_group("grid (comma-separated lists; the grid is their product)")
    g.add_argument(
        "--models", default="lsa1,twolayer", help=f"models, from: {', '.join(MODEL_PRESETS)} (default: lsa1,twolayer)"
    )
    g.add_argument(
        "--ordering",
        default=d.ordering,
        help=f"context orderings, from: {', '.join(ORDERINGS)} (default: {d.ordering})",
    )
    g.add_argument(
        "--noise_mode",
        default=d.noise_mode,
        help=f"noise modes, from: {', '.join(NOISE_MODES)} (default: {d.noise_mode})",
    )
    g.add_argument(
        "--p",
        "--noise_p",
        dest="p",
        default=d.p,
        help="fractions of corrupted pairs in [0, 1]; required when a noise mode "
        f"other than clean is in the grid (default: {d.p or 'none'})",
    )
    g.add_argument(
        "--sigma",
        "--noise_sigma",
        dest="sigma",
        default=d.sigma,
        help="noise sigmas >= 0 (label-noise std / random label std) "
        f"(default: {d.sigma or 'the runner default, 1.0'})",
    )
    g.add_argument(
        "--placement",
        "--noise_placement",
        dest="placement",
        default=d.placement,
        help=f"placements of corrupted pairs, from: {', '.join(PLACEMENTS)} (default: {d.placement})",
    )
    g.add_argument("--seeds", default="0", help="training seeds, integers >= 0 (default: 0)")


def _training_and_sweep_flags(parser, d: DriverDefaults):
    """What every run is given (steps, sizes, rate, extra grid paths, attention) and where the
    sweep writes; returns the sweep's group (build_parser adds to it)."""
    t = parser.add_argument_group("training (passed to every run; default: the runner's)")
    t.add_argument(
        "--steps", type=int_at_least(1), default=None, help="training steps (default: the paper's, per model)"
    )
    t.add_argument("--batch_size", type=int_at_least(1), default=None)
    t.add_argument("--eval_size", type=int_at_least(1), default=None)
    t.add_argument("--log_every", type=int_at_least(1), default=None)
    t.add_argument("--lr", type=positive_number(), default=None)
    t.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="PATH=V1,V2",
        help="also sweep any setting by its dotted path (repeatable), e.g. "
        "--grid train.adam_b2=0.98,0.999 --grid model.init_scale=0.002,0.01; "
        "each value is set as the runners' --set PATH=VALUE sets it",
    )
    t.add_argument(
        "--save_attention",
        dest="save_attention",
        action="store_true",
        default=True,
        help="save attention and compute AUROC in every run (default)",
    )
    t.add_argument(
        "--no_save_attention",
        dest="save_attention",
        action="store_false",
        help="do not save attention (no AUROC column values)",
    )
    s = parser.add_argument_group("sweep")
    s.add_argument("--out", type=path_text(), default=d.out, help=f"results CSV (default: {d.out})")
    add_both_spellings(
        s,
        "--runs-dir",
        default=d.runs_dir,
        help=f"where the run directories go (default: {d.runs_dir})",
    )
    s.add_argument(
        "--jobs",
        type=int_at_least(1),
        default=os.cpu_count() or 1,
        help=f"runs in parallel, one thread each when > 1 (default: os.cpu_count() = {os.cpu_count() or 1})",
    )
    s.add_argument(
        "--overwrite",
        action="store_true",
        help="retrain runs in --runs-dir whose stored settings differ from this grid (default: refuse)",
    )
    return s


# ---------------------------------------------------------------------------
# Results CSV (always rebuilt from the run directories)
