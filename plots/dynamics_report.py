"""The training-dynamics study's report (scripts/dynamics.py): report/DYNAMICS.md,
report/dynamics_results.json and report/figures/dynamics/*.png, from the run directories
(each run's dynamics.npz, metrics_summary.json and analysis/dynamics.json). Loss is the
original's mean squared error of the query prediction (no ½).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plots.provenance import header, study_fields
from plots.report_index import write_index
from plots.style import new_figure, png_bytes
from src.jobs.declared import StudyRun
from src import rundir as names
from src.registry import registry
from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text

RESULTS = "dynamics_results.json"
REPORT = "DYNAMICS.md"
FIG_DIR = "figures/dynamics"


def _run_record(job) -> dict:
    run = job.run
    summary = run.load_json(names.SUMMARY)
    dynamics = run.load_json(names.DYNAMICS_JSON)
    with np.load(run.file(names.DYNAMICS), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    return {
        "name": job.name,
        "path": str(run.path),
        "summary": summary,
        "dynamics": dynamics,
        "arrays": arrays,
        "settings": run.load_config()["settings"],
    }


def _epochs(values) -> np.ndarray:
    return np.arange(1, len(values) + 1)


def _loss_axes(ax, title: str) -> None:
    ax.set_xscale("log")
    ax.set_xlabel("epoch (full-batch GD updates), log scale")
    ax.set_ylabel("loss: mean (ŷ − y_q)²")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _loss_curves(records: list[dict], label, ls_label: str, title: str):
    """One panel: each record's training loss (labelled by `label(record)`) and the
    least-squares level on the cubic feature."""
    fig = new_figure(6.5, 4.2, constrained=True)
    ax = fig.add_subplot(1, 1, 1)
    for i, r in enumerate(records):
        ax.plot(
            _epochs(r["arrays"]["loss"]),
            r["arrays"]["loss"],
            color=f"C{i}",
            lw=1.5,
            label=f"{label(r)}: {len(r['dynamics']['drops'])} drop(s)",
        )
    ax.axhline(records[0]["dynamics"]["theory_levels"][-1], color="0.4", ls=":", label=ls_label)
    _loss_axes(ax, title)
    return fig


def figure_merged_vs_mlp(records: list[dict]):
    return _loss_curves(
        records,
        lambda r: f"{r['name']} ({r['summary']['model']})",
        "least squares on the cubic feature z",
        "ATTN_M and the 2-layer linear network on cubic features: one abrupt drop each",
    )


def figure_staircase(record: dict, uniform: dict | None = None):
    """The staircase run; `uniform`: the same run under every-entry-std-init, dashed."""
    fig = new_figure(11, 4.2, constrained=True)
    ax = fig.add_subplot(1, 2, 1)
    loss = record["arrays"]["loss"]
    ax.plot(_epochs(loss), loss, color="C0", lw=1.6, label=f"ATTN_S, rank-one heads (init: {convention(record)})")
    if uniform is not None:
        other = uniform["arrays"]["loss"]
        ax.plot(_epochs(other), other, color="0.3", lw=1.0, ls="--", label=f"the same, init: {convention(uniform)}")
    for m, level in enumerate(record["dynamics"]["theory_levels"]):
        ax.axhline(level, color="0.5", ls=":", lw=1, label="least squares on top-m directions" if m == 0 else None)
    for d in record["dynamics"]["drops"]:
        ax.axvline(d["epoch"] + 1, color="C3", lw=0.8, alpha=0.6)
    _loss_axes(ax, "loss: one drop per principal component (red: detected drops)")
    ax = fig.add_subplot(1, 2, 2)
    strength = np.abs(record["arrays"]["gamma_diag"]).sum(axis=1)  # [K, D]
    eig = record["dynamics"]["eigenvalues"]
    epochs = np.maximum(record["arrays"]["log_epochs"], 1)
    for i in np.argsort(eig)[::-1]:
        ax.plot(epochs, strength[:, i], lw=1.4, label=f"component λ = {eig[i]:.2f}")
    ax.set_xscale("log")
    ax.set_xlabel("epoch, log scale")
    ax.set_ylabel("Σ_h |v_h,y W_KQ,h,ii + v_h,x,i W_KQ,h,y,i|")
    ax.set_title("each principal component of the learned map over training", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def figure_rank_sweep(records: list[dict]):
    return _loss_curves(
        records,
        lambda r: f"R = {r['settings']['model']['options']['rank']}",
        "least squares on z",
        "ATTN_S at D = 8, 9 heads: loss by key-query rank R",
    )


def figure_icl_sweep(records: list[dict]):
    fig = new_figure(11, 4.2, constrained=True)
    ax = fig.add_subplot(1, 2, 1)
    c = [r["settings"]["task"]["icl"] for r in records]
    for key, label, color in (
        ("test_icl_loss", "in-context test (fresh w)", "C0"),
        ("test_iwl_loss", "in-weight test (w*, noise context)", "C3"),
    ):
        ax.plot(c, [r["arrays"][key][-1] for r in records], marker="o", color=color, label=label)
    ax.set_xlabel("c: fraction of training sequences with their own task vector")
    ax.set_ylabel("final test loss: mean (ŷ − y_q)²")
    ax.set_title("in-context vs in-weight learning at the end of training", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax = fig.add_subplot(1, 2, 2)
    for i, r in enumerate(records):
        ax.plot(
            _epochs(r["arrays"]["test_icl_loss"]),
            r["arrays"]["test_icl_loss"],
            color=f"C{i}",
            lw=1.2,
            label=f"c = {r['settings']['task']['icl']:g} (in-context)",
        )
        ax.plot(_epochs(r["arrays"]["test_iwl_loss"]), r["arrays"]["test_iwl_loss"], color=f"C{i}", lw=1.0, ls="--")
    _loss_axes(ax, "test losses over training (solid: in-context, dashed: in-weight)")
    return fig


FIGURES = {
    "merged_vs_mlp": ("merged_vs_mlp.png", figure_merged_vs_mlp, False),
    "staircase": ("staircase.png", figure_staircase, True),  # with staircase_uniform beside it
    "rank_sweep": ("rank_sweep.png", figure_rank_sweep, False),
    "icl_sweep": ("icl_sweep.png", figure_icl_sweep, False),
}


def _staircase_table(record: dict) -> list[str]:
    d = record["dynamics"]
    lines = [
        "| plateau | epochs | measured level | theory (top-m LS) | m | difference | drop into it at epoch |",
        "|---|---|---|---|---|---|---|",
    ]
    drop_at = {x.get("to_plateau", i + 1): x["epoch"] for i, x in enumerate(d["drops"])}
    for i, p in enumerate(d["plateaus"]):
        lines.append(
            f"| {i} | {p['start']}–{p['end']} | {p['level']:.4f} | {p['theory_level']:.4f} | "
            f"{p['theory_m']} | {p['difference']:+.4f} | {drop_at.get(i, '—')} |"
        )
    rise = ", ".join(
        f"λ={lam:.2f}: {e}" for lam, e in zip(sorted(d["eigenvalues"], reverse=True), d["component_rise_epochs"])
    )
    return lines + ["", f"Component rise epochs (half of its converged strength), by decreasing eigenvalue: {rise}."]


def convention(r: dict) -> str:
    """The run's initialisation convention (records before the setting existed: uniform)."""
    return r["settings"]["train"].get("init_convention", "uniform")


