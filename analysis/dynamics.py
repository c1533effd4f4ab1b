"""Plateaus and abrupt drops of a loss trajectory, against the principal-component theory
(the training-dynamics study, Zhang et al., ICML 2025).

    python -m analysis.dynamics --run runs/<exp>

The rule (stated once, used everywhere):
  - epoch t is *flat* when the loss changes by less than 2 % (relative) over the next
    w(t) = max(5, 0.1·t) epochs (drops are abrupt on a logarithmic time axis, so the window
    grows with t);
  - a *plateau* is a maximal run of flat epochs (extended by its last window) lasting at least
    max(15, 0.25·start) epochs; its level is the median loss over it; consecutive plateaus
    whose levels differ by less than 5 % (relative) are one plateau;
  - a *drop* is the passage from one plateau to the next lower one; its epoch is the first
    epoch whose loss is below the geometric mean of the two levels. A run that starts falling
    before its first plateau, or ends still falling after its last, has a drop from the initial
    loss or to the final loss (more than 5 % away; `to_plateau` None).
Theory: the loss of least squares restricted to the top-m principal directions of Λ,
m = 0..D — the best predictor ŷ = Σ_{i,j<=m} A_ij x_q,i h_j with h = Σ_n y_n x_n, fitted on
the training set (m = D is least squares on the full cubic feature z). Each plateau is
matched to the nearest theory level. The time-course of principal component i is the
strength Σ_h |v_h,y (W_KQ,h)_ii| over the heads (dynamics.npz `gamma_diag` holds the per-head
diagonals); its rise epoch is when it first reaches half of its value at the start of the last
plateau (drift along flat directions after convergence does not count).

Softmax attention (the original's --softmax) is not the linear model these levels and
loadings belong to: its record has the plateaus and drops without the theory (no
`theory_levels`, `component_rise_epochs`; its dynamics.npz has no `gamma_diag`).

Writes analysis/dynamics.json and analysis/dynamics.png (loss with the theory levels;
singular values of every head's W_KQ over training).
"""

from __future__ import annotations

import sys

import numpy as np

from analysis.common import AnalysisError, analysis_command, for_capability, register_analysis, settings_with
from src.read_side import TracksDynamics
from plots.style import new_figure, png_bytes
from src import rundir as names
from src.rundir import RunDir
from src.tasks.dynamics import DynamicsTaskConfig, SequenceSet, input_eigenvalues, make_sets

MODULE = "analysis.dynamics"
RULE = (
    "flat: |L(t+w) - L(t)| < 2 % L(t), w = max(5, 0.1 t); plateau: a run of flat epochs (plus its last "
    "window) lasting >= max(15, 0.25 start) epochs, level = median, merged within 5 %; drop epoch: first "
    "loss below the geometric mean of two consecutive plateau levels (or of the initial / final loss when "
    "the run starts / ends falling)"
)


def plateaus(
    loss: np.ndarray,
    window_fraction: float = 0.1,
    min_window: int = 5,
    flat_tol: float = 0.02,
    min_fraction: float = 0.25,
    min_epochs: int = 15,
    merge_tol: float = 0.05,
) -> list[dict]:
    """[{start, end, level}] of a loss trajectory [E] (the rule in the module docstring):
    epoch t is flat when |L(t + w) − L(t)| < flat_tol · L(t) with w = max(min_window,
    window_fraction · t) (drops are abrupt on a logarithmic time axis, so the window grows
    with t); a plateau is a run of flat epochs lasting at least max(min_epochs,
    min_fraction · start)."""
    loss = np.asarray(loss, dtype=np.float64)
    epochs = np.arange(len(loss))
    ahead = epochs + np.maximum(min_window, (window_fraction * epochs).astype(int))
    valid = ahead < len(loss)
    flat = np.zeros(len(loss), bool)
    here = loss[valid]
    flat[valid] = np.abs(loss[ahead[valid]] - here) < flat_tol * np.maximum(np.abs(here), 1e-30)
    runs, start = [], None
    for epoch, is_flat in enumerate(np.append(flat, False)):
        if is_flat and start is None:
            start = epoch
        elif not is_flat and start is not None:
            end = min(epoch - 1 + int(ahead[epoch - 1] - (epoch - 1)), len(loss) - 1)
            if end - start + 1 >= max(min_epochs, min_fraction * start):
                runs.append({"start": start, "end": end, "level": float(np.median(loss[start : end + 1]))})
            start = None
    merged: list[dict] = []
    for run in runs:
        if merged and abs(run["level"] - merged[-1]["level"]) <= merge_tol * merged[-1]["level"]:
            merged[-1]["end"] = run["end"]
            merged[-1]["level"] = float(np.median(loss[merged[-1]["start"] : run["end"] + 1]))
        else:
            merged.append(run)
    return merged


