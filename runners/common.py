"""What both runners share: the flag surface, its validation, and the run pipeline.

flags -> Settings -> (check --out) -> train -> run directory -> analyses.
Every flag is checked before any work starts; a bad one ends the program with
exit code 2 and one line naming the flag, the value and what is accepted.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from src import rundir as names
from src.config import (NOISE_MODES, ORDERINGS, PLACEMENTS, CurriculumConfig, Settings, preset,
                        validate)
from src.provenance import run_record
from src.rundir import RunDir, RunDirError
from src.train import TrainResult, make_eval_set, train

ATTENTION_TASKS = 1000  # eval tasks whose attention is saved with --save_attention
CURRICULUM_FIELDS = ("ordering", "noise_mode", "noise_p", "noise_sigma", "noise_placement")


class UsageError(Exception):
    """A bad flag or combination; the message is one line."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _probability(text: str) -> float:
    value = float(text)
    if not (0.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"{text} is out of range; accepted: a number in [0, 1]")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not (value >= 0.0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text} is out of range; accepted: a finite number >= 0")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is out of range; accepted: an integer >= 1")
    return value


def _beta(text: str) -> float:
    value = float(text)
    if not (0.0 <= value < 1.0):
        raise argparse.ArgumentTypeError(f"{text} is out of range; accepted: a number in [0, 1)")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text} is out of range; accepted: a finite number > 0")
    return value


def add_curriculum_flags(parser: argparse.ArgumentParser) -> None:
    """--ordering/--noise_* and their --train_*/--eval_* overrides (default 'auto')."""
    g = parser.add_argument_group("ordering and noise (SPEC §7: noise, then ordering, then placement)")
    g.add_argument("--ordering", choices=ORDERINGS, default="random",
                   help="order of context pairs for training and evaluation (default: random)")
    g.add_argument("--noise_mode", choices=NOISE_MODES, default="clean",
                   help="corruption of context pairs (default: clean)")
    g.add_argument("--noise_p", type=_probability, default=None,
                   help="fraction of pairs corrupted, exactly round(p*N) per task; "
                        "required with a noise mode")
    g.add_argument("--noise_sigma", type=_non_negative, default=None,
                   help="label-noise std, or std of a random pair's label (default: 1.0)")
    g.add_argument("--noise_placement", choices=PLACEMENTS, default="mixed",
                   help="where corrupted pairs go (default: mixed)")
    auto = "auto"
    for phase in ("train", "eval"):
        g.add_argument(f"--{phase}_ordering", choices=ORDERINGS + (auto,), default=auto,
                       help=f"{phase} ordering; auto = --ordering")
        g.add_argument(f"--{phase}_noise_mode", choices=NOISE_MODES + (auto,), default=auto,
                       help=f"{phase} noise mode; auto = --noise_mode")
        g.add_argument(f"--{phase}_noise_p", type=_auto_or(_probability), default=auto,
                       help=f"{phase} noise fraction; auto = --noise_p")
        g.add_argument(f"--{phase}_noise_sigma", type=_auto_or(_non_negative), default=auto,
                       help=f"{phase} noise sigma; auto = --noise_sigma")
        g.add_argument(f"--{phase}_noise_placement", choices=PLACEMENTS + (auto,), default=auto,
                       help=f"{phase} placement; auto = --noise_placement")


def _auto_or(convert):
    def parse(text: str):
        return "auto" if text == "auto" else convert(text)
    parse.__name__ = convert.__name__
    return parse


def resolve_curriculum(args: argparse.Namespace, phase: str) -> tuple[CurriculumConfig, dict]:
    """The curriculum of `phase` ('train'/'eval'), and which of its values were given explicitly."""
    values, explicit = {}, {}
    for name in CURRICULUM_FIELDS:
        specific = getattr(args, f"{phase}_{name}")
        values[name] = getattr(args, name) if specific == "auto" else specific
        explicit[name] = f"--{phase}_{name}" if specific != "auto" else None
    mode = values["noise_mode"]
    if mode == "clean":
        for name in ("noise_p", "noise_sigma", "noise_placement"):
            if explicit[name] is not None:
                raise UsageError(f"{explicit[name]}={values[name]} has no effect because the {phase} "
                                 f"noise mode is 'clean'; also give --{phase}_noise_mode (or "
                                 f"--noise_mode) with one of: label_noise, random_pairs")
    elif values["noise_p"] is None:
        raise UsageError(f"{phase} noise mode {mode!r} needs a fraction of corrupted pairs; give "
                         f"--noise_p or --{phase}_noise_p with a number in [0, 1]")
    values["noise_p"] = 0.0 if values["noise_p"] is None else values["noise_p"]
    values["noise_sigma"] = 1.0 if values["noise_sigma"] is None else values["noise_sigma"]
    return CurriculumConfig(**values), explicit