def _summary_line(r: dict) -> str:
    s, d = r["summary"], r["dynamics"]
    return (
        f"| {r['name']} | {s['model']} | {convention(r)} | {s['epochs']} | "
        f"{s['initial_loss']:.4f} → {s['final_loss']:.4f} | "
        f"{d['theory_levels'][-1]:.4f} | {len(d['drops'])}: {[x['epoch'] for x in d['drops']]} | "
        f"{s['train_seconds']:.1f} s ({s['ms_per_epoch']:.3f} ms/epoch) |"
    )


def _equality_lines(records: list[dict]) -> list[str]:
    """The README's claim that the MLP's trajectory is ATTN_M's: the largest relative gap of each
    ATTN_M run's loss from the MLP's over the epochs."""
    mlp = next(
        (
            r
            for r in records
            if getattr(registry("dynamics_model").get(r["summary"]["model"]).options, "reads_cubic_feature", False)
        ),
        None,
    )
    if mlp is None:
        return []
    reference = np.asarray(mlp["arrays"]["loss"], np.float64)
    lines = [
        "The MLP's trajectory against ATTN_M's (the original's README: \"the same as that of "
        'ATTN_M"), largest |L_ATTN_M − L_MLP| / L_MLP over the epochs:',
        "",
    ]
    for r in records:
        if r is mlp:
            continue
        loss = np.asarray(r["arrays"]["loss"], np.float64)
        gap = np.abs(loss - reference) / reference
        worst = int(np.argmax(gap))
        restricted = r["settings"]["model"]["options"].get("restricted", False)
        lines.append(
            f"- {r['name']} ({'restricted: value reads y, W_KQ reads x' if restricted else 'unrestricted'}): "
            f"{100 * gap[worst]:.4g} % at epoch {worst}; final {loss[-1]:.4f} vs {reference[-1]:.4f}"
        )
    return lines


