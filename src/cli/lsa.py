"""The paper's runners as their users type them (von Oswald et al.; system `lsa`): flags ->
LSASettings -> the pipeline.

`runners.run_concat_inputs_targets` (lsa1 / lsa_rec) and `runners.run_softmax_copy`
(twolayer) are one call to `main`. Every flag is checked before any work starts; a bad one ends
the program with exit code 2 and one line naming the flag, the value and what is accepted.
`--set dotted.key=value` overrides any setting (e.g. `--set model.init_scale=0.01`) after the
flags; the names of earlier versions (`train.lr`, `train.grad_clip_norm`) are aliases (ALIASES).
`--resume` continues a killed run from its checkpoint.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from src.flags import (
    add_set_flag,
    OneLineParser,
    path_text,
    PrintChoices,
    UsageError,
    bounded,
    changed_flags,
    fail,
    non_negative_number,
    number_in,
    or_auto,
    positive_number,
    seed,
)
from src.cli.command import train_from_args, validated
from src.gd_paper.config import NOISE_MODES, ORDERINGS, PLACEMENTS, CurriculumConfig
from src.gd_paper.presets import MODEL_PRESETS, SET_ALIASES, preset_settings, preset
from src.systems.lsa import ATTENTION_TASKS, LSASettings

# earlier names of settings -> ours (accepted by --set and --grid, used in messages)
ALIASES = SET_ALIASES

CURRICULUM_FIELDS = ("ordering", "noise_mode", "noise_p", "noise_sigma", "noise_placement")
_probability = number_in(0.0, 1.0)
_non_negative = non_negative_number()
_positive_float = positive_number()
_beta = number_in(0.0, 1.0, high_open=True)


def add_curriculum_flags(parser: argparse.ArgumentParser) -> None:
    """--ordering/--noise_* and their --train_*/--eval_* overrides (default 'auto')."""
    g = parser.add_argument_group("ordering and noise (SPEC §7: noise, then ordering, then placement)")
    g.add_argument(
        "--ordering",
        choices=ORDERINGS,
        default="random",
        help="order of context pairs for training and evaluation (default: random)",
    )
    g.add_argument(
        "--noise_mode", choices=NOISE_MODES, default="clean", help="corruption of context pairs (default: clean)"
    )
    g.add_argument(
        "--noise_p",
        type=_probability,
        default=None,
        help="fraction of pairs corrupted, exactly round(p*N) per task; required with a noise mode",
    )
    g.add_argument(
        "--noise_sigma",
        type=_non_negative,
        default=None,
        help="label-noise std, or std of a random pair's label (default: 1.0)",
    )
    g.add_argument(
        "--noise_placement", choices=PLACEMENTS, default="mixed", help="where corrupted pairs go (default: mixed)"
    )
    auto = "auto"
    per_phase = (  # (the shared flag a phase's flag defaults to, what --help calls it, choices or converter)
        ("ordering", "ordering", ORDERINGS),
        ("noise_mode", "noise mode", NOISE_MODES),
        ("noise_p", "noise fraction", or_auto(_probability)),
        ("noise_sigma", "noise sigma", or_auto(_non_negative)),
        ("noise_placement", "placement", PLACEMENTS),
    )
    for phase in ("train", "eval"):
        for shared, words, accepted in per_phase:
            kind = {"choices": accepted + (auto,)} if isinstance(accepted, tuple) else {"type": accepted}
            g.add_argument(f"--{phase}_{shared}", **kind, default=auto, help=f"{phase} {words}; auto = --{shared}")


def resolve_curriculum(args: argparse.Namespace, phase: str) -> tuple[CurriculumConfig, dict]:
    """The curriculum of `phase` ('train'/'eval') of parsed flags (see `curriculum_of`)."""
    shared = {name: getattr(args, name) for name in CURRICULUM_FIELDS}
    specific = {name: getattr(args, f"{phase}_{name}") for name in CURRICULUM_FIELDS}
    return curriculum_of(phase, shared, specific)


def curriculum_of(phase: str, shared: dict, specific: dict) -> tuple[CurriculumConfig, dict]:
    """The curriculum of `phase` from the shared flags (--ordering, --noise_*; None = not given)
    and the phase's own (--train_* / --eval_*; "auto" = the shared one), and which values were
    given explicitly. A sweep point resolves its curricula with the same rules."""
    values, explicit = {}, {}
    for name in CURRICULUM_FIELDS:
        own = specific.get(name, "auto")
        values[name] = shared.get(name) if own == "auto" else own
        explicit[name] = f"--{phase}_{name}" if own != "auto" else None
    values["ordering"] = values["ordering"] or "random"
    values["noise_mode"] = values["noise_mode"] or "clean"
    values["noise_placement"] = values["noise_placement"] or "mixed"
    mode = values["noise_mode"]
    if mode == "clean":
        for name in ("noise_p", "noise_sigma", "noise_placement"):
            if explicit[name] is not None:
                raise UsageError(
                    f"{explicit[name]}={values[name]} has no effect because the {phase} "
                    f"noise mode is 'clean'; also give --{phase}_noise_mode (or "
                    f"--noise_mode) with one of: label_noise, random_pairs"
                )
    elif values["noise_p"] is None:
        raise UsageError(
            f"{phase} noise mode {mode!r} needs a fraction of corrupted pairs; give "
            f"--noise_p or --{phase}_noise_p with a number in [0, 1]"
        )
    values["noise_p"] = 0.0 if values["noise_p"] is None else values["noise_p"]
    values["noise_sigma"] = 1.0 if values["noise_sigma"] is None else values["noise_sigma"]
    return CurriculumConfig(**values), explicit


def check_shared_noise_flags(args: argparse.Namespace, train_c: CurriculumConfig, eval_c: CurriculumConfig) -> None:
    if train_c.noise_mode == "clean" and eval_c.noise_mode == "clean":
        for name in ("noise_p", "noise_sigma"):
            if getattr(args, name) is not None:
                raise UsageError(
                    f"--{name}={getattr(args, name)} has no effect because no noise mode "
                    f"is set; also give --noise_mode (or --train_/--eval_noise_mode) "
                    f"with one of: label_noise, random_pairs"
                )
        if args.noise_placement != "mixed":
            raise UsageError(
                f"--noise_placement={args.noise_placement} has no effect because no "
                "noise mode is set; also give --noise_mode with one of: "
                "label_noise, random_pairs"
            )


def build_parser(prog: str, description: str, model_name: str) -> argparse.ArgumentParser:
    """The runner flags of preset `model_name` (--num_layers where its runner takes it)."""
    allow_layers = MODEL_PRESETS[model_name].layers_flag
    defaults = preset(model_name).train
    parser = OneLineParser(prog=prog, description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument(
        "--out",
        type=path_text(),
        default=None,
        help=f"run directory to create (default: runs/{model_name}[_<flag><value> for "
        "each flag not at its default]_seed<seed>)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace --out if it exists (otherwise an existing --out is refused)"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue --out from its checkpoint (the same flags as the run that "
        "started it; checkpoints every train.checkpoint_every steps)",
    )
    _training_flags(parser, defaults, model_name)
    if allow_layers:
        parser.add_argument(
            "--num_layers",
            type=bounded("layers"),
            default=1,
            help="K: one weight-shared LSA layer applied K times (1 = lsa1; K > 1 = recurrent lsa_rec)",
        )
    parser.add_argument(
        "--save_attention",
        action="store_true",
        help=f"save the attention weights of the first {ATTENTION_TASKS} eval tasks "
        "under attn/ and compute attention statistics",
    )
    parser.add_argument(
        "--skip_analysis", action="store_true", help="do not run the analyses at the end (alignment, OOD, attention)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--choices", action=PrintChoices)
    add_set_flag(
        parser,
        "overrides",
        "override any setting by its dotted path after the flags, e.g. "
        "--set model.init_scale=0.01 (repeatable; see config.json for paths)",
    )
    add_curriculum_flags(parser)
    return parser


def _training_flags(parser, defaults, model_name: str) -> None:
    """The seed, steps, batch, task pools, Adam's rate and β2, logging and evaluation flags."""
    parser.add_argument(
        "--seed", type=seed(), default=0, help="seed of initialisation and training data (0 <= seed < 2^32)"
    )
    parser.add_argument(
        "--steps",
        type=bounded("steps"),
        default=None,
        help="training steps (default: the paper's, %d for %s)" % (defaults.steps, model_name),
    )
    parser.add_argument(
        "--batch_size", type=bounded("batch_size"), default=defaults.batch_size, help="fresh tasks per step"
    )
    parser.add_argument(
        "--num_tasks",
        type=bounded("pool"),
        default=None,
        help="train on a pool of this many task vectors drawn once from --seed "
        "(Garg et al.'s training.num_tasks; default: fresh tasks every step)",
    )
    parser.add_argument(
        "--num_training_examples",
        type=bounded("pool"),
        default=None,
        help="train on a pool of this many whole prompts drawn once from --seed "
        "(Garg et al.'s training.num_training_examples; default: fresh)",
    )
    parser.add_argument(
        "--lr", type=_positive_float, default=None, help="Adam learning rate (default: 1e-3, or 5e-4 when depth > 3)"
    )
    parser.add_argument(
        "--adam_b2",
        type=_beta,
        default=defaults.adam_b2,
        help="Adam's second-moment decay β2 (the reference code's 0.98; "
        "SPEC §4 writes 0.999, with which twolayer does not learn to copy)",
    )
    parser.add_argument(
        "--log_every", type=bounded("steps"), default=defaults.log_every, help="evaluate and log every this many steps"
    )
    parser.add_argument(
        "--eval_size",
        type=bounded("eval_size"),
        default=defaults.eval_size,
        help="fixed eval tasks (drawn from a seed that --seed does not change)",
    )


