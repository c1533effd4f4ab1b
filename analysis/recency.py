"""Recency bias of a `gpt2`-family run (the length study's `avg_attention_score.png`): how the attention
of the prediction token (the last x token) spreads over the prompt, per layer, at the trained
length and at `factor` × it.

    python -m analysis.recency --run runs/<exp> [--factor 4] [--bins 10]

Per layer, keys are binned by normalised position s / (T − 1) ∈ [0, 1]; a bin's value is the
mean attention weight per key in it relative to uniform attention (× T keys), averaged over
heads and eval tasks: 1 everywhere is uniform, a rise at the right end is a recency bias.
`last_20pct` is the attention mass on the last 20 % of the keys (uniform: 0.2). Only mixers
that form softmax weights can be read (softmax_causal, local, mqa); a learned absolute table
skips lengths past it. A model not trained enough to judge (analysis.length_gen.judge) is
marked so (`trained_enough`, `verdict`) and the study states no recency claim for it. Writes analysis/recency.json,
analysis/recency.csv and
analysis/avg_attention_score.png.

Glossary: L layers, B eval tasks, H heads, T tokens (2 × points).
"""

from __future__ import annotations

import sys

import haiku as hk
import jax
import numpy as np

from analysis.common import AnalysisError, analysis_command, on_request, pairs_of, register_analysis
from analysis.icl_curve import factor_flag, load_run, points_limit
from plots.style import new_figure, png_bytes
from src import rundir as names
from src.flags import int_at_least
from src.process import guarded
from src.rundir import RunDir

MODULE = "analysis.recency"
TAIL = 0.2  # the share of the prompt whose attention mass `last_20pct` reports


def _forms_softmax_weights(mixer: str) -> bool:
    from src.registry import registry

    return bool(getattr(registry("seq_mixer").get(mixer).build, "forms_softmax_weights", False))


def applies(settings) -> bool:
    """Whether every layer's sequence mixer forms softmax weights to read (its registry entry says)."""
    return all(_forms_softmax_weights(m.name) for m in settings.model.layer_mixers())


def attention_weights(settings, params, state, xs, ys) -> np.ndarray:
    """[L, B, H, T, T] softmax weights of every layer (query t, key s) on the prompt xs, ys."""
    from src.models.mixers.attention import recording_attention
    from src.models.sequence import SequenceModel

    transformed = hk.without_apply_rng(hk.transform_with_state(lambda x, y: SequenceModel(settings.model)(x, y)))
    with recording_attention():
        _, recorded = jax.jit(transformed.apply)(params, state, xs, ys)
    root = settings.model.preset
    layers = [
        recorded[f"{root}/block_{i}/seq_mixer"]["attention_weights"]
        for i in range(settings.model.n_layer)
        if "attention_weights" in recorded.get(f"{root}/block_{i}/seq_mixer", {})
    ]
    if len(layers) != settings.model.n_layer:
        from src.registry import registry

        accepted = [m for m in registry("seq_mixer").names() if _forms_softmax_weights(m)]
        raise AnalysisError(
            f"the mixer {settings.model.mixer_label()!r} forms no softmax weights to "
            f"read; accepted: {', '.join(accepted)}"
        )
    return np.stack([np.asarray(w) for w in layers])


