"""The training-dynamics study's command line (Zhang et al., ICML 2025): the original's
`python train.py` flags, as `python -m runners.dynamics`, -> the settings of system `dynamics`
(src/systems/dynamics.py) -> the pipeline (train, run directory, the dynamics analysis).

    python -m runners.dynamics --model attnM --head 8 --init 1e-6 --show
    python -m runners.dynamics --model mlp --cubic_feat --head 8 --init 1e-6 --show
    python -m runners.dynamics --model attnS --head 5 --init 1e-2 --epoch 10001 --lr 0.02 --show
    python -m runners.dynamics --model attnS --head 9 --KQ_dim 1 --in_dim 8 --seq_len 32 ...
    python -m runners.dynamics --model attnS --head 2 --softmax ...      # softmax attention

Run directory: config.json, metrics.jsonl (about 20 rows), metrics_summary.json, params.npz,
checkpoint.npz, dynamics.npz (loss and test losses at every epoch, singular values of every
head's W_KQ and the per-head principal-component diagonals at every log point),
analysis/dynamics.json|png, and figs/loss.png with --show (written, never shown).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Sequence

from src.flags import (
    OneLineParser,
    path_text,
    summary,
    PrintChoices,
    UsageError,
    changed_flags,
    fail,
    int_at_least,
    number_in,
    positive_number,
    seed,
)
from src.cli.command import train_from_args, validated
from src.registry import choice, registry
from src.rundir import names
from src.models.dynamics import INIT_CONVENTIONS
from src.systems.dynamics import DynamicsSettings, DynamicsTrain, original_file_id
from src.systems.dynamics_checks import OPTIMIZERS
from src.tasks.dynamics import DynamicsTaskConfig

PROG = "python -m runners.dynamics"
RUNNER = "runners.dynamics"
# The original's --model names and the registered models they mean.
SEED_MODELS = {"attnM": "attn_merged", "attnS": "attn_separate", "mlp": "cubic_mlp"}


def build_parser() -> argparse.ArgumentParser:
    task, tr = DynamicsTaskConfig(), DynamicsTrain()
    p = OneLineParser(prog=PROG, description=summary(__doc__), formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("the original's flags (its config.py; python train.py ...)")
    _original_model_flags(g, task, tr)
    _original_data_flags(g, task, tr)
    _our_flags(p.add_argument_group("ours"), tr)
    return p


def _original_model_flags(g, task: DynamicsTaskConfig, tr: DynamicsTrain) -> None:
    """The original's flags of the model, its shape and initialisation (config.py's order)."""
    g.add_argument(
        "--model",
        choices=list(SEED_MODELS),
        default="attnM",
        help="attnM = ATTN_M (merged W_KQ), attnS = ATTN_S (separate W_K, W_Q), "
        "mlp = 2-layer linear network on the cubic feature (needs --cubic_feat)",
    )
    g.add_argument("--cubic_feat", action="store_true", help="the MLP reads the cubic feature z")
    g.add_argument(
        "--head_num",
        "--head",
        dest="head",
        type=int_at_least(1),
        default=1,
        help="heads (hidden units of the MLP); the README writes the prefix --head",
    )
    g.add_argument(
        "--rank",
        "--KQ_dim",
        dest="rank",
        type=int_at_least(1),
        default=1,
        help="rank R of W_K, W_Q (attnS; the README writes --KQ_dim)",
    )
    g.add_argument("--in_dim", type=int_at_least(1), default=task.in_dim, help="D")
    g.add_argument("--out_dim", type=int_at_least(1), default=1, help="dimension of y (1: the only one here)")
    g.add_argument(
        "--seq_len", type=int_at_least(2), default=task.seq_len, help="tokens per sequence (context pairs + the query)"
    )
    g.add_argument(
        "--init",
        type=positive_number(),
        default=tr.init,
        help="initialisation scale, as the original reads it (see --init_convention)",
    )


def _original_data_flags(g, task: DynamicsTaskConfig, tr: DynamicsTrain) -> None:
    """The original's flags of the data, training and what is recorded (config.py's order)."""
    g.add_argument("--trainset_size", type=int_at_least(1), default=task.trainset_size, help="P")
    g.add_argument("--epoch", type=int_at_least(1), default=tr.epochs, help="training epochs")
    g.add_argument("--lr", type=positive_number(), default=tr.learning_rate, help="learning rate")
    g.add_argument(
        "--icl",
        type=icl_fraction,
        default=task.icl,
        help="fraction of sequences with their own task vector (the rest share w*)",
    )
    g.add_argument(
        "--testset_size",
        "--testset",
        dest="testset",
        type=int_at_least(0),
        default=task.testset_size,
        help="sequences in each test set (in-context, in-weight)",
    )
    g.add_argument("--white_cov", action="store_true", help="x ~ N(0, I/D) instead of eigenvalues ∝ 1..D")
    g.add_argument("--show", action="store_true", help=f"write the loss figure ({names.LOSS_PNG}); no window")
    g.add_argument(
        "--softmax",
        action="store_true",
        help="softmax attention: softmax over the keys (all tokens, the query included) of each head's "
        "scores (attnM, attnS; the loss computed from the sequences, not from moments)",
    )
    g.add_argument(
        "--vary_len",
        action="store_true",
        help="the loss averaged over every prefix length 2..N, each prediction divided by its length",
    )
    g.add_argument(
        "--track_value",
        action="store_true",
        help="record each head's value y->y weight at every epoch (dynamics.npz: value_yy)",
    )


def _our_flags(o, tr: DynamicsTrain) -> None:
    """Our flags: conventions, optimizers, seeds, records and the run directory."""
    o.add_argument(
        "--init_convention",
        choices=list(INIT_CONVENTIONS),
        default=tr.init_convention,
        help="; ".join(f"{k}: {v}" for k, v in INIT_CONVENTIONS.items()),
    )
    o.add_argument(
        "--restricted",
        action="store_true",
        help="attnM with the value reading y only and W_KQ reading x only: the same "
        "function as --model mlp --cubic_feat (the README's equality)",
    )
    o.add_argument(
        "--optimizer",
        choices=list(OPTIMIZERS),
        default=tr.optimizer,
        help="gd: full batch (the original's); sgd: minibatches of --batch_size; adam: full batch",
    )
    o.add_argument("--batch_size", type=int_at_least(0), default=0, help="sgd minibatch size")
    o.add_argument("--normalize", action="store_true", help="divide X Xᵀ (and z) by N")
    o.add_argument(
        "--seed", type=seed(), default=0, help="seed of the data and the initialisation (the original's default is 10)"
    )
    o.add_argument(
        "--log_every", type=int_at_least(1), default=tr.log_every, help="epochs between records of the singular values"
    )
    o.add_argument("--float64", action="store_true", help="train in float64")
    o.add_argument(
        "--checkpoint_every",
        type=int_at_least(1),
        default=tr.checkpoint_every,
        help="epochs between checkpoints (for --resume)",
    )
    o.add_argument(
        "--out",
        type=path_text(),
        default=None,
        help="run directory (default: runs/dynamics/ + the original's file name of the run, "
        "e.g. attnS_head9_D8_R4_P80000_N32_seed0[_icl0.8], + our options not at "
        "their defaults, e.g. _init_uniform)",
    )
    o.add_argument("--overwrite", action="store_true", help="replace --out if it is one of our runs")
    o.add_argument("--resume", action="store_true", help="continue --out from its checkpoint")
    o.add_argument("--quiet", action="store_true", help="no progress bar")
    o.add_argument("--skip_analysis", action="store_true", help="do not run the analyses at the end")
    o.add_argument("--choices", action=PrintChoices)


def icl_fraction(text: str) -> float:
    """--icl: a number in [0, 1]; the README's loop writes `--icl c` for `--icl "$c"`."""
    try:
        return number_in(0.0, 1.0)(text)
    except argparse.ArgumentTypeError as err:
        hint = ' (the README\'s loop writes --icl c; it means --icl "$c")' if text == "c" else ""
        raise argparse.ArgumentTypeError(f"{err}{hint}") from None


