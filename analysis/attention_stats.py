"""How much the query token attends to clean vs corrupted context pairs.

    python -m analysis.attention_stats --run runs/<exp>

Reads the saved attention (attn/layer{L}_head{H}.npy, [tasks, queries, keys], the
first tasks of the eval set; needs a run trained with --save_attention) and the
eval noise mask (noise_mask.npy, [E, N], True = corrupted pair, in eval order).
For every layer and head it takes the query token's row (the last query row) and
scores each context pair by its attention magnitude |w| (interleaved tokens: the
mean |w| over the pair's x and ȳ tokens, keys 2i and 2i+1). Pairs of all tasks are
pooled; per class (clean / corrupted) it reports mean, std (ddof 0) and count of
the score, and the AUROC of separating the classes with positive class = clean
(AUROC > 0.5: clean pairs get more attention; ties count ½).

Writes analysis/attention_stats.json
  {"layers": [{"layer", "head", "clean": {"mean","std","count"}, "corrupted": {...},
               "auroc": float|null, "auroc_reason": str|null}, ...],
   "num_tasks": int, "score": str}
and analysis/attention_stats.png (score histograms per layer/head, AUROC in the title).
"""

from __future__ import annotations

import sys
from typing import Mapping, NamedTuple

import numpy as np

from src.gd_paper.models.layouts import layout_of
from analysis.common import AnalysisError, analysis_command, for_capability, register_analysis, settings_with
from src.read_side import ExposesAttention
from plots.style import new_figure, png_bytes, wrapped_title
from src.rundir import names
from src.rundir import RunDir

MODULE = "analysis.attention_stats"
SCORE = (
    "attention magnitude |w| of the query token (last query row) to a context pair, "
    "pooled over pairs and tasks; interleaved tokens: mean |w| over the pair's x and y "
    "tokens; AUROC positive class = clean pairs, ties count 1/2"
)


class Auroc(NamedTuple):
    value: float | None  # P(score_clean > score_corrupted) + ½ P(tie); None if a class is empty
    reason: str | None  # why value is None


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of a 1-D array, ties sharing their average rank: [n] float64. O(n log n)."""
    values = np.asarray(values)
    n = values.shape[0]
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if n else np.zeros(0, int)
    ends = np.r_[starts[1:], n]  # exclusive end of every tie group
    group_rank = (starts + ends + 1) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat(group_rank, ends - starts)
    return ranks


def auroc(scores, labels) -> Auroc:
    """AUROC of `scores` [n] for boolean `labels` [n] (True = positive) via the Mann–Whitney
    rank sum: (R_pos − n_pos(n_pos+1)/2) / (n_pos·n_neg), average ranks for ties."""
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = np.asarray(labels, dtype=bool).ravel()
    if scores.shape != labels.shape:
        raise ValueError(f"scores {scores.shape} and labels {labels.shape} differ in shape")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores contain non-finite values")
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        empty = "positive" if n_pos == 0 else "negative"
        return Auroc(None, f"the {empty} class is empty ({n_pos} positive, {n_neg} negative)")
    rank_sum = float(average_ranks(scores)[labels].sum())
    return Auroc((rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg), None)


def pair_scores(query_row: np.ndarray, num_pairs: int, tokens_per_pair: int) -> np.ndarray:
    """Per-pair attention magnitude from the query's weights over the keys.

    query_row [tasks, S] -> [tasks, N] with S = tokens_per_pair · N: the mean |w| over the
    pair's tokens (concat: one token, |w|; interleaved: keys 2i (x_i) and 2i+1 (ȳ_i))."""
    magnitude = np.abs(np.asarray(query_row, dtype=np.float64))
    keys = magnitude.shape[-1]
    if keys != tokens_per_pair * num_pairs:
        raise ValueError(f"{keys} keys do not fit {num_pairs} pairs of {tokens_per_pair} token(s)")
    return magnitude.reshape(magnitude.shape[0], num_pairs, tokens_per_pair).mean(axis=-1)


def _class_stats(values: np.ndarray) -> dict:
    if values.size == 0:
        return {"mean": None, "std": None, "count": 0}
    return {"mean": float(values.mean()), "std": float(values.std()), "count": int(values.size)}


def attention_statistics(
    weights: Mapping[tuple[int, int], np.ndarray], noise_mask: np.ndarray, tokens_per_pair: int
) -> dict:
    """The attention_stats.json record.

    weights: {(layer, head): [tasks, queries, keys]}; noise_mask: [tasks, N] bool (True =
    corrupted) for the same tasks in the same order; tokens_per_pair: 1 (concat) or 2 (interleaved)."""
    noise_mask = np.asarray(noise_mask, dtype=bool)
    num_tasks, num_pairs = noise_mask.shape
    layers = []
    for layer, head in sorted(weights):
        array = np.asarray(weights[(layer, head)])
        if array.ndim != 3 or array.shape[0] != num_tasks:
            raise ValueError(
                f"attention of layer {layer} head {head} has shape {array.shape}; expected [{num_tasks}, queries, keys]"
            )
        score = pair_scores(array[:, -1, :], num_pairs, tokens_per_pair)  # [tasks, N]
        clean, corrupted = score[~noise_mask], score[noise_mask]
        result = auroc(score.ravel(), ~noise_mask.ravel())
        reason = result.reason
        if reason is not None:
            missing = "corrupted" if corrupted.size == 0 else "clean"
            reason = (
                f"no {missing} context pairs in the {num_tasks} saved tasks "
                f"({clean.size} clean, {corrupted.size} corrupted)"
            )
        layers.append(
            {
                "layer": int(layer),
                "head": int(head),
                "clean": _class_stats(clean),
                "corrupted": _class_stats(corrupted),
                "auroc": result.value,
                "auroc_reason": reason,
            }
        )
    return {"layers": layers, "num_tasks": int(num_tasks), "score": SCORE}


