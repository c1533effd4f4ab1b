"""Report figures from a sweep's results CSV (eval_order / eval_noise).

    python -m plots.fig_templates --from results_order.csv --out report/figures/order

Renders, when the CSV has the data for them (otherwise the figure is skipped with
the reason printed, and a stale copy of it in --out is removed):
  order_sensitivity.png     eval loss per context ordering, bars per model, one-step GD marked
  noise_robustness.png      eval loss vs. fraction of corrupted pairs p, per noise mode/placement
  attention_separation.png  AUROC of clean vs. corrupted pairs' attention (last layer) per condition
  alignment_metrics.png     align_cos and l2_pred_diff (trained model vs. one-step GD) per condition
  ood_curve.png             trained model and GD loss vs. input scale α (each row's analysis/ood.csv)
Every value is a mean over seeds; error bars are the sample standard deviation over seeds
(ddof 1, src/stats.py; 0 with one seed). Loss is the paper's ½·mean squared error. A "condition" is the
settings that vary between rows (ordering, noise mode, p, σ, placement; "a→b" when
training and evaluation differ).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
from matplotlib.figure import Figure

from plots.fig_templates_draw import ERRORBARS, grouped_bars, line_palette, model_panels, seeds_note
from plots.results_table import has_values, label_column, load_results, mean_std, varying
from plots.style import line_legend, model_colors, new_figure, panels, png_bytes, wrapped_title
from src import rundir as names
from src.flags import OneLineParser, dry_run, summary
from src.process import guarded
from src.rundir import RunDir
from src.files import atomic_write_bytes

PROG = "python -m plots.fig_templates"
LOSS = "loss (½·MSE)"
FIGURES = (
    "order_sensitivity.png",
    "noise_robustness.png",
    "attention_separation.png",
    "alignment_metrics.png",
    "ood_curve.png",
)
MAX_PANELS = 6


class Skip(Exception):
    """This figure's data is not in the CSV; the message says why."""


# ---------------------------------------------------------------------------
# The figures


def order_sensitivity(frame: pd.DataFrame) -> Figure:
    groups_parts = varying(frame, exclude=("order",))
    frame = frame.assign(_group=label_column(frame, groups_parts, ""))
    groups = [g for g in dict.fromkeys(frame["_group"]) if frame.loc[frame["_group"] == g, "_order"].nunique() > 1]
    if not groups:
        raise Skip(
            "fewer than two orderings in the CSV (per condition); sweep more with "
            "python -m eval_order --ordering random,smallnorm2largenorm"
        )
    if len(groups) > MAX_PANELS:
        print(f"order_sensitivity.png: showing the first {MAX_PANELS} of {len(groups)} conditions")
        groups = groups[:MAX_PANELS]
    models = list(dict.fromkeys(frame["model"]))
    colors = model_colors(models)
    figure = new_figure(6, 4, constrained=True)
    axes = panels(figure, len(groups))
    for ax, group in zip(axes, groups):
        sub = frame[frame["_group"] == group]
        orders = list(dict.fromkeys(sub["_order"]))
        stats = mean_std(sub, ["_order", "model"], "eval_loss")
        spans = grouped_bars(
            ax, stats, "_order", "model", orders, [m for m in models if m in set(sub["model"])], colors
        )
        if has_values(sub, "gd_loss"):
            gd = mean_std(sub, ["_order"], "gd_loss").set_index("_order")
            for k, order in enumerate(orders):
                if order in gd.index:
                    left, right = spans[order]
                    ax.hlines(
                        gd.loc[order, "mean"],
                        left,
                        right,
                        colors="black",
                        linestyles="--",
                        linewidth=1.4,
                        label="one-step GD" if k == 0 else None,
                    )
        ax.set_xlabel("context ordering (train→eval when they differ)")
        ax.set_ylabel(f"eval {LOSS}")
        ax.set_title(group or "order sensitivity", fontsize=9)
        ax.legend(fontsize=8, loc="lower right")
    spread = []
    for model in models:
        for group in groups:
            values = mean_std(frame[(frame["model"] == model) & (frame["_group"] == group)], ["_order"], "eval_loss")[
                "mean"
            ]
            if len(values) > 1:
                spread.append(f"{model} {values.max() - values.min():.2g}")
    wrapped_title(
        figure,
        "Order sensitivity: eval loss per context ordering",
        seeds_note(frame.assign(_label=frame["_order"])),
        "spread of the mean eval loss across orderings (max − min): " + ", ".join(spread),
    )
    return figure


def _x_p(row: pd.Series) -> float:
    """The corruption level on the x axis: the eval set's p when eval is noisy, else training's."""
    for col in ("eval_noise_p", "train_noise_p", "p"):
        if col in row.index:
            value = pd.to_numeric(pd.Series([row[col]]), errors="coerce").iloc[0]
            if pd.notna(value):
                return float(value)
    return math.nan


