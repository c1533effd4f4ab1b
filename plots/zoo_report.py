"""The report of scripts.zoo (Zoology's mixer zoo on MQAR): report/ZOO.md, report/zoo_results.json
and report/figures/zoo/accuracy_state.png (MQAR accuracy against the recurrent state each model
keeps per sequence, one panel per cell) from the runs' metrics_summary.json.

A cell (T, κ, width) of a mixer is the best of the learning rates tried (Zoology's protocol), then
the mean over seeds. State: floats per sequence summed over the model's layers after T tokens
(src/models/sequence.py `state_floats`; attention grows with T). The verdict names each cell where
a gated convolution falls at least FALL below attention, and where the input-dependent mixers
with a small state stand between the two.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from plots.mixers_report import _pm, best_of_rates, block_words, collect
from plots.provenance import header, study_fields
from plots.report_index import write_index
from plots.style import new_figure, png_bytes
from src.jobs.declared import StudyRun
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text
from src.stats import over_seeds

REPORT, RESULTS, FIG_DIR = "ZOO.md", "zoo_results.json", "figures/zoo"
OURS = "the MLP state mixer (Zoology's figure 2 has none), learned positions for every mixer"  # our block, in words
REFERENCE = "attention"
GATED_CONVOLUTIONS = {"base_conv", "hyena", "h3", "short_conv"}  # a study mixer all of whose layers are these
# the study's spellings of the models in Zoology's figure 2 and the Based paper (others: their own name)
ZOOLOGY_NAMES = {
    "attention": "Attention",
    "base_conv+base_conv:kernel_size=-1": "BaseConv (fig. 2)",
    "hyena": "Hyena (fig. 2)",
    "h3": "H3 (fig. 2)",
    "rwkv7": "RWKV (fig. 2: RWKV-4; here RWKV-7)",
    "base_conv+based": "Based (Based paper)",
    "delta_net": "DeltaNet",
    "gated_delta_net": "Gated DeltaNet",
    "mamba2": "Mamba-2",
}
FALL = 0.3  # a gated convolution "falls" this far below attention
# Zoology's figure 2 (2 layers, 1 head, no MLP, widths 64-512, best of four rates; ANCHORS.md)
ZOOLOGY = (
    "attention ≈ 1.0 in every cell; the gated convolutions fall as T grows at a fixed width "
    "(at T = 256, width 64, every gated convolution ≤ 0.15)"
)


def kind_of(mixer: str) -> str:
    """attention, a gated convolution (every layer BaseConv, Hyena, H3 or a short convolution, any
    options) or an input-dependent mixer with a small state (anything else)."""
    layers = {part.split(":")[0].strip() for part in mixer.split("+")}
    return "reference" if mixer == REFERENCE else "gated convolution" if layers <= GATED_CONVOLUTIONS else "small state"


def cells_of(rows: list[dict]) -> list[tuple[int, int, int]]:
    return sorted({(r["seq_len"], r["kappa"], r["width"]) for r in rows})


def mean_of(rows: list[dict], mixer: str, cell: tuple) -> float | None:
    t, kappa, width = cell
    stats = over_seeds(
        [
            r["accuracy"]
            for r in rows
            if r["mixer"] == mixer
            and r["seq_len"] == t
            and r["kappa"] == kappa
            and r["width"] == width
            and r["accuracy"] is not None
        ]
    )
    return stats["mean"] if stats["n"] else None


def verdict(rows: list[dict], mixers: Sequence[str]) -> list[str]:
    """Where the gated convolutions fall at least FALL below attention, and where the small-state
    mixers stand, cell by cell, with the numbers."""
    lines = []
    for cell in cells_of(rows):
        reference = mean_of(rows, REFERENCE, cell)
        if reference is None:
            continue
        t, kappa, width = cell
        gaps = {
            m: reference - a
            for m in mixers
            if kind_of(m) == "gated convolution" and (a := mean_of(rows, m, cell)) is not None
        }
        fallen = sorted(m for m, gap in gaps.items() if gap >= FALL)
        small = {m: a for m in mixers if kind_of(m) == "small state" and (a := mean_of(rows, m, cell)) is not None}
        worst_conv = min((reference - g for g in gaps.values()), default=None)
        words = (
            f"all {len(fallen)} gated convolutions fall ≥ {FALL} below it"
            if fallen and len(fallen) == len(gaps)
            else f"{', '.join(fallen)} fall ≥ {FALL} below it"
            if fallen
            else f"no gated convolution falls {FALL} below it"
        )
        between = ", ".join(f"{m} {a:.3f}" for m, a in small.items())
        lines.append(
            f"- T = {t}, κ = {kappa}, width {width}: attention {reference:.3f}; {words} "
            f"({', '.join(f'{m} {reference - g:.3f}' for m, g in gaps.items())}); "
            f"small-state mixers: {between or 'none run'}"
            + (
                f" (best gated convolution {max(reference - g for g in gaps.values()):.3f}, worst {worst_conv:.3f})"
                if worst_conv is not None
                else ""
            )
            + "."
        )
    return lines


def figure_state(rows: list[dict], mixers: Sequence[str]):
    """Accuracy against the model's recurrent state (log scale), one panel per cell."""
    cells = cells_of(rows)
    fig = new_figure(4.2 * len(cells), 3.8, constrained=True)
    axes = fig.subplots(1, len(cells), squeeze=False)[0]
    colours = {m: f"C{i % 10}" for i, m in enumerate(mixers)}
    for ax, cell in zip(axes, cells):
        t, kappa, width = cell
        for mixer in mixers:
            points = [
                (r["state_floats"], r["accuracy"])
                for r in rows
                if r["mixer"] == mixer and (r["seq_len"], r["kappa"], r["width"]) == cell and r["accuracy"] is not None
            ]
            if points:
                xs, ys = zip(*points)
                ax.scatter(
                    [np.mean(xs)],
                    [np.mean(ys)],
                    color=colours[mixer],
                    label=mixer,
                    s=30,
                    marker="*" if mixer == REFERENCE else "o",
                )
        ax.set_xscale("log")
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"T = {t}, κ = {kappa}, width {width}", fontsize=9)
        ax.set_xlabel("recurrent state (floats per sequence)")
        ax.set_ylabel("MQAR accuracy")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.suptitle("Zoology's mixers on MQAR: accuracy against recurrent state size", fontsize=10)
    return fig


