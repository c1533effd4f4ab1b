"""The command line of the attention-only runners: flags -> Settings -> the pipeline.

`runners.run_concat_inputs_targets` (lsa1 / lsa_rec) and `runners.run_softmax_copy`
(twolayer) are one call to `main`. The job engine resolves a run's flags with the same
`settings_from_argv`, so a sweep plans exactly the Settings its runs will have. Every flag
is checked before any work starts; a bad one ends the program with exit code 2 and one
line naming the flag, the value and what is accepted. `--set dotted.key=value` overrides
any setting (e.g. `--set model.init_scale=0.01`), after the flags.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from src import rundir as names
from src.bounds import check_memory, training_bytes
from src.cli import (OneLineParser, PrintChoices, UsageError, bounded, fail, int_at_least, non_negative_number,
                     number_in, or_auto, positive_number, seed)
from src.config import NOISE_MODES, ORDERINGS, PLACEMENTS, CurriculumConfig, Settings, validate
from src.overrides import apply_overrides
from src.pipeline import execute
from src.presets import MODEL_PRESETS, preset
from src.rundir import ATTENTION_TASKS, RunDir, RunDirError, interrupted_note, will_replace

CURRICULUM_FIELDS = ("ordering", "noise_mode", "noise_p", "noise_sigma", "noise_placement")
_probability = number_in(0.0, 1.0)
_non_negative = non_negative_number()
_positive_float = positive_number()
_beta = number_in(0.0, 1.0, high_open=True)


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
        g.add_argument(f"--{phase}_noise_p", type=or_auto(_probability), default=auto,
                       help=f"{phase} noise fraction; auto = --noise_p")
        g.add_argument(f"--{phase}_noise_sigma", type=or_auto(_non_negative), default=auto,
                       help=f"{phase} noise sigma; auto = --noise_sigma")
        g.add_argument(f"--{phase}_noise_placement", choices=PLACEMENTS + (auto,), default=auto,
                       help=f"{phase} placement; auto = --noise_placement")


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


def build_parser(prog: str, description: str, model_name: str) -> argparse.ArgumentParser:
    """The runner flags of preset `model_name` (--num_layers where its runner takes it)."""
    allow_layers = MODEL_PRESETS[model_name].layers_flag
    defaults = preset(model_name).train
    parser = OneLineParser(prog=prog, description=description,
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", default=None,
                        help=f"run directory to create (default: runs/{model_name}_seed<seed>)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace --out if it exists (otherwise an existing --out is refused)")
    parser.add_argument("--seed", type=seed(), default=0,
                        help="seed of initialisation and training data (0 <= seed < 2^32)")
    parser.add_argument("--steps", type=bounded("steps"), default=None,
                        help="training steps (default: the paper's, %d for %s)"
                             % (defaults.steps, model_name))
    parser.add_argument("--batch_size", type=bounded("batch_size"), default=defaults.batch_size,
                        help="fresh tasks per step")
    parser.add_argument("--lr", type=_positive_float, default=None,
                        help="Adam learning rate (default: 1e-3, or 5e-4 when depth > 3)")
    parser.add_argument("--adam_b2", type=_beta, default=defaults.adam_b2,
                        help="Adam's second-moment decay β2 (the reference code's 0.98; "
                             "SPEC §4 writes 0.999, with which twolayer does not learn to copy)")
    parser.add_argument("--log_every", type=bounded("steps"), default=defaults.log_every,
                        help="evaluate and log every this many steps")
    parser.add_argument("--eval_size", type=bounded("eval_size"), default=defaults.eval_size,
                        help="fixed eval tasks (drawn from a seed that --seed does not change)")
    if allow_layers:
        parser.add_argument("--num_layers", type=bounded("layers"), default=1,
                            help="K: one weight-shared LSA layer applied K times "
                                 "(1 = lsa1; K > 1 = recurrent lsa_rec)")
    parser.add_argument("--save_attention", action="store_true",
                        help=f"save the attention weights of the first {ATTENTION_TASKS} eval tasks "
                             "under attn/ and compute attention statistics")
    parser.add_argument("--skip_analysis", action="store_true",
                        help="do not run the analyses at the end (alignment, OOD, attention)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--choices", action=PrintChoices)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any setting by its dotted path after the flags, e.g. "
                             "--set model.init_scale=0.01 (repeatable; see config.json for paths)")
    add_curriculum_flags(parser)
    return parser


def settings_from_args(args: argparse.Namespace, model_name: str) -> Settings:
    layers = getattr(args, "num_layers", None)
    spec = MODEL_PRESETS[model_name]
    if layers and layers != spec.layers and spec.deeper:   # lsa1 with K > 1 layers is lsa_rec
        model_name = spec.deeper
    try:
        base = preset(model_name, None if MODEL_PRESETS[model_name].fixed_depth else layers)
    except ValueError as err:
        raise UsageError(str(err)) from None
    train_c, _ = resolve_curriculum(args, "train")
    eval_c, _ = resolve_curriculum(args, "eval")
    check_shared_noise_flags(args, train_c, eval_c)
    train_cfg = replace(base.train, seed=args.seed, batch_size=args.batch_size,
                        log_every=args.log_every, eval_size=args.eval_size,
                        steps=args.steps or base.train.steps, lr=args.lr or base.train.lr,
                        adam_b2=args.adam_b2)
    settings = replace(base, train=train_cfg, train_curriculum=train_c, eval_curriculum=eval_c)
    try:
        settings = apply_overrides(settings, args.overrides)
        validate(settings)
        check_memory(run_bytes(settings, getattr(args, "save_attention", False)))
    except ValueError as err:
        raise UsageError(str(err)) from None
    return settings


def run_bytes(settings: Settings, keep_attention: bool) -> int:
    """src.bounds' memory estimate for one run of `settings` (tokens N + 1, width at most
    2 (d + 1) plus the layout's positional part)."""
    t, m, tr = settings.task, settings.model, settings.train
    width = 2 * (t.d + 1) + int(getattr(m.layout.options, "pe_size", 0) or 0) + m.key_size
    return training_bytes(batch_size=tr.batch_size, eval_size=tr.eval_size, tokens=t.num_context + 1,
                          width=width, layers=m.num_layers, heads=m.num_heads,
                          keep_attention=keep_attention)