def settings_from_args(args: argparse.Namespace) -> DynamicsSettings:
    """The validated settings of the original's flags (UsageError, one line)."""
    if args.out_dim != 1:
        raise UsageError(f"--out_dim={args.out_dim} is not accepted; accepted: 1 (scalar y; the original's default)")
    entry = registry("dynamics_model").get(SEED_MODELS[args.model])
    fields = {f.name for f in dataclasses.fields(entry.options)}
    refuse_model_flags(args, entry.options, fields)
    options = {
        "heads": args.head,
        **({"rank": args.rank} if "rank" in fields else {}),
        **({"restricted": True} if args.restricted else {}),
    }
    task = DynamicsTaskConfig(
        in_dim=args.in_dim,
        seq_len=args.seq_len,
        trainset_size=args.trainset_size,
        testset_size=args.testset,
        white_cov=args.white_cov,
        icl=args.icl,
        seed=args.seed,
    )
    tr = DynamicsTrain(
        epochs=args.epoch,
        learning_rate=args.lr,
        optimizer=args.optimizer,
        batch_size=args.batch_size,
        init=args.init,
        init_convention=args.init_convention,
        seed=args.seed,
        log_every=args.log_every,
        normalize=args.normalize,
        float64=args.float64,
        checkpoint_every=args.checkpoint_every,
        vary_len=args.vary_len,
        track_value=args.track_value,
        softmax=args.softmax,
    )
    settings = DynamicsSettings(
        task=task, model=choice("dynamics_model", entry.name, **options), train=tr, show=args.show
    )
    return validated(settings, FLAGS)


