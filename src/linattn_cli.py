"""The command line of the training-dynamics study (seed 003): the seed's `python train.py`
flags, as `python -m runners.linattn`, -> DynamicsSettings -> train -> run directory -> the
dynamics analysis.

    python -m runners.linattn --model attnM --head 8 --init 1e-6 --show
    python -m runners.linattn --model mlp --cubic_feat --head 8 --init 1e-6 --show
    python -m runners.linattn --model attnS --head 5 --init 1e-2 --epoch 10001 --lr 0.02 --show
    python -m runners.linattn --model attnS --head 9 --KQ_dim 1 --in_dim 8 --seq_len 32 ...

Run directory: config.json, metrics.jsonl (one row per log interval), metrics_summary.json,
params.npz, dynamics.npz (loss and test losses at every epoch, singular values of every
head's W_KQ and the per-head principal-component diagonals at every log point),
analysis/dynamics.json|png, and figs/loss.png with --show (written, never shown).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from src import rundir as names
from src.cli import (OneLineParser, PrintChoices, UsageError, fail, int_at_least, number_in,
                     positive_number, seed)
from src.dynamics_train import (OPTIMIZERS, DynamicsSettings, DynamicsTrainConfig, Trajectory,
                                train, validate)
from src.pipeline import run_analyses
from src.provenance import run_record
from src.registry import choice
from src.rundir import RunDir, RunDirError, interrupted_note, will_replace
from src.tasks.linattn import DynamicsTaskConfig

PROG = "python -m runners.linattn"
RUNNER = "runners.linattn"
# The seed's --model names and the registered models they mean.
SEED_MODELS = {"attnM": "attn_merged", "attnS": "attn_separate", "mlp": "cubic_mlp"}


def build_parser() -> argparse.ArgumentParser:
    task, tr = DynamicsTaskConfig(), DynamicsTrainConfig()
    p = OneLineParser(prog=PROG, description=__doc__.splitlines()[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("the seed's flags (python train.py ...)")
    g.add_argument("--model", choices=list(SEED_MODELS), default="attnM",
                   help="attnM = ATTN_M (merged W_KQ), attnS = ATTN_S (separate W_K, W_Q), "
                        "mlp = 2-layer linear network on the cubic feature (needs --cubic_feat)")
    g.add_argument("--cubic_feat", action="store_true", help="the MLP reads the cubic feature z")
    g.add_argument("--head", type=int_at_least(1), default=1, help="heads (hidden units of the MLP)")
    g.add_argument("--rank", "--KQ_dim", dest="rank", type=int_at_least(1), default=1,
                   help="rank R of W_K, W_Q (attnS; the seed's README writes --KQ_dim)")
    g.add_argument("--in_dim", type=int_at_least(1), default=task.in_dim, help="D")
    g.add_argument("--seq_len", type=int_at_least(2), default=task.seq_len,
                   help="tokens per sequence (context pairs + the query)")
    g.add_argument("--init", type=positive_number(), default=tr.init,
                   help="initial parameters ~ init * N(0, 1)")
    g.add_argument("--trainset_size", type=int_at_least(1), default=task.trainset_size, help="P")
    g.add_argument("--epoch", type=int_at_least(1), default=tr.epochs, help="training epochs")
    g.add_argument("--lr", type=positive_number(), default=tr.lr, help="learning rate")
    g.add_argument("--icl", type=number_in(0.0, 1.0), default=task.icl,
                   help="fraction of sequences with their own task vector (the rest share w*)")
    g.add_argument("--testset", "--testset_size", dest="testset", type=int_at_least(0),
                   default=task.testset_size, help="sequences in each test set (in-context, in-weight)")
    g.add_argument("--white_cov", action="store_true", help="x ~ N(0, I/D) instead of eigenvalues ∝ 1..D")
    g.add_argument("--show", action="store_true", help=f"write the loss figure ({names.LOSS_PNG}); no window")
    o = p.add_argument_group("ours")
    o.add_argument("--optimizer", choices=list(OPTIMIZERS), default=tr.optimizer,
                   help="gd: full batch (the seed's); sgd: minibatches of --batch_size; adam: full batch")
    o.add_argument("--batch_size", type=int_at_least(0), default=0, help="sgd minibatch size")
    o.add_argument("--normalize", action="store_true", help="divide X Xᵀ (and z) by N")
    o.add_argument("--seed", type=seed(), default=0, help="seed of the data and the initialisation")
    o.add_argument("--log_every", type=int_at_least(1), default=tr.log_every,
                   help="epochs between records of the singular values")
    o.add_argument("--float64", action="store_true", help="train in float64")
    o.add_argument("--out", default=None, help="run directory (default: runs/linattn_<model>_seed<seed>)")
    o.add_argument("--overwrite", action="store_true", help="replace --out if it is one of our runs")
    o.add_argument("--quiet", action="store_true", help="no progress lines")
    o.add_argument("--choices", action=PrintChoices)
    return p


def settings_from_args(args: argparse.Namespace) -> DynamicsSettings:
    name = SEED_MODELS[args.model]
    if name == "cubic_mlp" and not args.cubic_feat:
        raise UsageError("--model mlp needs --cubic_feat (the two-layer network reads the cubic "
                         "feature z); accepted: --model mlp --cubic_feat")
    if args.rank != 1 and name != "attn_separate":
        raise UsageError(f"--rank={args.rank} has no effect with --model {args.model}; accepted: "
                         "--model attnS")
    options = {"heads": args.head}
    if name == "attn_separate":
        options["rank"] = args.rank
    task = DynamicsTaskConfig(in_dim=args.in_dim, seq_len=args.seq_len,
                              trainset_size=args.trainset_size, testset_size=args.testset,
                              white_cov=args.white_cov, icl=args.icl, seed=args.seed)
    tr = DynamicsTrainConfig(epochs=args.epoch, lr=args.lr, optimizer=args.optimizer,
                             batch_size=args.batch_size, init=args.init, seed=args.seed,
                             log_every=args.log_every, normalize=args.normalize,
                             float64=args.float64)
    settings = DynamicsSettings(task=task, model=choice("dynamics_model", name, **options), train=tr)
    try:
        validate(settings)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return settings


def settings_from_argv(argv: Sequence[str]) -> DynamicsSettings:
    """The settings `python -m runners.linattn ARGV` resolves (UsageError, one line)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = build_parser().parse_args(list(argv))
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        raise UsageError(lines[-1].split("error: ", 1)[-1] if lines else "rejected") from None
    return settings_from_args(args)


