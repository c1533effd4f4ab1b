"""Protocol sweeps: how a study's shipped training settings were chosen. A sweep trains the
study's headline cell under a few protocols (learning rate, schedule, curriculum, width, steps),
3 seeds each, and reports its target metric at the end of training and against the budget.

    python -m scripts.protocol_sweep mechanisms            # softmax_causal under configs/sweeps/mechanisms/*.yaml
    python -m scripts.protocol_sweep lengthgen             # FIRE on linear regression under
    configs/sweeps/lengthgen/*.yaml
    python -m scripts.protocol_sweep mechanisms --quick    # every protocol at the study's quick size, seed 0
    python -m scripts.protocol_sweep lengthgen --protocols w32_decay_8k

A protocol is a config file the study reads as its own (`--config`); its runs are the study's
runs of that cell (same names, settings and code fingerprint), in runs/sweeps/<study>/<protocol>/,
all protocols in one plan so every worker stays busy; finished runs are reused. The report is
report/SWEEP_<STUDY>.md, report/sweep_<study>_results.json and
report/figures/sweeps/<study>.png: per protocol the keys it changes from the study's config, the
target metric at the end (mean ± sample std over seeds), seconds per run, and the metric
(mean over seeds) at every logged step. The row whose settings equal the study's config is marked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from src.flags import UsageError
from src.yaml_includes import load as load_yaml
from src.jobs.declared import Cell, CellJob, Study, StudyRun, quick_seeds
from src.jobs.study import run_as_command, study_command
from src.provenance import checkout_path

LENGTH_COLUMNS = "in-distribution, the study's eval tasks | 8× the trained length | within 2× at 8× (seeds) | "


@dataclass(frozen=True)
class Sweep:
    """One study's sweep: its cell, its protocols' folder and its targets."""

    study_config: str  # the study's own config (the shipped protocol)
    protocols: str  # folder of protocol configs
    cell: str  # what is trained, in words
    metric: str  # the target metric, in words (metrics.jsonl's eval_error_last)
    target: float  # the metric's target (at most)
    cells: Callable[[str, bool], list[Cell]]  # (config, quick) -> the study's cell (its runs, seeds apart)
    gap_below_d: bool = False  # also report the ICL curve's largest gap to least squares below d
    gap_target: float | None = None
    length_gen: bool = False  # also report the length study's in-distribution and 8x errors


def _mechanisms_cells(config: str, quick: bool) -> list[Cell]:
    from scripts import mechanisms

    return mechanisms.mechanism_cells(["softmax_causal"], quick, config)


def _lengthgen_cells(config: str, quick: bool) -> list[Cell]:
    from scripts import lengthgen

    return lengthgen.length_cells(["fire"], ["linear_regression"], quick, None, config)


SWEEPS = {
    "mechanisms": Sweep(
        "configs/mechanisms.yaml",
        "configs/sweeps/mechanisms",
        "softmax_causal (limits_of_icl's GPT-2 cell: 3 layers, width 64, d = 5, 11 points)",
        "error at n = 2d (squared error / d)",
        0.05,
        _mechanisms_cells,
        gap_below_d=True,
        gap_target=0.1,
    ),
    "lengthgen": Sweep(
        "configs/lengthgen.yaml",
        "configs/sweeps/lengthgen",
        "FIRE on linear regression (the length study's Llama cell, trained to 21 points)",
        "in-distribution error, n = L − 1 (squared error / d)",
        0.05,
        _lengthgen_cells,
        length_gen=True,
    ),
}
SEEDS = (0, 1, 2)


def _flat(tree, prefix: str = "") -> dict:
    if not isinstance(tree, dict):
        return {prefix: tree}
    out = {}
    for key, value in tree.items():
        out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def changes(study_config: str, protocol: Path) -> dict[str, str]:
    """Dotted key -> 'study value → protocol value' for every key the protocol changes
    (out_dir aside: the study sets each run's directory)."""
    study = _flat(load_yaml(study_config))
    mine = _flat(load_yaml(protocol))
    return {
        key: f"{study.get(key, '(absent)')} → {mine.get(key, '(absent)')}"
        for key in sorted(set(study) | set(mine))
        if key != "out_dir" and study.get(key, "(absent)") != mine.get(key, "(absent)")
    }


def protocol_files(sweep: Sweep, names: str | None) -> list[Path]:
    found = {p.stem: p for p in sorted(checkout_path(sweep.protocols).glob("*.yaml"))}
    if not found:
        raise UsageError(f"{sweep.protocols}: no protocol configs (*.yaml); accepted: a folder of study configs")
    if names is None:
        return list(found.values())
    wanted = list(dict.fromkeys(n.strip() for n in names.split(",")))
    for name in wanted:
        if name not in found:
            raise UsageError(f"--protocols={names!r}: unknown protocol {name!r}; accepted: {', '.join(found)}")
    return [found[n] for n in wanted]


def protocol_cells(sweep: Sweep, protocols: Sequence[Path], quick: bool) -> list[Cell]:
    """The study's cell under every protocol, each run named <protocol>/<run> (under
    runs_dir/<protocol>/, where the study run on that protocol's config puts it)."""
    return [
        replace(cell, name=f"{path.stem}/{cell.name}", tags={**cell.tags, "protocol": path.stem})
        for path in protocols
        for cell in sweep.cells(str(path), quick)
    ]


def budget_curve(run) -> dict[int, float]:
    """step -> the target metric logged at that step (metrics.jsonl's eval_error_last)."""
    from src.rundir import names

    out = {}
    for line in run.file(names.METRICS).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if "eval_error_last" in row:
            out[int(row["step"])] = float(row["eval_error_last"])
    return out


def gap_below_d(run, n_dims: int) -> list[float]:
    """The model's ICL curve minus least squares' at n = 0 .. d − 1 (analysis/icl_curve.csv)."""
    from plots.mechanisms_report import icl_curve_means

    curves = icl_curve_means(run)
    return [m - ls for m, ls in zip(curves["model"][:n_dims], curves["least_squares"][:n_dims])]


def length_gen(run) -> dict:
    """The length study's analysis of one run (analysis/length_gen.json, written when missing):
    in-distribution error on its own eval tasks, and the error and within-2x verdict at 8x."""
    from analysis import length_gen as analysis
    from plots.lengthgen_report import FACTOR
    from src.rundir import names

    if not run.exists(names.LENGTH_GEN_JSON):
        analysis.run(run, FACTOR)
    return run.load_json(names.LENGTH_GEN_JSON)


def collect(sweep: Sweep, jobs: Sequence[CellJob], protocols: Sequence[Path]) -> dict:
    from src.stats import over_seeds
    from src.rundir import names

    results = {}
    for path in protocols:
        mine = [j for j in jobs if j.protocol == path.stem]
        summaries = [j.run.load_json(names.SUMMARY) for j in mine]
        curves = [budget_curve(j.run) for j in mine]
        steps = sorted(set.intersection(*(set(c) for c in curves)))
        changed = changes(sweep.study_config, path)
        record = {
            "changes": changed,
            "is_study": not changed,
            "seeds": [j.seed for j in mine],
            "steps": mine[0].settings.train.steps,
            "final": over_seeds([s["eval_error_last"] for s in summaries]),
            "train_seconds": over_seeds([s["train_seconds"] for s in summaries]),
            "budget": {str(s): float(np.mean([c[s] for c in curves])) for s in steps},
        }
        if sweep.gap_below_d:
            n_dims = mine[0].settings.model.n_dims
            gaps = np.mean([gap_below_d(j.run, n_dims) for j in mine], axis=0)  # of the mean curve
            record["max_gap_below_d"] = float(np.max(gaps))
        if sweep.length_gen:
            gens = [length_gen(j.run) for j in mine]
            at_8x = [g["multiples"].get("8") for g in gens]
            record["in_distribution"] = over_seeds([g["in_distribution_error"] for g in gens])
            record["error_8x"] = over_seeds([c["error"] for c in at_8x if c])
            record["within_2x_at_8x"] = [sum(bool(c and c["within_2x"]) for c in at_8x), len(at_8x)]
        results[path.stem] = record
    return results


def _verdict(sweep: Sweep, record: dict) -> str:
    met = record["final"]["mean"] <= sweep.target
    if sweep.gap_below_d:
        met = met and record["max_gap_below_d"] <= sweep.gap_target
    if sweep.length_gen:  # the length study's own measure, and FIRE's claim at 8x in every seed
        kept, judged = record["within_2x_at_8x"]
        met = record["in_distribution"]["mean"] <= sweep.target and kept == judged
    return "met" if met else "not met"


def figure(sweep: Sweep, results: dict):
    from plots.style import line_colors, new_figure

    fig = new_figure(6.4, 3.8)
    ax = fig.add_subplot(1, 1, 1)
    for color, (name, record) in zip(line_colors(len(results)), results.items()):
        steps = [int(s) for s in record["budget"]]
        ax.plot(
            steps,
            list(record["budget"].values()),
            marker="o",
            ms=3,
            color=color,
            label=name + (" (the study's)" if record["is_study"] else ""),
        )
    ax.axhline(sweep.target, color="k", ls="--", lw=1, label=f"target {sweep.target}")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel(sweep.metric, fontsize=8)
    ax.set_title(f"{sweep.cell}: mean over seeds", fontsize=8)
    ax.legend(fontsize=7)
    return fig


def method_lines(sweep: Sweep, study: str, jobs: Sequence[CellJob]) -> list[str]:
    """The runs' commits, the metric and its target, and where the protocols come from."""
    from src.stats import STD_LABEL

    commits = sorted({str(j.run.load_config().get("git", {}).get("commit", "unknown"))[:12] for j in jobs})
    gap = f", and the ICL curve ≤ {sweep.gap_target} above least squares for every n < d (of the mean curve)"
    length = (
        " on the study's own in-distribution measure (analysis/length_gen.json), and within 2× of "
        "it at 8× the trained length in every seed"
    )
    return [
        f"- Runs trained at commit {', '.join(commits)} (their config.json)",
        f"- Metric: {sweep.metric}, on each run's fixed eval tasks (training.eval_size of them, "
        f"logged in metrics.jsonl); mean ± {STD_LABEL}. Target: ≤ {sweep.target}"
        + (gap if sweep.gap_below_d else "")
        + (length if sweep.length_gen else ""),
        f"- Each protocol is configs/sweeps/{study}/<protocol>.yaml, the study's config "
        f"({sweep.study_config}) with the changes listed",
        "",
    ]


def table_lines(sweep: Sweep, results: dict) -> list[str]:
    """The protocols' table: changes, steps, the metric at the end, the verdict, seconds per run."""
    from src.stats import format_pm

    lines = [
        "| protocol | changes from the study's config | steps | at the end | "
        + ("max gap to LS, n < d | " if sweep.gap_below_d else "")
        + (LENGTH_COLUMNS if sweep.length_gen else "")
        + "verdict | training |",
        "|---" * (6 + sweep.gap_below_d + 3 * sweep.length_gen) + "|",
    ]
    for name, record in results.items():
        changed = "; ".join(f"{k}: {v}" for k, v in record["changes"].items()) or "none"
        label = f"**{name}** (the study's)" if record["is_study"] else name
        gap = f"{record['max_gap_below_d']:.3f} | " if sweep.gap_below_d else ""
        if sweep.length_gen:
            kept, judged = record["within_2x_at_8x"]
            gap += (
                f"{format_pm(record['in_distribution'], 3)} | {format_pm(record['error_8x'], 3)} | {kept}/{judged} | "
            )
        lines.append(
            f"| {label} | {changed} | {record['steps']} | {format_pm(record['final'], 3)} | {gap}"
            f"{_verdict(sweep, record)} | {record['train_seconds']['mean']:.0f} s/run |"
        )
    return lines


def budget_lines(sweep: Sweep, results: dict) -> list[str]:
    """The metric (mean over seeds) at every thousandth logged step, a protocol a row."""
    lines = ["", f"## {sweep.metric} against steps (mean over seeds)", ""]
    every = sorted({int(s) for r in results.values() for s in r["budget"]})
    shown = [s for s in every if s % 1000 == 0] or every
    lines += ["| protocol | " + " | ".join(str(s) for s in shown) + " |", "|---" * (len(shown) + 1) + "|"]
    for name, record in results.items():
        lines.append(
            f"| {name} | "
            + " | ".join(f"{record['budget'][str(s)]:.3f}" if str(s) in record["budget"] else "" for s in shown)
            + " |"
        )
    return lines


def write_report(run: StudyRun) -> list[Path]:
    from plots.provenance import header, study_fields
    from plots.report_index import write_index
    from plots.style import png_bytes
    from src.files import atomic_write_bytes, atomic_write_json, atomic_write_text

    study, jobs, report_dir = run.flags.study, run.jobs, run.report_dir
    sweep, protocols = SWEEPS[study], protocol_files(SWEEPS[study], run.flags.protocols)
    results = collect(sweep, jobs, protocols)
    report, data, fig = f"SWEEP_{study.upper()}.md", f"sweep_{study}_results.json", f"figures/sweeps/{study}.png"
    atomic_write_bytes(report_dir / fig, png_bytes(figure(sweep, results)))
    atomic_write_json(
        report_dir / data,
        {
            **study_fields(run),
            "target": sweep.target,
            "gap_target": sweep.gap_target,
            "results": results,
            "figures": [fig],
        },
    )
    title = f"Protocol sweep of the {study} study: {sweep.cell}"
    lines = header(title, run)
    lines += method_lines(sweep, study, jobs) + table_lines(sweep, results) + budget_lines(sweep, results)
    lines += ["", "## Figures", "", f"- `{fig}`", ""]
    atomic_write_text(report_dir / report, "\n".join(lines))
    return [report_dir / report, report_dir / data, report_dir / fig, write_index(report_dir, run.head)]


def add_flags(parser) -> None:
    parser.add_argument("study", choices=list(SWEEPS), help="the study whose protocols to sweep")
    parser.add_argument(
        "--protocols",
        default=None,
        help="comma list of protocol names (configs/sweeps/<study>/<name>.yaml; default: all)",
    )


STUDY = Study(
    "protocol_sweep",
    __doc__,
    "every protocol at the study's quick size, seed 0 (a smoke test)",
    cells=lambda flags, runs_dir: protocol_cells(
        SWEEPS[flags.study], protocol_files(SWEEPS[flags.study], flags.protocols), flags.quick
    ),
    report=write_report,
    seeds=quick_seeds(SEEDS),
    flags=add_flags,
    check=lambda flags: protocol_files(SWEEPS[flags.study], flags.protocols),
    runs_name=lambda flags: f"sweeps/{flags.study}",
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