def refuse_model_flags(args: argparse.Namespace, options: type, fields: set[str]) -> None:
    """UsageError (one line) for a flag the chosen model (its options class, with these `fields`) does not take."""
    if args.softmax and getattr(options, "reads_cubic_feature", False):
        raise UsageError(
            f"--softmax has no effect with --model {args.model} (the two-layer network has no "
            "attention scores; the original's MLP ignores it); accepted: --model attnM or attnS"
        )
    if getattr(options, "reads_cubic_feature", False) and not args.cubic_feat:
        raise UsageError(
            f"--model {args.model} needs --cubic_feat (the two-layer network reads the "
            f"cubic feature z); accepted: --model {args.model} --cubic_feat"
        )
    if args.cubic_feat and not getattr(options, "reads_cubic_feature", False):
        raise UsageError(
            f"--cubic_feat has no effect with --model {args.model} (only the two-layer network "
            "reads the cubic feature); accepted: --model mlp --cubic_feat, or no --cubic_feat"
        )
    if args.rank != 1 and "rank" not in fields:
        raise UsageError(
            f"--rank={args.rank} has no effect with --model {args.model}; accepted: "
            f"--model {', '.join(m for m, n in SEED_MODELS.items() if 'rank' in _fields(n))}"
        )
    if args.restricted and "restricted" not in fields:
        raise UsageError("--restricted applies to --model attnM; accepted: --model attnM --restricted")


def default_out(settings: DynamicsSettings, args: argparse.Namespace) -> Path:
    """runs/dynamics/<the original's file name of the run>[_icl<c>], as its loops name their
    outputs, plus _<value> for each of our own options not at its default."""
    name = original_file_id(settings) + (f"_icl{float(args.icl)}" if args.testset else "")
    words = changed_flags(args, build_parser().parse_args([]), OUR_NAMED_FLAGS)
    return Path("runs/dynamics") / "_".join([name, *words])


# our options that change a run: dest -> its word in the default run name
OUR_NAMED_FLAGS = {
    "init_convention": "init_",
    "restricted": "restricted",
    "optimizer": "",
    "batch_size": "batch",
    "normalize": "normalized",
    "float64": "float64",
    "vary_len": "vary_len",
    "track_value": "track_value",
    "softmax": "softmax",
}


def _fields(model: str) -> set[str]:
    return {f.name for f in dataclasses.fields(registry("dynamics_model").get(model).options)}


# our settings -> the original's flags, for messages
FLAGS = {
    "task.in_dim": "--in_dim",
    "task.seq_len": "--seq_len",
    "task.trainset_size": "--trainset_size",
    "task.icl": "--icl",
    "model.options.heads": "--head_num",
    "model.options.rank": "--rank",
    "train.epochs": "--epoch",
    "train.learning_rate": "--lr",
    "train.init": "--init",
    "train.batch_size": "--batch_size",
    "train.optimizer": "--optimizer",
    "train.log_every": "--log_every",
    "train.seed": "--seed",
    "task.seed": "--seed",
    "train.checkpoint_every": "--checkpoint_every",
    "train.init_convention": "--init_convention",
    "task.testset_size": "--testset_size",
    "train.vary_len": "--vary_len",
    "train.track_value": "--track_value",
    "train.softmax": "--softmax",
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except UsageError as err:
        return fail(PROG, err)
    out = Path(args.out) if args.out else default_out(settings, args)
    return train_from_args(PROG, settings, out, args, runner=RUNNER, argv=argv)