def summary_record(settings: DynamicsSettings, result: Trajectory, show: bool) -> dict:
    final = {f"final_{name}_loss": float(v[-1]) if len(v) else None for name, v in result.test.items()}
    outputs = [names.CONFIG, names.METRICS, names.SUMMARY, names.PARAMS, names.DYNAMICS,
               names.DYNAMICS_JSON, names.DYNAMICS_PNG] + ([names.LOSS_PNG] if show else [])
    return {"status": "diverged" if result.diverged else "complete", "message": result.diverged,
            "system": settings.system, "model": settings.model.name, "seed": settings.train.seed,
            "epochs": int(len(result.loss)), "epochs_requested": settings.train.epochs,
            "final_loss": float(result.loss[-1]) if len(result.loss) else None,
            "initial_loss": float(result.loss[0]) if len(result.loss) else None, **final,
            "train_seconds": round(result.seconds, 3),
            "ms_per_epoch": round(1000 * result.seconds / max(1, len(result.loss)), 4),
            "outputs": outputs}


def loss_figure(result: Trajectory, title: str):
    from plots.style import new_figure
    fig = new_figure(6.5, 4.2, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(np.arange(1, len(result.loss) + 1), result.loss, label="training loss")
    for name, values in result.test.items():
        ax.plot(np.arange(1, len(values) + 1), values, label=f"{name} loss", lw=1)
    ax.set_xlabel("epoch (full-batch updates)")
    ax.set_ylabel("mean (ŷ − y)²")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return fig


def execute(settings: DynamicsSettings, out: Path, *, overwrite: bool, show: bool,
            argv: Sequence[str], progress: bool = True) -> tuple[RunDir, Trajectory]:
    """Train and write a complete run directory (out checked beforehand)."""
    from plots.style import png_bytes
    with RunDir.create(out, overwrite=overwrite) as run:   # replaces an old run only on success
        run.write_json(names.CONFIG, run_record(settings.to_dict(), RUNNER, argv, out))
        logger = run.metrics_logger()
        step = max(settings.train.log_every, settings.train.epochs // 20)

        def on_chunk(epoch: int, loss: float) -> None:
            if epoch % step < settings.train.log_every or epoch == settings.train.epochs:
                logger.log({"epoch": epoch, "train_loss": loss})
                if progress:
                    print(f"  epoch {epoch}: loss {loss:.5f}", file=sys.stderr)

        result = train(settings, on_chunk=on_chunk)
        run.save_params({"model": result.params})   # params.npz keys model/<name>
        run.write_npz(names.DYNAMICS, {"loss": result.loss, "log_epochs": result.log_epochs,
                                       "singular_values": result.singular_values,
                                       "gamma_diag": result.gamma_diag,
                                       **{f"{name}_loss": v for name, v in result.test.items()}})
        if show:
            run.write_bytes(names.LOSS_PNG, png_bytes(loss_figure(result, f"{out.name} ({settings.model.name})")))
        run.write_json(names.SUMMARY, summary_record(settings, result, show))
        if not result.diverged:
            run_analyses(run, settings, with_attention=False)
    return run, result


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
        out = Path(args.out or f"runs/linattn_{args.model}_seed{args.seed}")
        RunDir.check_creatable(out, args.overwrite)
    except (UsageError, RunDirError) as err:
        return fail(PROG, err)
    replacing = will_replace(out)
    try:
        run, result = execute(settings, out, overwrite=args.overwrite, show=args.show, argv=argv,
                              progress=not args.quiet)
    except KeyboardInterrupt:
        print("\n" + interrupted_note(out, replacing), file=sys.stderr)
        return 130
    if result.diverged:
        print(f"{PROG}: training stopped: {result.diverged}", file=sys.stderr)
        return 1
    summary = run.load_json(names.SUMMARY)
    dynamics = run.load_json(names.DYNAMICS_JSON)
    print(f"{settings.model.name}: {summary['epochs']} epochs in {summary['train_seconds']:.1f}s "
          f"({summary['ms_per_epoch']:.3f} ms/epoch) | loss {summary['initial_loss']:.4f} -> "
          f"{summary['final_loss']:.4f} | {len(dynamics['drops'])} drop(s) at epochs "
          f"{[d['epoch'] for d in dynamics['drops']]} -> {run.path}")
    return 0