def drops(loss: np.ndarray, found: list[dict], merge_tol: float = 0.05) -> list[dict]:
    """[{epoch, from_level, to_level, from_plateau, to_plateau}] for every fall between
    consecutive levels: the plateaus, preceded by the initial loss when training starts by
    falling and followed by the final loss when it ends still falling (more than `merge_tol`
    from the nearest plateau; its plateau index is then None), so a run whose loss falls always
    reports the fall."""
    loss = np.asarray(loss, dtype=np.float64)
    if not len(loss):
        return []
    levels = [dict(p, index=i) for i, p in enumerate(found)]
    if not levels or (levels[0]["start"] > 0 and loss[0] > (1 + merge_tol) * levels[0]["level"]):
        levels.insert(0, {"start": 0, "end": 0, "level": float(loss[0]), "index": None})
    last = len(loss) - 1
    if levels[-1]["end"] < last and loss[-1] < (1 - merge_tol) * levels[-1]["level"]:
        levels.append({"start": last, "end": last, "level": float(loss[-1]), "index": None})
    out = []
    for a, b in zip(levels, levels[1:]):
        if b["level"] >= a["level"]:
            continue
        middle = np.sqrt(a["level"] * b["level"])
        below = np.nonzero(loss[a["end"] : b["start"] + 1] < middle)[0]
        epoch = int(a["end"] + below[0]) if below.size else int(b["start"])
        out.append(
            {
                "epoch": epoch,
                "from_level": a["level"],
                "to_level": b["level"],
                "from_plateau": a["index"],
                "to_plateau": b["index"],
            }
        )
    return out


def principal_levels(data: SequenceSet, task: DynamicsTaskConfig) -> list[float]:
    """Loss of least squares on the top-m principal directions, m = 0..D (MSE, the set's)."""
    eig = input_eigenvalues(task.in_dim, task.white_cov)
    order = np.argsort(-eig, kind="stable")  # axes by decreasing eigenvalue
    x, y = data.tokens[:, :-1, :-1], data.tokens[:, :-1, -1]
    h = np.einsum("pn,pnd->pd", y, x)[:, order]
    query = data.tokens[:, -1, :-1][:, order]
    target = data.targets
    levels = [float(np.mean(target**2))]
    for m in range(1, task.in_dim + 1):
        feats = np.einsum("pi,pj->pij", query[:, :m], h[:, :m]).reshape(len(target), -1)
        coef, *_ = np.linalg.lstsq(feats, target, rcond=None)
        levels.append(float(np.mean((feats @ coef - target) ** 2)))
    return levels


def rise_epochs(log_epochs: np.ndarray, gamma_diag: np.ndarray, order: np.ndarray, reference_epoch: int) -> list:
    """Per principal component (by decreasing eigenvalue), from the per-head diagonals
    gamma_diag [K, H, D]: the first logged epoch at which the strength Σ_h |.| reaches half of its magnitude at
    `reference_epoch` (the start of the last plateau,
    when the loss has converged; later drift along flat directions does not count), or None
    if it never grew there (to 10x its initial magnitude)."""
    ref = int(np.searchsorted(log_epochs, reference_epoch))
    ref = min(ref, len(log_epochs) - 1)
    strength = np.abs(np.asarray(gamma_diag)).sum(axis=1)  # [K, D]
    out = []
    for axis in order:
        series = strength[:, axis]
        target = series[ref]
        hit = np.nonzero(series[: ref + 1] >= 0.5 * target)[0] if target > 10 * series[0] else []
        out.append(int(log_epochs[hit[0]]) if len(hit) else None)
    return out


def analyse(loss, log_epochs, singular_values, gamma_diag, data: SequenceSet, task: DynamicsTaskConfig) -> dict:
    """The dynamics.json record; gamma_diag None (softmax attention): without the linear
    model's theory levels and component rise epochs."""
    found = plateaus(loss)
    theory = principal_levels(data, task) if gamma_diag is not None else []
    for plateau in found if theory else ():
        m = int(np.argmin([abs(plateau["level"] - t) for t in theory]))
        plateau.update(theory_m=m, theory_level=theory[m], difference=plateau["level"] - theory[m])
    record = {
        "rule": RULE,
        "epochs": int(len(loss)),
        "final_loss": float(loss[-1]) if len(loss) else None,
        "plateaus": found,
        "drops": drops(loss, found),
    }
    eigenvalues = input_eigenvalues(task.in_dim, task.white_cov)
    if gamma_diag is None:
        return {
            **record,
            "eigenvalues": eigenvalues.tolist(),
            "theory": "none: softmax attention is not the linear model of the principal-component levels",
        }
    order = np.argsort(-eigenvalues, kind="stable")
    return {
        **record,
        "theory_levels": theory,
        "eigenvalues": eigenvalues.tolist(),
        "component_rise_epochs": rise_epochs(
            np.asarray(log_epochs), np.asarray(gamma_diag), order, found[-1]["start"] if found else len(loss)
        ),
    }