def figure_files(parts: dict[str, list[dict]], report_dir: Path) -> tuple[list[str], dict[str, str], list[Path]]:
    """Draws a figure per part run (FIGURES); (their paths relative to report_dir, each one's
    initialisation conventions, the paths written)."""
    written = []
    figures, initialisation = [], {}
    for part, (filename, draw, single) in FIGURES.items():
        if part in parts:
            path = report_dir / FIG_DIR / filename
            runs = parts[part] + (parts.get("staircase_uniform", []) if part == "staircase" else [])
            drawn = draw(*runs[:2]) if single else draw(runs)
            atomic_write_bytes(path, png_bytes(drawn))
            figures.append(f"{FIG_DIR}/{filename}")
            initialisation[figures[-1]] = ", ".join(sorted({convention(r) for r in runs}))
            written.append(path)
    return figures, initialisation, written


def results_of(parts: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The records without their arrays, each ICL-sweep run with its final test losses."""
    results = {
        part: [{k: v for k, v in r.items() if k != "arrays"} for r in records] for part, records in parts.items()
    }
    for r in parts.get("icl_sweep", []):
        entry = next(e for e in results["icl_sweep"] if e["name"] == r["name"])
        entry["final_test"] = {k: float(r["arrays"][k][-1]) for k in ("test_icl_loss", "test_iwl_loss")}
    return results


INTRO = [
    "- Loss: the original's mean squared error of the query prediction (no ½). Theory: least squares "
    "restricted to the top-m principal directions of Λ (m = D: on the full cubic feature).",
    "",
    "- Initialisation (column init): `original` draws as the original code does for its "
    "`--init` (ATTN_S: std init/√(entries of each torch layer); ATTN_M and the MLP: std init; "
    "W_K's y column, ATTN_M's key-y/query-x block and the value's x entries start at 0); "
    "`paper`: the same with the layers of the original's code when the paper's figures were "
    "made (before its commit 6d24121 of 2025-12-28, which put all heads in one layer): "
    "ATTN_S's W_K, W_Q with std init/√(R·(D+1)) per head and W_V with std init — under the "
    "current code no rank of the rank sweep leaves its first plateau within the README's "
    "20,001 epochs; `uniform`: every entry ~ init·N(0, 1) (this workbench's convention "
    "before 2026-11-25, `--init_convention uniform`).",
    "",
]


def part_sections(parts: dict[str, list[dict]]) -> list[str]:
    """The runs' table, then the sections of the parts run: ATTN_M against the MLP, the staircase, the
    in-context against in-weight sweep."""
    lines = [
        "| run | model | init | epochs | loss first → last | least squares on z | drops: epochs | training |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        _summary_line(r)
        for part in ("merged_vs_mlp", "staircase", "staircase_uniform", "rank_sweep")
        for r in parts.get(part, [])
    ]
    if "merged_vs_mlp" in parts:
        lines += [""] + _equality_lines(parts["merged_vs_mlp"])
    if "staircase" in parts:
        lines += ["", "## Staircase: ATTN_S with rank-one heads, D = 4", ""] + _staircase_table(parts["staircase"][0])
    if "icl_sweep" in parts:
        lines += [
            "",
            "## In-context vs in-weight learning",
            "",
            "| c | final training loss | in-context test | in-weight test |",
            "|---|---|---|---|",
        ]
        for r in parts["icl_sweep"]:
            lines.append(
                f"| {r['settings']['task']['icl']:g} | {r['summary']['final_loss']:.4f} | "
                f"{r['arrays']['test_icl_loss'][-1]:.4f} | {r['arrays']['test_iwl_loss'][-1]:.4f} |"
            )
    return lines


def write_report(run: StudyRun) -> list[Path]:
    """run.head: src.provenance.git_commit() taken before anything was written."""
    jobs, report_dir = run.jobs, run.report_dir
    parts: dict[str, list[dict]] = {}
    for job in jobs:
        parts.setdefault(job.part, []).append(_run_record(job))
    figures, initialisation, written = figure_files(parts, report_dir)
    atomic_write_json(
        report_dir / RESULTS,
        {**study_fields(run), "results": results_of(parts), "figures": figures},
    )
    title = "Training dynamics of in-context learning in linear attention (Zhang et al., ICML 2025)"
    lines = header(title, run)
    lines += INTRO + part_sections(parts)
    lines += ["", "## Figures", ""] + [f"- `{f}` (initialisation: {initialisation[f]})" for f in figures] + [""]
    atomic_write_text(report_dir / REPORT, "\n".join(lines))
    return [report_dir / REPORT, report_dir / RESULTS, write_index(report_dir, run.head)] + written