def settings_from_argv(model_name: str, argv: Sequence[str]) -> Settings:
    """The Settings the runner of `model_name` resolves from `argv` (UsageError, one line)."""
    parser = build_parser(f"python -m {MODEL_PRESETS[model_name].runner}", "", model_name)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(list(argv))
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        raise UsageError(lines[-1].split("error: ", 1)[-1] if lines else "rejected") from None
    return settings_from_args(args, model_name)


def main(model_name: str, description: str, argv: Sequence[str] | None = None) -> int:
    """The runner of preset `model_name`: parse, check, train, write the run directory."""
    argv = list(sys.argv[1:] if argv is None else argv)
    runner = MODEL_PRESETS[model_name].runner
    parser = build_parser(f"python -m {runner}", description, model_name)
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args, model_name)
        out = Path(args.out or f"runs/{settings.model.name}_seed{args.seed}")
        RunDir.check_creatable(out, args.overwrite)
    except (UsageError, RunDirError) as err:
        return fail(parser.prog, err)
    return _train_and_report(parser.prog, settings, out, args, runner, argv)


def _train_and_report(prog: str, settings: Settings, out: Path, args: argparse.Namespace,
                      runner: str, argv: Sequence[str]) -> int:
    """Run the pipeline; one summary line (exit 0), or why it stopped (130 / 2 / 1)."""
    replacing = will_replace(out)
    try:
        run, result = execute(settings, out, overwrite=args.overwrite,
                              with_attention=args.save_attention, runner=runner, argv=argv,
                              progress=not args.quiet, skip_analysis=args.skip_analysis)
    except KeyboardInterrupt:
        print("\n" + interrupted_note(out, replacing), file=sys.stderr)
        return 130
    except RunDirError as err:
        return fail(prog, err)
    final = result.final
    if result.diverged:
        print(f"{prog}: training stopped: {result.diverged}; parameters saved to "
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


def rerun_main(description: str, argv: Sequence[str] | None = None) -> int:
    """`python -m runners.run --config FILE [--set K=V ...] --out DIR`: train the Settings of a
    config.json (or of a bare settings mapping) through the same pipeline."""
    import json
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "python -m runners.run"
    parser = OneLineParser(prog=prog, description=description)
    parser.add_argument("--config", required=True,
                        help="a run's config.json, or a JSON settings mapping")
    parser.add_argument("--out", required=True, help="run directory to create")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace --out if it is one of our run directories")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any setting by its dotted path (repeatable)")
    parser.add_argument("--save_attention", action="store_true",
                        help=f"save attention of the first {ATTENTION_TASKS} eval tasks")
    parser.add_argument("--skip_analysis", action="store_true", help="no analyses at the end")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        with open(args.config) as handle:
            raw = json.load(handle)
        raw = raw.get("settings", raw) if isinstance(raw, dict) else raw
        if not isinstance(raw, dict):
            raise UsageError(f"--config {args.config}: holds no settings mapping")
        settings = apply_overrides(Settings.from_dict(raw), args.overrides)
        validate(settings)
        check_memory(run_bytes(settings, args.save_attention))
        out = Path(args.out)
        RunDir.check_creatable(out, args.overwrite)
    except OSError as err:
        return fail(prog, f"--config {args.config}: cannot be read ({err.strerror or err})")
    except json.JSONDecodeError as err:
        return fail(prog, f"--config {args.config}: is not JSON ({err.msg} at line {err.lineno})")
    except (KeyError, TypeError) as err:
        return fail(prog, f"--config {args.config}: is not a settings mapping (bad or missing "
                          f"key {err})")
    except (UsageError, RunDirError) as err:
        return fail(prog, err)
    except ValueError as err:
        return fail(prog, f"--config {args.config}: {err}")
    return _train_and_report(parser.prog, settings, out, args, "runners.run", argv)