def check_shared_noise_flags(args: argparse.Namespace, train_c: CurriculumConfig,
                             eval_c: CurriculumConfig) -> None:
    if train_c.noise_mode == "clean" and eval_c.noise_mode == "clean":
        for name in ("noise_p", "noise_sigma"):
            if getattr(args, name) is not None:
                raise UsageError(f"--{name}={getattr(args, name)} has no effect because no noise mode "
                                 f"is set; also give --noise_mode (or --train_/--eval_noise_mode) "
                                 f"with one of: label_noise, random_pairs")
        if args.noise_placement != "mixed":
            raise UsageError(f"--noise_placement={args.noise_placement} has no effect because no "
                             "noise mode is set; also give --noise_mode with one of: "
                             "label_noise, random_pairs")


def build_parser(prog: str, description: str, model_name: str, allow_layers: bool) -> argparse.ArgumentParser:
    defaults = preset(model_name).train
    parser = OneLineParser(prog=prog, description=description,
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", default=None,
                        help=f"run directory to create (default: runs/{model_name}_seed<seed>)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace --out if it exists (otherwise an existing --out is refused)")
    parser.add_argument("--seed", type=int, default=0, help="seed of initialisation and training data")
    parser.add_argument("--steps", type=_positive_int, default=None,
                        help="training steps (default: the paper's, %d for %s)"
                             % (defaults.steps, model_name))
    parser.add_argument("--batch_size", type=_positive_int, default=defaults.batch_size,
                        help="fresh tasks per step")
    parser.add_argument("--lr", type=_positive_float, default=None,
                        help="Adam learning rate (default: 1e-3, or 5e-4 when depth > 3)")
    parser.add_argument("--adam_b2", type=_beta, default=defaults.adam_b2,
                        help="Adam's second-moment decay β2 (the reference code's 0.98; "
                             "SPEC §4 writes 0.999, with which twolayer does not learn to copy)")
    parser.add_argument("--log_every", type=_positive_int, default=defaults.log_every,
                        help="evaluate and log every this many steps")
    parser.add_argument("--eval_size", type=_positive_int, default=defaults.eval_size,
                        help="fixed eval tasks (drawn from a seed that --seed does not change)")
    if allow_layers:
        parser.add_argument("--num_layers", type=_positive_int, default=1,
                            help="K: one weight-shared LSA layer applied K times "
                                 "(1 = lsa1; K > 1 = recurrent lsa_rec)")
    parser.add_argument("--save_attention", action="store_true",
                        help=f"save the attention weights of the first {ATTENTION_TASKS} eval tasks "
                             "under attn/ and compute attention statistics")
    parser.add_argument("--skip_analysis", action="store_true",
                        help="do not run the analyses at the end (alignment, OOD, attention)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_curriculum_flags(parser)
    return parser


def settings_from_args(args: argparse.Namespace, model_name: str) -> Settings:
    layers = getattr(args, "num_layers", None)
    if model_name == "lsa1" and layers and layers > 1:
        model_name = "lsa_rec"
    base = preset(model_name, layers if model_name == "lsa_rec" else None)
    train_c, _ = resolve_curriculum(args, "train")
    eval_c, _ = resolve_curriculum(args, "eval")
    check_shared_noise_flags(args, train_c, eval_c)
    train_cfg = replace(base.train, seed=args.seed, batch_size=args.batch_size,
                        log_every=args.log_every, eval_size=args.eval_size,
                        steps=args.steps or base.train.steps, lr=args.lr or base.train.lr,
                        adam_b2=args.adam_b2)
    settings = replace(base, train=train_cfg, train_curriculum=train_c, eval_curriculum=eval_c)
    try:
        validate(settings)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return settings


# ---------------------------------------------------------------------------
# The run pipeline

def summary_record(settings: Settings, result: TrainResult) -> dict:
    final = result.final
    record = {
        "status": "diverged" if result.diverged else "complete",
        "message": result.diverged,
        "model": settings.model.name,
        "num_layers": settings.model.num_layers,
        "seed": settings.train.seed,
        "steps": result.steps_done,
        "steps_requested": settings.train.steps,
        "train_loss": result.history[-1]["train_loss"] if result.history else None,
        "gd_eta": result.eval_set.gd_eta,
        "train_seconds": round(result.train_seconds, 3),
        "eval_size": settings.train.eval_size,
    }
    record.update({k: final.get(k) for k in ("eval_loss", "gd_loss", "align_cos", "l2_pred_diff",
                                             "model_diff")})
    record.update({k: v for k, v in final.items() if k.startswith("copy_")})
    return record


def analysis_metadata(settings: Settings, eval_set, save_attention: bool) -> dict:
    from src.curricula import num_corrupted
    n = settings.task.num_context
    def describe(c: CurriculumConfig) -> dict:
        return {**c.__dict__, "num_corrupted": num_corrupted(c.noise_p, n) if c.noise_mode != "clean" else 0}
    return {
        "train_curriculum": describe(settings.train_curriculum),
        "eval_curriculum": describe(settings.eval_curriculum),
        "eval_size": settings.train.eval_size,
        "eval_seed": settings.train.eval_seed,
        "num_context": n,
        "tokens": settings.model.tokens,
        "gd_eta": eval_set.gd_eta,
        "ordering_idx": {"file": names.ORDERING, "shape": list(eval_set.ordering_idx.shape),
                         "meaning": "position p of an eval task holds its original pair ordering_idx[p]"},
        "noise_mask": {"file": names.NOISE_MASK, "shape": list(eval_set.noise_mask.shape),
                       "meaning": "True where the pair at that (new) position is corrupted",
                       "corrupted_total": int(eval_set.noise_mask.sum())},
        "attention_saved": save_attention,
        "attention_tasks": min(ATTENTION_TASKS, settings.train.eval_size) if save_attention else 0,
    }


def save_attention(run: RunDir, settings: Settings, params, eval_set) -> None:
    from src.data import take_tasks
    from src.transformer import build_model
    from utils_attention import capture_attention, per_head_arrays
    model = build_model(settings.task, settings.model)
    count = min(ATTENTION_TASKS, settings.train.eval_size)
    attention = capture_attention(model, params, take_tasks(eval_set.tasks, slice(0, count)))
    raw = {}
    for (layer, head), weights in per_head_arrays(attention).items():
        run.write_npy(names.attention_file(layer, head), weights)
        raw[f"layer{layer}_head{head}"] = weights
    raw["noise_mask"] = eval_set.noise_mask[:count]
    raw["ordering_idx"] = eval_set.ordering_idx[:count]
    run.write_npz(names.ATTN_RAW, raw)


def run_analyses(run: RunDir, with_attention: bool) -> None:
    """The analyses every finished run gets: alignment, OOD, and, when attention was
    saved, attention statistics and the quick attention heatmaps (figs/)."""
    import importlib
    for module, wanted in (("analysis.alignment", True), ("analysis.ood_eval", True),
                           ("analysis.attention_stats", with_attention),
                           ("plots.attention_quick", with_attention)):
        if not wanted:
            continue
        try:
            analysis = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:  # a missing dependency is an error, a missing module is not
                raise
            continue
        analysis.run(run)


def execute(settings: Settings, out: Path, *, overwrite: bool, with_attention: bool,
            runner: str, argv: Sequence[str], progress: bool = True,
            skip_analysis: bool = False) -> tuple[RunDir, TrainResult]:
    """Train and write a complete run directory. `out` must have been checked."""
    run = RunDir.create(out, overwrite=overwrite)
    run.write_json(names.CONFIG, run_record(settings.to_dict(), runner, argv, out))
    eval_set = make_eval_set(settings)
    run.save_eval_metadata(eval_set.ordering_idx, eval_set.noise_mask)
    run.write_json(names.METADATA, analysis_metadata(settings, eval_set, with_attention))
    logger = run.metrics_logger()
    result = train(settings, on_log=logger.log, progress=progress, eval_set=eval_set)
    run.save_params(result.params)
    if with_attention:
        save_attention(run, settings, result.params, eval_set)
    run.write_json(names.SUMMARY, summary_record(settings, result))
    if not result.diverged and not skip_analysis:
        run_analyses(run, with_attention)
    return run, result


def main(model_name: str, runner: str, description: str, argv: Sequence[str] | None = None,
         allow_layers: bool = False) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(f"python -m {runner}", description, model_name, allow_layers)
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args, model_name)
        out = Path(args.out or f"runs/{settings.model.name}_seed{args.seed}")
        RunDir.check_creatable(out, args.overwrite)
    except (UsageError, RunDirError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    try:
        run, result = execute(settings, out, overwrite=args.overwrite,
                              with_attention=args.save_attention, runner=runner, argv=argv,
                              progress=not args.quiet, skip_analysis=args.skip_analysis)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {out} is incomplete (every file in it is whole; no "
              f"{names.SUMMARY}); rerun with --overwrite", file=sys.stderr)
        return 130
    except RunDirError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    final = result.final
    if result.diverged:
        print(f"{parser.prog}: training stopped: {result.diverged}; parameters saved to "
              f"{run.file(names.PARAMS)}", file=sys.stderr)
        return 1
    line = (f"{settings.model.name}: {result.steps_done} steps in {result.train_seconds:.1f}s | "
            f"eval_loss {final['eval_loss']:.4f} | gd_loss {final['gd_loss']:.4f} "
            f"(eta {result.eval_set.gd_eta:.3f}) | align_cos {final['align_cos']:.4f}")
    if "copy_next" in final:
        line += (f" | copy own {final['copy_own']:.3f} next {final['copy_next']:.3f} "
                 f"prev {final['copy_prev']:.3f} other {final['copy_other']:.3f}")
    print(line + f" -> {run.path}")
    return 0