def beside_zoology(rows: list[dict], mixers: Sequence[str]) -> list[str]:
    """One table, a row per mixer: its model in Zoology's papers, its kind and its accuracy in
    every cell (mean over seeds), beside what figure 2 shows."""
    from plots.beside_paper import load_anchors
    from plots.paper_rows_zoology import ZOO_CLAIMS

    claims = load_anchors().claims
    cells = cells_of(rows)
    head = " | ".join(f"T {t}, κ {kappa}, w {width}: here · figure 2" for t, kappa, width in cells)

    def figure2(mixer: str, cell: tuple) -> str:
        """Figure 2's reading at width 64 (report/anchors.yaml), '—' where it has none."""
        tag = {64: "t64", 128: "t128"}.get(cell[0]) if cell[2] == 64 else None
        key = "zoology.attention" if mixer == REFERENCE else f"zoology.{ZOO_CLAIMS.get(mixer)}_{tag}"
        claim = claims.get(key) if tag else None
        return "—" if claim is None else f"{claim.value:g}"

    lines = [
        "## Beside Zoology's figure 2",
        "",
        f"Zoology (figure 2, V = 8,192, widths 64–512, 2 layers, no MLP): {ZOOLOGY}. Here beside figure 2's "
        "width-64 readings (report/anchors.yaml; the verdicts: 'Beside the paper' below; figure 2's RWKV is "
        "RWKV-4):",
        "",
        f"| mixer | Zoology's model | kind | {head} |",
        "|---|---|---|" + "---|" * len(cells),
    ]
    for mixer in mixers:
        means = [mean_of(rows, mixer, cell) for cell in cells]
        lines.append(
            f"| {mixer} | {ZOOLOGY_NAMES.get(mixer, '—')} | {kind_of(mixer)} | "
            + " | ".join(
                ("—" if a is None else f"{a:.3f}") + f" · {figure2(mixer, cell)}" for a, cell in zip(means, cells)
            )
            + " |"
        )
    return lines + [""]