def figure(loss, log_epochs, singular_values, record: dict, title: str):
    fig = new_figure(11, 4.2, constrained=True)
    ax = fig.add_subplot(1, 2, 1)
    epochs = np.arange(1, len(loss) + 1)
    ax.plot(epochs, loss, color="C0", lw=1.5, label="training loss (MSE)")
    for m, level in enumerate(record.get("theory_levels", [])):
        ax.axhline(level, color="0.5", ls=":", lw=1)
        ax.text(epochs[-1], level, f" m={m}", va="center", fontsize=7, color="0.3")
    for drop in record["drops"]:
        ax.axvline(drop["epoch"] + 1, color="C3", lw=0.8, alpha=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("epoch (full-batch updates), log scale")
    ax.set_ylabel("loss: mean (ŷ − y)² (squared label units)")
    ax.set_title(
        "loss; dotted: least squares on the top-m principal directions;\nred: drops"
        if "theory_levels" in record
        else "loss (softmax attention: no principal-component levels);\nred: drops",
        fontsize=9,
    )
    ax = fig.add_subplot(1, 2, 2)
    sv = np.asarray(singular_values)  # [K, H, n]
    for head in range(sv.shape[1]):
        for k in range(sv.shape[2]):
            ax.plot(
                np.maximum(log_epochs, 1),
                sv[:, head, k],
                lw=1,
                color=f"C{head % 10}",
                label=f"head {head}" if k == 0 else None,
            )
    ax.set_xscale("log")
    ax.set_xlabel("epoch, log scale")
    ax.set_ylabel("singular values of W_KQ (per head)")
    ax.set_title("key-query singular values over training", fontsize=9)
    if sv.shape[1] <= 10:
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def load_dynamics(run_dir: RunDir) -> tuple[dict, object]:
    """(dynamics.npz arrays, settings) of a run of system `dynamics` (python -m runners.dynamics)."""
    settings = settings_with(run_dir, TracksDynamics)  # Missing/CorruptArtifact, WrongSystem: one line
    arrays = run_dir.load_arrays(names.DYNAMICS)
    needed = ("loss", "log_epochs", "singular_values") + (() if settings.train.softmax else ("gamma_diag",))
    missing = [k for k in needed if k not in arrays]
    if missing:
        raise AnalysisError(
            f"{run_dir.file(names.DYNAMICS)} has no array {missing[0]!r}; recreate it "
            f"with: {run_dir.producer(names.DYNAMICS)}"
        )
    return arrays, settings


def run(run_dir: RunDir) -> dict:
    """Compute and write analysis/dynamics.json and .png."""
    arrays, settings = load_dynamics(run_dir)
    if len(arrays["loss"]) == 0:
        raise AnalysisError(
            f"{run_dir.path} diverged in its first epoch (no epoch's loss was kept): there "
            "is no loss curve to analyse; accepted: a run that trained at least one epoch "
            "(a smaller --init or --lr)"
        )
    train_set = make_sets(settings.task)["train"]
    record = analyse(
        arrays["loss"],
        arrays["log_epochs"],
        arrays["singular_values"],
        arrays.get("gamma_diag"),
        train_set,
        settings.task,
    )
    png = png_bytes(
        figure(
            arrays["loss"],
            arrays["log_epochs"],
            arrays["singular_values"],
            record,
            f"{run_dir.name} ({settings.model.name})",
        )
    )
    run_dir.write_json(names.DYNAMICS_JSON, record)
    run_dir.write_bytes(names.DYNAMICS_PNG, png)
    return record


register_analysis(
    "dynamics",
    run,
    "plateaus and drops of the loss vs the principal-component theory",
    for_capability(TracksDynamics),
    [names.DYNAMICS_JSON, names.DYNAMICS_PNG],
)


def _print_staircase(args, run_dir) -> None:
    record = run(run_dir)
    for p in record["plateaus"]:
        print(
            f"plateau epochs {p['start']}-{p['end']}: level {p['level']:.4f} "
            f"(theory m={p['theory_m']}: {p['theory_level']:.4f})"
        )
    print(
        "\n".join(f"drop at epoch {d['epoch']}: {d['from_level']:.4f} -> {d['to_level']:.4f}" for d in record["drops"])
    )
    print(f"-> {run_dir.file(names.DYNAMICS_JSON)}")


main = analysis_command(MODULE, __doc__, lambda parser: None, _print_staircase)


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