def noise_robustness(frame: pd.DataFrame) -> Figure:
    frame = frame.assign(_x=[_x_p(row) for _, row in frame.iterrows()])
    noisy = frame[frame["_x"].notna() & (frame["_noise"] != "clean")]
    clean = frame[frame["_noise"] == "clean"]
    if noisy.empty:
        raise Skip(
            "no noisy runs in the CSV (every noise mode is clean); sweep them with "
            "python -m eval_noise --noise_mode label_noise --p 0.0,0.25"
        )
    parts = varying(noisy, exclude=("p",))
    noisy = noisy.assign(_line=label_column(noisy, parts, str(noisy["_noise"].iloc[0])))
    models = list(dict.fromkeys(frame["model"]))
    colors = line_palette(noisy["_line"])
    figure = new_figure(6, 4, constrained=True)
    for ax, model, parts in model_panels(figure, noisy, "_line", models, colors):
        for part, color in parts:
            stats = mean_std(part, ["_x"], "eval_loss").sort_values("_x")
            ax.errorbar(stats["_x"], stats["mean"], yerr=stats["std"], marker="o", capsize=3, color=color)
            if has_values(part, "gd_loss"):
                gd = mean_std(part, ["_x"], "gd_loss").sort_values("_x")
                ax.plot(gd["_x"], gd["mean"], linestyle="--", color=color, alpha=0.8, linewidth=1)
        base = clean[clean["model"] == model]
        if has_values(base, "eval_loss"):
            ax.axhline(pd.to_numeric(base["eval_loss"]).mean(), color="grey", linestyle=":")
        ax.set_title(model)
        ax.set_xlabel("fraction of corrupted context pairs p")
        ax.set_ylabel(f"eval {LOSS}")
        ax.grid(alpha=0.3)
    extra = [("trained model", dict(color="black")), ("one-step GD", dict(color="black", linestyle="--", linewidth=1))]
    if has_values(clean, "eval_loss"):
        extra.append(("trained model, clean contexts", dict(color="grey", linestyle=":")))
    line_legend(figure, colors, extra)
    wrapped_title(figure, "Noise robustness: eval loss vs. fraction of corrupted context pairs", ERRORBARS)
    return figure


def _condition_bars(
    frame: pd.DataFrame, columns: list[tuple[str, str]], heading: str, chance: float | None = None
) -> Figure:
    parts = varying(frame)
    frame = frame.assign(_label=label_column(frame, parts))
    labels = list(dict.fromkeys(frame["_label"]))
    models = list(dict.fromkeys(frame["model"]))
    colors = model_colors(models)
    width = max(6.5, 1.0 * len(labels) * max(1, len(models)) ** 0.5 + 2.5)
    # one panel per metric, stacked
    figure = new_figure(width, 3.8 * len(columns) + 1.2, constrained=True)
    axes = figure.subplots(len(columns), 1, squeeze=False).ravel()
    for ax, (column, ylabel) in zip(axes, columns):
        sub = (
            frame[pd.to_numeric(frame[column], errors="coerce").notna()] if column in frame.columns else frame.iloc[0:0]
        )
        stats = mean_std(sub, ["_label", "model"], column)
        grouped_bars(ax, stats, "_label", "model", labels, models, colors)
        if chance is not None:
            ax.axhline(chance, color="black", linestyle="--", linewidth=1, label="chance (0.5)")
        ax.set_xlabel("condition (train→eval when they differ)")
        ax.set_ylabel(ylabel)
        ax.set_title(column, fontsize=9)
        ax.legend(fontsize=8)
    wrapped_title(figure, heading, seeds_note(frame))
    return figure


def attention_separation(frame: pd.DataFrame) -> Figure:
    if not has_values(frame, "auroc"):
        raise Skip(
            "no AUROC values in the CSV (they need runs with --save_attention and corrupted "
            "context pairs, e.g. python -m eval_noise)"
        )
    frame = frame[pd.to_numeric(frame["auroc"], errors="coerce").notna()]
    return _condition_bars(
        frame,
        [("auroc", "AUROC, clean vs. corrupted pairs")],
        "Attention separation of clean and corrupted context pairs: AUROC of "
        "the query token's attention (last layer, mean over heads; 1 = clean "
        "pairs always get more attention, 0.5 = chance)",
        chance=0.5,
    )


def alignment_metrics(frame: pd.DataFrame) -> Figure:
    columns = [
        (c, y)
        for c, y in (
            ("align_cos", "cosine similarity of ∂ŷ/∂x_q (TF vs. GD)"),
            ("l2_pred_diff", "mean |ŷ_TF − ŷ_GD| (units of y)"),
        )
        if has_values(frame, c)
    ]
    if not columns:
        raise Skip("no align_cos / l2_pred_diff values in the CSV")
    return _condition_bars(frame, columns, "Alignment of the trained model with one step of GD")