def setup_lines(jobs: Sequence, rows: list[dict], every: list[dict], found: list[str]) -> list[str]:
    """Seeds and rates, the model, the comparison with Zoology's figure 2, then where the gated convolutions
    fall (`found`: verdict's lines), ending with a blank line."""
    seeds = sorted({r["seed"] for r in rows})
    rates = sorted({r["learning_rate"] for r in every})
    return [
        f"- Seeds: {', '.join(map(str, seeds)) or 'none'}; a cell is the best of the learning rates "
        f"{', '.join(f'{r:g}' for r in rates)} (Zoology's protocol), then the mean over the seeds"
        + (" ± the sample std" if len(seeds) > 1 else "")
        + ".",
        f"- Model: the `lm` family, 2 layers, 1 head, {block_words(jobs, OURS)}, "
        "AdamW (weight decay 0.1, 3 % warm-up, cosine). A name a+b is a "
        "hybrid stack: layer 1 a, layer 2 b (base_conv+based is Zoology's Based model); name:option=value "
        "sets an option (base_conv+base_conv:kernel_size=-1 is figure 2's BaseConv: a short convolution, "
        "kernel 3, in layer 1, the implicit long convolution in layer 2).",
        f"- Beside Zoology's figure 2, at a smaller scale (V = 256 here, 8,192 there; widths and steps a "
        f"CPU affords): {ZOOLOGY}.",
        "",
        "## Where the gated convolutions fall",
        "",
        *(found or ["- no cell has attention's runs"]),
        "",
    ]


def cell_tables(rows: list[dict], mixers: Sequence[str]) -> list[str]:
    """A table per (T, κ, width) cell: each mixer's accuracy, state size and the rate chosen."""
    lines = []
    for cell in cells_of(rows):
        t, kappa, width = cell
        lines += [
            f"## T = {t}, κ = {kappa}, width {width}",
            "",
            "| mixer | accuracy | state (floats) | rate chosen |",
            "|---|---|---|---|",
        ]
        for mixer in mixers:
            mine = [r for r in rows if r["mixer"] == mixer and (r["seq_len"], r["kappa"], r["width"]) == cell]
            if mine:
                stats = over_seeds([r["accuracy"] for r in mine if r["accuracy"] is not None])
                chosen = "/".join(sorted({f"{r['learning_rate']:g}" for r in mine}))
                lines.append(f"| {mixer} | {_pm(stats)} | {mine[0]['state_floats']:,} | {chosen} |")
        lines.append("")
    return lines


def write_report(run: StudyRun) -> list[Path]:
    jobs, report_dir = run.jobs, run.report_dir
    state = {job.name: job.settings.model.state_floats(job.seq_len) for job in jobs}
    every = [{**r, "state_floats": state[r["run"]]} for r in collect(jobs)]
    rows = best_of_rates(every)
    mixers = list(dict.fromkeys(job.mixer for job in jobs))
    figures = []
    if rows:
        atomic_write_bytes(report_dir / FIG_DIR / "accuracy_state.png", png_bytes(figure_state(rows, mixers)))
        figures.append(f"{FIG_DIR}/accuracy_state.png")
    found = verdict(rows, mixers)
    blocks = sorted({job.block for job in jobs})
    atomic_write_json(
        report_dir / RESULTS,
        {
            **study_fields(run),
            **({"block": blocks} if blocks not in ([], ["ours"]) else {}),
            "results": [{k: v for k, v in r.items() if k != "curve"} for r in rows],
            "every_rate": [
                {k: r[k] for k in ("run", "mixer", "seq_len", "kappa", "width", "seed", "learning_rate", "accuracy")}
                for r in every
            ],
            "verdict": found,
            "figures": figures,
        },
    )
    lines = header("Zoology's mixer zoo on MQAR", run)
    lines += setup_lines(jobs, rows, every, found) + beside_zoology(rows, mixers) + cell_tables(rows, mixers)
    lines += ["## Figures", ""] + [f"- `{f}`" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(lines))
    return [report_dir / REPORT, report_dir / RESULTS, write_index(report_dir, run.head)] + [
        report_dir / f for f in figures
    ]