def settings_from_args(args: argparse.Namespace, model_name: str) -> LSASettings:
    """The validated settings of the runner of `model_name` (UsageError, one line)."""
    train_c, _ = resolve_curriculum(args, "train")
    eval_c, _ = resolve_curriculum(args, "eval")
    check_shared_noise_flags(args, train_c, eval_c)
    return settings_for(
        model_name,
        num_layers=getattr(args, "num_layers", None),
        seed=args.seed,
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        adam_b2=args.adam_b2,
        log_every=args.log_every,
        eval_size=args.eval_size,
        num_tasks=args.num_tasks,
        num_training_examples=args.num_training_examples,
        train_curriculum=train_c,
        eval_curriculum=eval_c,
        save_attention=getattr(args, "save_attention", False),
        sets=args.overrides,
    )


def settings_for(model_name: str, **given) -> LSASettings:
    """The settings a runner makes of its flags (src.gd_paper.presets.preset_settings: the preset, the
    training flags, the curricula, then `--set` overrides), validated; UsageError, one line, in
    the runners' words."""
    try:
        settings = preset_settings(model_name, validate=False, **given)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return validated(settings, {ours: theirs for theirs, ours in ALIASES.items()})


def default_out(parser: argparse.ArgumentParser, args: argparse.Namespace, model: str) -> Path:
    """runs/<model>[_<flag><value> for each flag not at its default]_seed<seed>: a loop over any
    flag makes one run per value."""
    return Path("runs") / "_".join([model, *changed_flags(args, parser.parse_args([])), f"seed{args.seed}"])


def main(model_name: str, description: str, argv: Sequence[str] | None = None) -> int:
    """The runner of preset `model_name`: parse, check, train, write the run directory."""
    argv = list(sys.argv[1:] if argv is None else argv)
    runner = MODEL_PRESETS[model_name].runner
    parser = build_parser(f"python -m {runner}", description, model_name)
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args, model_name)
    except UsageError as err:
        return fail(parser.prog, err)
    out = Path(args.out) if args.out else default_out(parser, args, settings.model.name)
    return train_from_args(parser.prog, settings, out, args, runner=runner, argv=argv)
