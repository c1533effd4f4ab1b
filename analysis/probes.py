"""Residual-stream probes of the estimator (Akyürek et al., ICLR 2023, "What learning algorithm is
in-context learning?"), for any run that exposes its hidden states at the query of a pair prompt
(gpt2 and lm on pair tasks, every read; von Oswald et al.'s lsa models, the query token only).

    python -m analysis.probes --run runs/<exp> [--prompts 4000] [--control-run runs/<fixed-w run>]
    python -m analysis.probes --run runs/<exp> --read last_y      # the released code's read: the last y token
    python -m analysis.probes --run runs/<exp> --read y_mean      # pooled over the y tokens

Over fresh prompts of the run's task (N context pairs and a query, at its trained shape), the
hidden state h_l [D] at the query's x token after the read-in (l = 0) and after each layer is
read for every prompt (--read query), or at the last context pair's y token (--read last_y: the
last position of Akyürek et al.'s prompts x_1, y_1 .. x_n, y_n, where their released code,
google-research incontext/probe_flax.py, fits a linear probe per layer), or its mean over the y
tokens of the context pairs from the d-th on (--read y_mean: Akyürek et al.'s probe attends over
every position and, past d examples, spreads uniformly over the y tokens; this reads that mean
directly), and per layer a
probe is fitted on the first 3/4 of the prompts to the targets of the context (X [N, d], y [N]):
  w_ols      the least-squares solution X⁺y (the minimum-norm one when N < d)
  xty        Xᵀy; the one-step-GD vector from zero, (η/N)·Xᵀy, is the same up to a constant, so
             every probe here (targets standardised) scores it exactly as xty
  w          the task vector the prompt was drawn from
Probes: ridge regression in closed form on standardised states, its λ chosen on a validation
fifth of the train split, and a one-hidden-layer MLP (GELU, Adam, full batch). Each is scored on
the held-out quarter by R² = 1 − Σ‖t̂ − t‖² / Σ‖t − t̄‖² (pooled over the d coordinates). Controls,
the same probes: the model at its initial parameters (untrained), and, with --control-run, a
model trained on a task with one fixed w (gpt2's `train.num_tasks=1`), on the same prompts.
Writes analysis/probes.json and analysis/probes.png (--read last_y: probes_last_y.json and .png;
--read y_mean: probes_y_mean.json and .png).

Glossary: L layers, E prompts, N context pairs, d input dimensions, D width, K targets' width (d).
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

from analysis.common import AnalysisError, analysis_command, on_request, register_analysis
from plots.style import new_figure, png_bytes
from src import rundir as names
from src.flags import int_at_least
from src.optim import Optimizer, gradient_step, make_optimizer
from src.process import guarded
from src.read_side import HIDDEN_READ_WORDS, HIDDEN_READS, ExposesHiddenStates, has, read_side, systems_with
from src.rundir import RunDir

MODULE = "analysis.probes"
TARGETS = ("w_ols", "xty", "w")
RIDGE_LAMBDAS = tuple(10.0**k for k in range(-6, 4))  # × the number of train rows (standardised states)
MLP_STEPS = 1500
MLP_RATE = 3e-3
TRAIN_FRACTION = 0.75


def targets_of(context_x: np.ndarray, context_y: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
    """{name: [E, d]} from context_x [E, N, d], context_y [E, N] and the task vectors w [E, d]."""
    x, y = np.asarray(context_x, np.float64), np.asarray(context_y, np.float64)
    return {
        "w_ols": np.einsum("edn,en->ed", np.linalg.pinv(x), y),
        "xty": np.einsum("end,en->ed", x, y),
        "w": np.asarray(w, np.float64),
    }


def r_squared(predicted: np.ndarray, target: np.ndarray) -> float:
    """1 − Σ‖t̂ − t‖² / Σ‖t − t̄‖² over rows [E, K] (t̄ the rows' mean); nan when t does not vary."""
    total = np.sum((target - target.mean(axis=0)) ** 2)
    return float(1.0 - np.sum((predicted - target) ** 2) / total) if total > 0 else float("nan")


def standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Each array centred and scaled by the train rows' mean and standard deviation per column
    (a constant column is left at zero)."""
    mean, std = train.mean(axis=0), train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return [(a - mean) / std for a in (train, *others)]


def ridge_fit(features: np.ndarray, target: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """(A [D, K], b [K]) minimising ‖features A + b − target‖² + lam·‖A‖² (closed form, centred)."""
    f_mean, t_mean = features.mean(axis=0), target.mean(axis=0)
    f, t = features - f_mean, target - t_mean
    a = np.linalg.solve(f.T @ f + lam * np.eye(f.shape[1]), f.T @ t)
    return a, t_mean - f_mean @ a


def ridge_probe(train_h: np.ndarray, train_t: np.ndarray, test_h: np.ndarray, test_t: np.ndarray) -> dict:
    """{r2, lambda}: ridge on standardised states, λ (× train rows) chosen on the last fifth of the
    train rows, refitted on all of them, scored on the test rows."""
    train_h, test_h = standardise(train_h, test_h)
    cut = int(0.8 * len(train_h))
    scores = []
    for lam in RIDGE_LAMBDAS:
        a, b = ridge_fit(train_h[:cut], train_t[:cut], lam * cut)
        scores.append(r_squared(train_h[cut:] @ a + b, train_t[cut:]))
    lam = RIDGE_LAMBDAS[int(np.nanargmax(scores))] if not np.all(np.isnan(scores)) else RIDGE_LAMBDAS[0]
    a, b = ridge_fit(train_h, train_t, lam * len(train_h))
    return {"r2": r_squared(test_h @ a + b, test_t), "lambda": lam}


def mlp_probes(train_h: np.ndarray, train_t: np.ndarray, test_h: np.ndarray, hidden: int, seed: int) -> np.ndarray:
    """Test predictions [P, E_test, K] of P one-hidden-layer MLPs (GELU, `hidden` units), one per
    leading slice of train_h [P, E_train, D] → train_t [P, E_train, K] (standardised both ways),
    trained full batch by Adam for MLP_STEPS steps from a start drawn with key `seed`."""
    standard = [standardise(h, g) for h, g in zip(train_h, test_h)]
    x_train = jnp.asarray(np.stack([s[0] for s in standard]), jnp.float32)
    x_test = jnp.asarray(np.stack([s[1] for s in standard]), jnp.float32)
    t_mean, t_std = train_t.mean(axis=1, keepdims=True), train_t.std(axis=1, keepdims=True)
    t_std = np.where(t_std > 0, t_std, 1.0)
    t_train = jnp.asarray((train_t - t_mean) / t_std, jnp.float32)
    width, outputs = x_train.shape[-1], t_train.shape[-1]
    optimizer = make_optimizer(Optimizer("adam", MLP_RATE), MLP_STEPS)

    def init(key):
        k1, k2 = jax.random.split(key)
        return {
            "w1": jax.random.normal(k1, (width, hidden)) / np.sqrt(width),
            "b1": jnp.zeros(hidden),
            "w2": jax.random.normal(k2, (hidden, outputs)) / np.sqrt(hidden),
            "b2": jnp.zeros(outputs),
        }

    def apply(p, x):
        return jax.nn.gelu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    def fit(key, x, t, x_new):
        params = init(key)

        update = gradient_step(lambda q: jnp.mean((apply(q, x) - t) ** 2), optimizer)

        def step(carry, _):
            return update(*carry)[:2], None

        (params, _), _ = jax.lax.scan(step, (params, optimizer.init(params)), None, length=MLP_STEPS)
        return apply(params, x_new)

    keys = jax.random.split(jax.random.key(seed), x_train.shape[0])
    predicted = jax.jit(jax.vmap(fit))(keys, x_train, t_train, x_test)
    return np.asarray(predicted, np.float64) * t_std + t_mean


def probe_layers(hidden: np.ndarray, targets: dict[str, np.ndarray], mlp_hidden: int, seed: int) -> dict:
    """{"ridge": {target: [R² per layer]}, "mlp": {...}, "ridge_lambda": {...}} of hidden [L + 1, E, D]."""
    cut = int(TRAIN_FRACTION * hidden.shape[1])
    out: dict = {"ridge": {}, "ridge_lambda": {}, "mlp": {}}
    for name, target in targets.items():
        fits = [ridge_probe(h[:cut], target[:cut], h[cut:], target[cut:]) for h in hidden]
        out["ridge"][name] = [round(f["r2"], 6) for f in fits]
        out["ridge_lambda"][name] = [f["lambda"] for f in fits]
        if mlp_hidden:
            layers = hidden.shape[0]
            predicted = mlp_probes(
                hidden[:, :cut],
                np.broadcast_to(target[:cut], (layers, *target[:cut].shape)),
                hidden[:, cut:],
                mlp_hidden,
                seed,
            )
            out["mlp"][name] = [round(r_squared(p, target[cut:]), 6) for p in predicted]
    return out


def best_layers(fits: dict) -> dict:
    """{target: {layer, r2}}: each target's best layer by the ridge probe."""
    return {name: {"layer": int(np.nanargmax(r2)), "r2": float(np.nanmax(r2))} for name, r2 in fits["ridge"].items()}


def hidden_side(run_dir: RunDir):
    settings = run_dir.load_settings(*systems_with(ExposesHiddenStates))
    if not has(ExposesHiddenStates, settings):
        raise AnalysisError(
            f"{run_dir.path}: its task {settings.task.name!r} has no (x, y) pairs; accepted: a run of "
            f"{' or '.join(map(repr, systems_with(ExposesHiddenStates)))} on a pair task"
        )
    return settings, read_side(ExposesHiddenStates, settings)


FILES = {
    "query": (names.PROBES_JSON, names.PROBES_PNG),
    "last_y": (names.PROBES_LAST_Y_JSON, names.PROBES_LAST_Y_PNG),
    "y_mean": (names.PROBES_Y_MEAN_JSON, names.PROBES_Y_MEAN_PNG),
}


def run(
    run_dir: RunDir,
    prompts: int = 4000,
    control_run: RunDir | None = None,
    mlp_hidden: int = 64,
    seed: int = 0,
    read: str = "query",
) -> dict:
    settings, side = hidden_side(run_dir)
    if read not in side.reads:
        raise AnalysisError(
            f"--read {read}: {run_dir.path}'s {settings.system} model exposes no such read; accepted: "
            + ", ".join(side.reads)
        )
    prompt = side.fresh_prompts(jax.random.key(seed), prompts)
    if prompt.w is None:
        raise AnalysisError(f"the task {settings.task.name!r} draws no task vector w; accepted: a regression task")
    targets = targets_of(prompt.context_x, prompt.context_y, prompt.w)
    sources = {"trained": (side, side.restore(run_dir)), "untrained": (side, side.untrained())}  # name -> (side, model)
    if control_run is not None:
        _, control = hidden_side(control_run)
        if control.fresh_prompts(jax.random.key(seed), 1).xs.shape[1:] != prompt.xs.shape[1:]:
            raise AnalysisError(
                f"--control-run {control_run.path}: trained on prompts of another shape; accepted: a run of "
                f"{prompt.xs.shape[1]} points in {prompt.xs.shape[2]} dimensions"
            )
        sources["fixed_w"] = (control, control.restore(control_run))
        fixed_w_pool = getattr(control, "pool_size", lambda: None)()
    fits = {
        name: probe_layers(reader.hidden_states(restored, prompt, read), targets, mlp_hidden, seed)
        for name, (reader, restored) in sources.items()
    }
    out = {
        **side.describe(),
        "read": read,
        "prompts": prompts,
        "train_prompts": int(TRAIN_FRACTION * prompts),
        "points": int(prompt.xs.shape[1]),
        "dims": int(prompt.xs.shape[2]),
        "mlp_hidden": mlp_hidden,
        "targets": list(TARGETS),
        "probes": fits,
        "best": {name: best_layers(f) for name, f in fits.items()},
    }
    if control_run is not None:
        out["fixed_w_run"] = {"path": str(control_run.path), "pool_size": fixed_w_pool}
    json_file, png_file = FILES[read]
    run_dir.write_json(json_file, out)
    run_dir.write_bytes(png_file, png_bytes(figure(out, run_dir.name)))
    return out


register_analysis(
    "probes",
    run,
    "ridge and MLP probes of w_OLS, Xᵀy and w from the residual stream at the query, per layer (Akyürek et al.; "
    "on request)",
    on_request,
    files=[path for pair in FILES.values() for path in pair],
)

LINES = {"trained": "-", "untrained": ":", "fixed_w": "--"}
LABELS = {"trained": "trained", "untrained": "untrained (control)", "fixed_w": "fixed w (control)"}


def figure(summary: dict, title: str):
    fig = new_figure(3.2 * len(summary["targets"]), 3.2, constrained=True)
    for i, target in enumerate(summary["targets"]):
        ax = fig.add_subplot(1, len(summary["targets"]), i + 1)
        for source, fits in summary["probes"].items():
            layers = np.arange(len(fits["ridge"][target]))
            ax.plot(layers, fits["ridge"][target], LINES[source], color="C0", label=f"ridge, {LABELS[source]}")
            if fits["mlp"]:
                ax.plot(layers, fits["mlp"][target], LINES[source], color="C1", label=f"MLP, {LABELS[source]}")
        ax.set_ylim(-0.1, 1.02)
        ax.set_xlabel("layer (0: read-in)")
        ax.set_ylabel("held-out R²")
        ax.set_title({"w_ols": "w_OLS", "xty": "Xᵀy (= one GD step)", "w": "true w"}[target], fontsize=9)
        if i == 0:
            ax.legend(fontsize=6)
    fig.suptitle(
        f"{title}: {summary['mixer']} on {summary['task']}, d = {summary['dims']}, {summary['points']} points; "
        f"read {HIDDEN_READ_WORDS[summary.get('read', 'query')]}",
        fontsize=8,
    )
    return fig


def _flags(parser) -> None:
    parser.add_argument("--prompts", type=int_at_least(40, 1_000_000), default=4000, help="fresh prompts probed")
    parser.add_argument("--control-run", default=None, help="a run trained on one fixed w (the fixed-w control)")
    parser.add_argument(
        "--mlp-hidden", type=int_at_least(0, 4096), default=64, help="the MLP probe's hidden units (0: no MLP)"
    )
    parser.add_argument(
        "--read",
        choices=HIDDEN_READS,
        default="query",
        help="where the states are read: the query's x token, the last context pair's y token, or the mean over "
        "the y tokens from the d-th pair",
    )


def _print(args, run_dir: RunDir) -> None:
    control = RunDir(args.control_run) if args.control_run else None
    if control is not None and not control.exists(names.SUMMARY):
        raise AnalysisError(f"--control-run {args.control_run}: not a finished run ({names.SUMMARY} missing)")
    out = run(run_dir, args.prompts, control, args.mlp_hidden, read=args.read)
    for source, best in out["best"].items():
        cells = ", ".join(f"{t} {b['r2']:.3f} (layer {b['layer']})" for t, b in best.items())
        print(f"{source}: best ridge R²: {cells}")
    print(f"-> {run_dir.file(FILES[args.read][1])}")


main = analysis_command(MODULE, __doc__, _flags, _print)


if __name__ == "__main__":
    sys.exit(guarded(main))