def statistics_figure(
    weights: Mapping[tuple[int, int], np.ndarray],
    noise_mask: np.ndarray,
    tokens_per_pair: int,
    stats: dict,
    title: str = "",
):
    """Histograms of the pair score, clean vs corrupted, one panel per layer/head (a run with no
    corrupted pair: the clean pairs' histogram alone, and no comparison)."""
    keys = sorted(weights)
    rows = max(layer for layer, _ in keys) + 1
    cols = max(head for _, head in keys) + 1
    figure = new_figure(4.2 * cols, 3.2 * rows, constrained=True)
    noise_mask = np.asarray(noise_mask, dtype=bool)
    by_key = {(e["layer"], e["head"]): e for e in stats["layers"]}
    corrupted = bool(noise_mask.any())
    for layer, head in keys:
        ax = figure.add_subplot(rows, cols, layer * cols + head + 1)
        score = pair_scores(np.asarray(weights[(layer, head)])[:, -1, :], noise_mask.shape[1], tokens_per_pair)
        low, high = (float(score.min()), float(score.max())) if score.size else (0.0, 1.0)
        bins = np.linspace(low, high if high > low else low + 1.0, 41)
        for values, label, color in (
            (score[~noise_mask], "clean pairs", "tab:blue"),
            (score[noise_mask], "corrupted pairs", "tab:red"),
        ):
            if values.size:
                ax.hist(values, bins=bins, density=True, alpha=0.55, color=color, label=f"{label} (n={values.size})")
        entry = by_key[(layer, head)]
        if corrupted:
            auc = "n/a" if entry["auroc"] is None else f"{entry['auroc']:.3f}"
            ax.set_title(f"layer {layer} head {head}: AUROC(clean vs corrupted) = {auc}", fontsize=9)
        else:
            ax.set_title(f"layer {layer} head {head} (no corrupted pairs: nothing to compare)", fontsize=9)
        ax.set_xlabel("|attention| of query to pair")
        ax.set_ylabel("density")
        ax.legend(fontsize=8)
        ax.set_facecolor("white")
    if title:
        wrapped_title(figure, title, fontsize=10)
    return figure


def load_attention(run_dir: RunDir) -> tuple[dict, np.ndarray, str, str]:
    """({(layer, head): [tasks, queries, keys]}, noise_mask [tasks, N], tokens per pair,
    model name)."""
    settings = settings_with(run_dir, ExposesAttention)
    m = settings.model
    paths = {
        (layer, head): run_dir.require(names.attention_file(layer, head))
        for layer in range(m.num_layers)
        for head in range(m.num_heads)
    }
    mask = run_dir.load_npy(names.NOISE_MASK)
    weights = {key: np.load(path, allow_pickle=False) for key, path in paths.items()}
    num_tasks = next(iter(weights.values())).shape[0]
    if mask.ndim != 2 or mask.shape[0] < num_tasks or mask.shape[1] != settings.task.num_context:
        raise AnalysisError(
            f"{run_dir.file(names.NOISE_MASK)} has shape {mask.shape}, which does "
            f"not fit {num_tasks} saved tasks of {settings.task.num_context} pairs; "
            f"recreate the run with: {run_dir.producer(names.attention_file(0, 0))}"
        )
    return weights, mask[:num_tasks], layout_of(m).tokens_per_pair, m.name


def run(run_dir: RunDir) -> dict:
    """Compute and write analysis/attention_stats.json and .png."""
    weights, mask, tokens_per_pair, model_name = load_attention(run_dir)
    try:
        stats = attention_statistics(weights, mask, tokens_per_pair)
    except ValueError as err:
        raise AnalysisError(f"{run_dir.file(names.ATTN)}: {err}") from None
    figure = statistics_figure(
        weights,
        mask,
        tokens_per_pair,
        stats,
        title=f"{run_dir.name} ({model_name}, {stats['num_tasks']} tasks): the query's attention to each context pair",
    )
    png = png_bytes(figure)
    run_dir.write_json(names.ATTENTION_STATS, stats)
    run_dir.write_bytes(names.ATTENTION_STATS_PNG, png)
    return stats


needs_attention = for_capability(ExposesAttention)
register_analysis(
    "attention_stats",
    run,
    "attention to clean vs corrupted pairs, AUROC (needs attn/)",
    needs_attention,
    [names.ATTENTION_STATS, names.ATTENTION_STATS_PNG],
)
register_analysis(
    "attention_heatmaps",
    lambda run_dir: render_heatmaps(run_dir),
    "quick heatmaps of the saved attention (figs/)",
    needs_attention,
)


def render_heatmaps(run_dir: RunDir) -> list[str]:
    from analysis.attention_heatmap import run as render

    return render(run_dir)


def _print_auroc(args, run_dir) -> None:
    for e in run(run_dir)["layers"]:
        auc = "null" if e["auroc"] is None else f"{e['auroc']:.4f}"
        print(
            f"layer {e['layer']} head {e['head']}: AUROC {auc} | clean n={e['clean']['count']} "
            f"corrupted n={e['corrupted']['count']}"
        )
    print(f"-> {run_dir.file(names.ATTENTION_STATS)}")


main = analysis_command(MODULE, __doc__, lambda parser: None, _print_auroc)


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