def recency_profile(weights: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """From [L, B, H, T, T]: (profile [L, bins] — mean weight per key of the last query, relative
    to uniform, by normalised key position — and tail mass [L] on the last TAIL of the keys)."""
    last = weights[:, :, :, -1, :].mean(axis=(1, 2))  # [L, T]
    t = last.shape[-1]
    where = np.minimum((np.arange(t) / max(t - 1, 1) * bins).astype(int), bins - 1)
    profile = np.stack([[row[where == b].mean() * t for b in range(bins)] for row in last])
    tail = last[:, np.arange(t) >= (1 - TAIL) * t].sum(axis=-1)
    return profile, tail


def tail_mass_by_head(weights: np.ndarray) -> np.ndarray:
    """[L, H]: from softmax weights [L, B, H, T, T], the last query's attention mass on the last
    TAIL of the keys, mean over eval tasks (uniform: about TAIL); recency_profile's tail, per head."""
    last = weights[:, :, :, -1, :].mean(axis=1)  # [L, H, T]
    t = last.shape[-1]
    return last[:, :, np.arange(t) >= (1 - TAIL) * t].sum(axis=-1)


def run(run_dir: RunDir, factor: int = 4, bins: int = 10) -> dict:
    from analysis.length_gen import judge

    settings, model, params, state = load_run(run_dir)
    trained = settings.curriculum.points.end
    limit = points_limit(settings)
    out = {
        "position": settings.model.position.name,
        "mixer": settings.model.mixer_label(),
        "task": settings.task.name,
        "trained_points": trained,
        "bins": bins,
        **judge(settings, model, params, state, pairs_of(settings).prompts(trained)),
        "lengths": {},
    }
    for points in dict.fromkeys((trained, factor * trained)):
        if limit is not None and points > limit:
            out["lengths"][str(points)] = {
                "skipped": f"{points} points are past the learned position "
                f"table (n_positions={settings.model.max_tokens // 2})"
            }
            continue
        batch = pairs_of(settings).prompts(points)
        profile, tail = recency_profile(attention_weights(settings, params, state, batch.xs, batch.ys), bins)
        out["lengths"][str(points)] = {"profile": profile.round(6).tolist(), "last_20pct": tail.round(6).tolist()}
    rows = "".join(
        f"{points},{layer},{b},{value:.6g}\n"
        for points, cell in out["lengths"].items()
        if "profile" in cell
        for layer, row in enumerate(cell["profile"])
        for b, value in enumerate(row)
    )
    run_dir.write_text(names.RECENCY_CSV, "points,layer,bin,relative_weight\n" + rows)
    run_dir.write_json(names.RECENCY_JSON, out)
    run_dir.write_bytes(names.RECENCY_PNG, png_bytes(figure(out, run_dir.name)))
    return out


register_analysis(
    "recency",
    run,
    "where the prediction token's attention falls, by relative position (Lin et al.; on request)",
    on_request,
    files=[names.RECENCY_CSV, names.RECENCY_JSON, names.RECENCY_PNG],
)


def figure(summary: dict, title: str):
    cells = {p: c for p, c in summary["lengths"].items() if "profile" in c}
    layers = len(next(iter(cells.values()))["profile"])
    fig = new_figure(3.0 * layers, 3.0, constrained=True)
    centres = (np.arange(summary["bins"]) + 0.5) / summary["bins"]
    for layer in range(layers):
        ax = fig.add_subplot(1, layers, layer + 1)
        for i, (points, cell) in enumerate(cells.items()):
            ax.plot(
                centres,
                cell["profile"][layer],
                marker="o",
                ms=3,
                color=f"C{i}",
                label=f"{points} points (last 20%: {cell['last_20pct'][layer]:.2f})",
            )
        ax.axhline(1.0, color="0.5", ls=":", lw=1)
        ax.set_title(f"layer {layer}", fontsize=9)
        ax.set_xlabel("normalised key position")
        if layer == 0:
            ax.set_ylabel("attention per key / uniform")
        ax.legend(fontsize=6)
    fig.suptitle(f"{title}: {summary['mixer']} + {summary['position']}, attention of the prediction token", fontsize=9)
    return fig


def _flags(parser) -> None:
    factor_flag(parser, 4, "also read the attention at this multiple of the trained points")
    parser.add_argument("--bins", type=int_at_least(2, 100), default=10, help="bins of normalised key position")


def _print(args, run_dir: RunDir) -> None:
    out = run(run_dir, args.factor, args.bins)
    if not out["trained_enough"]:
        print(f"{out['verdict']}: the profile below describes an untrained model")
    for points, cell in out["lengths"].items():
        print(
            f"{points} points: "
            + (
                cell["skipped"]
                if "skipped" in cell
                else "attention mass on the last 20% of the prompt per layer "
                + ", ".join(f"{v:.2f}" for v in cell["last_20pct"])
            )
        )
    print(f"-> {run_dir.file(names.RECENCY_PNG)}")


main = analysis_command(MODULE, __doc__, _flags, _print)


if __name__ == "__main__":
    sys.exit(guarded(main))