def resolve_run_dir(text: str, csv_path: Path) -> RunDir | None:
    for candidate in (Path(text), csv_path.parent / text):
        if candidate.is_dir():
            return RunDir(candidate)
    return None


def ood_curve(frame: pd.DataFrame, csv_path: Path) -> Figure:
    if "run_dir" not in frame.columns:
        raise Skip("the CSV has no run_dir column to find each run's OOD results")
    tables = []
    for _, row in frame.iterrows():
        run = resolve_run_dir(str(row["run_dir"]), csv_path)
        if run is None or not run.exists(names.OOD):
            continue
        try:
            table = pd.read_csv(run.file(names.OOD))
        except (OSError, ValueError, pd.errors.ParserError):
            continue
        if not {"alpha", "tf_loss", "gd_loss"} <= set(table.columns):
            continue
        table = table.assign(model=row["model"], seed=row["seed"], _label=row["_label"])
        tables.append(table)
    if not tables:
        raise Skip(
            f"no run directory named in the CSV has {names.OOD} (made by python -m analysis.ood_eval --run <run_dir>)"
        )
    data = pd.concat(tables, ignore_index=True)
    models = list(dict.fromkeys(data["model"]))
    colors = line_palette(data["_label"])
    figure = new_figure(6, 4, constrained=True)
    for ax, model, parts in model_panels(figure, data, "_label", models, colors):
        for part, color in parts:
            for column, style in (("tf_loss", "-"), ("gd_loss", "--")):
                stats = mean_std(part, ["alpha"], column).sort_values("alpha")
                ax.errorbar(
                    stats["alpha"],
                    stats["mean"],
                    yerr=stats["std"],
                    linestyle=style,
                    marker="o" if style == "-" else None,
                    markersize=3,
                    capsize=2,
                    color=color,
                    linewidth=1.4 if style == "-" else 1,
                )
        ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        ax.set_title(model)
        ax.set_xlabel("input scale α (x ~ U(−α/2, α/2))")
        ax.set_ylabel(f"{LOSS}, log scale")
        ax.grid(alpha=0.3, which="both")
    line_legend(
        figure,
        colors,
        [
            ("trained model", dict(color="black")),
            ("one-step GD", dict(color="black", linestyle="--", linewidth=1)),
            ("training range (α = 1)", dict(color="grey", linestyle=":")),
        ],
    )
    wrapped_title(
        figure, "Out-of-distribution input scale: trained model vs. one-step GD (η tuned at α = 1)", ERRORBARS
    )
    return figure


# ---------------------------------------------------------------------------
# Entry point


def render_all(csv_path: Path, out_dir: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """Render every figure the CSV has data for; returns (written, [(skipped, reason)])."""
    frame = load_results(csv_path)
    if frame.empty:
        raise ValueError(f"{csv_path} has no rows (no finished runs); run the sweep first")
    frame = frame.assign(_label=label_column(frame, varying(frame)))
    makers: dict[str, Callable[[], Figure]] = {
        "order_sensitivity.png": lambda: order_sensitivity(frame),
        "noise_robustness.png": lambda: noise_robustness(frame),
        "attention_separation.png": lambda: attention_separation(frame),
        "alignment_metrics.png": lambda: alignment_metrics(frame),
        "ood_curve.png": lambda: ood_curve(frame, csv_path),
    }
    written, skipped = [], []
    for name in FIGURES:
        target = out_dir / name
        try:
            figure = makers[name]()
        except Skip as why:
            skipped.append((name, str(why)))
            if target.exists():
                target.unlink()
            continue
        atomic_write_bytes(target, png_bytes(figure))
        written.append(str(target))
    return written, skipped


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(
        prog=PROG,
        description=summary(__doc__),
        epilog="\n".join(__doc__.splitlines()[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from", dest="source", required=True, help="results CSV of python -m eval_order / eval_noise")
    parser.add_argument("--out", required=True, help="folder for the PNGs, e.g. report/figures/order")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if dry_run(PROG, f"draw the figures of {args.source} into {args.out}"):
        return 0
    csv_path, out_dir = Path(args.source), Path(args.out)
    if not csv_path.is_file():
        print(
            f"{PROG}: error: --from {csv_path} does not exist; create it with: python -m eval_order --out {csv_path}",
            file=sys.stderr,
        )
        return 2
    if out_dir.exists() and not out_dir.is_dir():
        print(f"{PROG}: error: --out {out_dir} is a file; accepted: a folder", file=sys.stderr)
        return 2
    try:
        written, skipped = render_all(csv_path, out_dir)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    for name, reason in skipped:
        print(f"skipped {name}: {reason}")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(guarded(main))
