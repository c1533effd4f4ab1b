"""Figures a reader can read: plots.style.figure_problems finds a missing title, an unlabelled
axis and text outside the canvas, and every figure kind `make demo` draws passes it, drawn here
from small synthetic inputs (tests/test_studies' demo run checks the real ones with
WORKBENCH_CHECK_FIGURES=1)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plots.style import figure_problems, new_figure, png_bytes


def test_the_check_finds_what_a_reader_would_miss():
    fig = new_figure(4, 3)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([1, 2], [3, 4])
    problems = figure_problems(fig)
    assert "no title: neither a suptitle nor a title on every panel" in problems
    assert "panel 0: no x label" in problems and "panel 0: no y label" in problems
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    fig.suptitle("a title")
    assert any("outside the canvas" in p for p in figure_problems(fig))  # no layout: the x label is cut
    fig.set_layout_engine("constrained")
    assert figure_problems(fig) == []


def test_the_environment_switch_refuses_a_bad_figure(monkeypatch):
    fig = new_figure(4, 3, constrained=True)
    fig.add_subplot(1, 1, 1).plot([1, 2], [3, 4])
    monkeypatch.setenv("WORKBENCH_CHECK_FIGURES", "1")
    with pytest.raises(ValueError, match="no title"):
        png_bytes(fig)
    monkeypatch.delenv("WORKBENCH_CHECK_FIGURES")
    assert png_bytes(fig)[:4] == b"\x89PNG"


def _icl_rows():
    rows = []
    for name in ("model", "least_squares", "averaging", "knn", "gd_step"):
        for n in range(11):
            rows.append({"predictor": name, "n_examples": n, "mean": 1.0 / (1 + n), "ci95": 0.02})
    return rows


def _figures(tmp_path):
    from analysis import dynamics, icl_curve, loss_figure
    from analysis.attention_heatmap import attention_figure
    from analysis.attention_stats import attention_statistics, statistics_figure
    from plots.demo_figures import mqar_curves
    from src.gd_paper.models.layouts import LAYOUTS

    rng = np.random.default_rng(0)
    yield "icl curve", icl_curve.figure(_icl_rows(), "run: softmax_causal on linear_regression, d = 5", 11)
    from src.systems.gpt2 import GPT2Settings

    yield (
        "loss",
        loss_figure.figure(
            {"loss": np.exp(-np.linspace(0, 3, 500))},
            "step",
            "lengthgen_fire: softmax_causal + fire on linear_regression",
            [100, 200],
            GPT2Settings().loss_figure_label(),
        ),
    )
    weights = rng.dirichlet(np.ones(21), size=(4, 1))  # [tasks, queries, keys]
    layout = LAYOUTS.get("concat").build(LAYOUTS.get("concat").options())
    yield (
        "attention heatmap",
        attention_figure(
            weights, 0, 0, layout, 20, None, title="gd_twolayer (twolayer): attention weights, layer 1 head 0"
        ),
    )
    signed = rng.normal(size=(4, 1, 21))
    yield (
        "signed heatmap",
        attention_figure(
            signed, 0, 0, layout, 20, None, title="gd_twolayer (twolayer): attention weights, layer 1 head 0"
        ),
    )
    pairs = {(0, 0): weights[..., :20]}  # the keys of 20 pairs
    mask = np.zeros((4, 20), bool)
    stats = attention_statistics(pairs, mask, 1)
    yield (
        "attention stats, clean",
        statistics_figure(
            pairs, mask, 1, stats, title="gd_lsa1 (lsa1, 1000 tasks): the query's attention to each context pair"
        ),
    )
    mask[:, :5] = True
    stats = attention_statistics(pairs, mask, 1)
    yield (
        "attention stats, corrupted",
        statistics_figure(
            pairs,
            mask,
            1,
            stats,
            title="gd_lsa1_noisy_label (lsa1, 1000 tasks): the query's attention to each context pair",
        ),
    )
    record = {"theory_levels": [0.98, 0.6, 0.3], "drops": [{"epoch": 100}, {"epoch": 900}]}
    loss = np.concatenate([np.full(100, 0.98), np.full(800, 0.6), np.full(1100, 0.3)])
    yield (
        "dynamics",
        dynamics.figure(loss, np.arange(0, 2000, 100), rng.random((20, 2, 4)), record, "run (attnS): rank-one heads"),
    )
    runs = []
    for mixer in ("attention", "linear_attention"):
        run = tmp_path / mixer
        run.mkdir()
        (run / "metrics.jsonl").write_text(
            "\n".join(json.dumps({"step": s, "eval_accuracy": s / 600}) for s in range(50, 601, 50))
        )
        (run / "config.json").write_text(
            json.dumps(
                {
                    "settings": {
                        "task": {"name": "mqar", "options": {"num_pairs": 4, "seq_len": 64}},
                        "model": {"width": 64, "n_layer": 2, "seq_mixer": {"name": mixer}},
                        "train": {"seed": 0},
                    }
                }
            )
        )
        runs.append(run)
    captured = {}

    import plots.demo_figures as demo_figures

    original = demo_figures.png_bytes
    demo_figures.png_bytes = lambda fig: captured.setdefault("fig", fig) and original(fig)
    try:
        mqar_curves(runs, tmp_path / "mqar.png")
    finally:
        demo_figures.png_bytes = original
    yield "MQAR curves", captured["fig"]
    from analysis.inductive_bias import figure as duplication_figure

    errors = {str(r): {"model": 0.2 + 0.01 * r, "least_squares": 0.0, "averaging": 0.6, "knn": 0.7} for r in range(6)}
    yield (
        "inductive bias",
        duplication_figure(
            {
                "errors": errors,
                "block": 9,
                "trained_enough": True,
                "mixer": "softmax_causal",
                "position": "learned",
                "task": "linear_regression",
            },
            "run",
        ),
    )


def test_every_demo_figure_kind_has_a_title_labels_and_its_text_inside(tmp_path):
    found = {name: figure_problems(fig) for name, fig in _figures(tmp_path)}
    assert len(found) == 9
    assert not any(found.values()), {k: v for k, v in found.items() if v}


def test_the_heatmap_of_softmax_weights_is_sequential_and_of_signed_ones_diverging():
    from analysis.attention_heatmap import attention_figure
    from src.gd_paper.models.layouts import LAYOUTS

    layout = LAYOUTS.get("concat").build(LAYOUTS.get("concat").options())
    rng = np.random.default_rng(1)
    soft = attention_figure(rng.dirichlet(np.ones(21), size=(2, 1)), 0, 0, layout, 20)
    signed = attention_figure(rng.normal(size=(2, 1, 21)), 0, 0, layout, 20)
    assert soft.axes[0].images[0].get_cmap().name == "viridis" and soft.axes[0].images[0].norm.vmin == 0
    assert signed.axes[0].images[0].get_cmap().name == "RdBu_r"


def test_a_clean_run_draws_no_comparison_with_corrupted_pairs():
    from analysis.attention_stats import attention_statistics, statistics_figure

    weights = {(0, 0): np.random.default_rng(2).dirichlet(np.ones(20), size=(4, 1))}
    mask = np.zeros((4, 20), bool)
    fig = statistics_figure(weights, mask, 1, attention_statistics(weights, mask, 1), title="t")
    ax = fig.axes[0]
    assert "AUROC" not in ax.get_title() and "nothing to compare" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["clean pairs (n=80)"]


def test_a_narrow_log_axis_reads_as_plain_numbers_and_the_check_finds_one_that_does_not():
    from analysis import loss_figure

    losses = {"loss": np.linspace(5.0, 1.5, 300)}  # less than a decade: 2, 3, 4 ... labelled
    fig = loss_figure.figure(losses, "step", "a run", [], "loss")
    assert figure_problems(fig) == []
    labels = [t.get_text() for t in fig.axes[0].yaxis.get_ticklabels(minor=True) if t.get_text()]
    assert labels and all("times" not in t for t in labels), labels
    raw = new_figure(4, 3, constrained=True)
    ax = raw.add_subplot(1, 1, 1)
    ax.plot(losses["loss"])
    ax.set_yscale("log")
    ax.set(title="t", xlabel="step", ylabel="loss")
    assert any("2×10⁰" in p for p in figure_problems(raw))
