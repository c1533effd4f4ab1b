"""report/README.md: every shipped report with its headline figure, read from the report's own
results JSON, its provenance lines (commit, machine, date, training time) read from the report
itself, and the count of its verdicts beside the papers. Every study writes it again after its
report, so the index never lags a report; writing it first writes each report's "Beside the paper"
section from its results file and report/anchors.yaml (plots/beside_paper.py; a report whose
section would not change is left untouched).

    python -m plots.report_index            # rewrite report/README.md from what is in report/
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from src.flags import OneLineParser, dry_run, summary
from src.process import guarded
from src.files import atomic_write_text

PROG = "python -m plots.report_index"


def _mean(cell: dict | None) -> str:
    return "n/a" if not cell or cell.get("mean") is None else f"{cell['mean']:.3f}"


def _reproduction(data: dict) -> str:
    checks = data.get("checks", [])
    passed = sum(1 for c in checks if c.get("status") == "PASS")
    first = checks[0].get("detail", "") if checks else ""  # the first check: one LSA layer vs GD
    return f"{passed} PASS, {len(checks) - passed} MISMATCH" + (f"; {first}" if first else "")


def _mechanisms(data: dict) -> str:
    results = data.get("results", {})
    cells = {m: r["summary"].get("clean_n10") for m, r in results.items()}
    ranked = sorted(cells, key=lambda m: (cells[m] or {}).get("mean", float("inf")))
    return "error at n = 2d (mean over seeds): " + ", ".join(f"{m} {_mean(cells[m])}" for m in ranked)


def _mixers(data: dict) -> str:
    rows = [r for r in data.get("results", []) if r.get("kappa")]
    if not rows:
        return "n/a"
    width = max(r["width"] for r in rows)
    cells = []
    for kappa in sorted({r["kappa"] for r in rows}):
        parts = []
        for mixer in dict.fromkeys(r["mixer"] for r in rows):
            values = [r["accuracy"] for r in rows if (r["mixer"], r["kappa"], r["width"]) == (mixer, kappa, width)]
            if values:
                parts.append(f"{mixer} {sum(values) / len(values):.3f}")
        cells.append(f"κ = {kappa}: " + ", ".join(parts))
    return f"MQAR accuracy at width {width} (mean over seeds): " + "; ".join(cells)


def _lengthgen(data: dict) -> str:
    from src.tasks.objectives import objective_of

    tasks = data.get("summary", {})  # a regression task first (the study's headline), else any
    task = min(tasks, key=lambda t: objective_of(t).metric != "error", default=None)
    if task is None:
        return "n/a"
    cells = tasks[task]
    kept = [
        p
        for p, c in cells.items()
        if c and c.get("within_8x") and c["within_8x"][1] > 0 and c["within_8x"][0] == c["within_8x"][1]
    ]  # [seeds within 2x, seeds judged]
    fire = cells.get("fire") or {}
    return (
        f"{task}: within 2x at 8x the trained length in every seed: {', '.join(kept) or 'none'}; FIRE "
        f"{_mean(fire.get('in_distribution'))} in distribution, {_mean(fire.get('error_8x'))} at 8x"
    )


def _dynamics(data: dict) -> str:
    stair = (data.get("results", {}).get("staircase") or [{}])[0].get("dynamics", {})
    drops = [d["epoch"] for d in stair.get("drops", [])]
    return f"rank-one staircase: drops at epochs {', '.join(map(str, drops)) or 'none'}"


def _robustness(data: dict) -> str:
    models = data.get("models", {})
    parts = [
        f"{m} {(c.get('standard') or {}).get('mean', float('nan')):.3f} → "
        f"{(c.get('opposite_quadrants=original') or {}).get('mean', float('nan')):.3f}"
        for m, c in models.items()
    ]
    return (
        "error on standard prompts → with the query in a random orthant (limits_of_icl's quadrant shift): "
        + ", ".join(parts)
    )


def _linear_attention(data: dict) -> str:
    results = data.get("results", {})
    first = next(iter(results.values()), {}).get("curve_mean", {})
    at = len(first.get("gd_step", [])) - 1
    if at < 0:
        return "n/a"
    parts = [f"{label} {r['curve_mean']['model'][at]:.3f}" for label, r in results.items()]
    return f"error at n = {at} (mean over seeds): " + ", ".join(parts) + f"; one GD step {first['gd_step'][at]:.3f}"


def _sweep(data: dict) -> str:
    parts = [
        f"{name} {r['final']['mean']:.3f}" + (" (the study's)" if r.get("is_study") else "")
        for name, r in data.get("results", {}).items()
    ]
    return f"target metric at the end (mean over seeds; target {data['target']}): " + ", ".join(parts)


def _yarn_recency(data: dict) -> str:
    mean, points = data.get("mean_tail", {}), [k for k in data.get("mean_tail", {}) if k.startswith("dynamic_yarn@")]
    if not points:
        return "n/a"
    longest = max(points, key=lambda k: int(k.split("@")[1]))
    rope = longest.replace("dynamic_yarn", "rope")
    by_layer = lambda key: " / ".join(f"{sum(heads) / len(heads):.3f}" for heads in mean[key])
    return (
        f"attention on the last 20 % at {longest.split('@')[1]} points, by layer (mean over heads and seeds): "
        f"dynamic YaRN {by_layer(longest)}, the same weights as RoPE {by_layer(rope)} (uniform 0.2)"
    )


# report -> (its results JSON, its headline)
def _zoo(data: dict) -> str:
    """Where the gated convolutions fall (the report's verdict, first clause of each cell)."""
    verdict = data.get("verdict") or []
    return " ".join(line.lstrip("- ").split("; small-state")[0] + ";" for line in verdict) or "n/a"


def _task_diversity(data: dict) -> str:
    found = data.get("threshold")
    return (
        f"the model tracks ridge from pool size M = {found} on"
        if found is not None
        else "the model does not track ridge at any pool size run"
    )


def _task_diversity_finite(data: dict) -> str:
    found, switch = data.get("threshold_at_budget"), data.get("study_switch")
    rising = [m for m, r in data.get("rises", {}).items() if r]
    return (
        f"at {data.get('steps', 0):,} steps the distance to ridge rises for M = {', '.join(rising) or 'none'}; "
        f"threshold at this budget: {found if found is not None else 'above every M run'}"
        + (f" (the study's switch: M = {switch})" if switch is not None else "")
    )


def _matrix(data: dict) -> str:
    """The mixers nearest one GD step: loss / GD and the sensitivity cosine (mean over seeds)."""
    summary = data.get("summary", {})
    key = lambda m: (summary[m].get("loss_vs_gd") or {}).get("mean", float("inf"))
    ranked = sorted(summary, key=key)
    parts = [
        f"{m} {_mean(summary[m].get('loss_vs_gd'))} (cos {_mean(summary[m].get('align_cos'))})" for m in ranked[:3]
    ]
    return ("loss / one GD step's, lowest three (sensitivity cosine with GD): " + ", ".join(parts)) if parts else "n/a"


def _markov(data: dict) -> str:
    cells = data.get("cells", {})
    parts = [
        f"{name}: {100 * c['final_over_bigram']['mean']:+.1f} % against the bigram estimator"
        for name, c in cells.items()
        if c.get("final_over_bigram", {}).get("n")
    ]
    return "; ".join(parts) or "n/a"


def _mad(data: dict) -> str:
    holds = [c for c in data.get("checks", []) if c.get("holds")]
    return f"{len(holds)} of {len(data.get('checks', []))} of MAD's claims hold" if data.get("checks") else "n/a"


def _circuits(data: dict) -> str:
    checks = data.get("checks", {})
    parts = []
    l2 = checks.get("induction", {}).get("induction_L2")
    if l2:
        parts.append(f"2-layer induction head prefix {l2['best_prefix']:.2f}")
    if checks.get("probes"):
        parts.append(f"w_OLS probe R² {checks['probes']['w_ols_ridge']:.2f}")
    if checks.get("selection"):
        parts.append(f"mixture model / Bayes ≤ {max(checks['selection']['model_over_bayes'].values()):.2f}")
    return "; ".join(parts) or "n/a"


REPORTS: dict[str, tuple[str, Callable[[dict], str]]] = {
    "REPRODUCTION.md": ("reproduce_results.json", _reproduction),
    "MECHANISMS.md": ("mechanisms_results.json", _mechanisms),
    "MIXERS.md": ("mixers_results.json", _mixers),
    "ZOO.md": ("zoo_results.json", _zoo),
    "TASK_DIVERSITY.md": ("task_diversity_results.json", _task_diversity),
    "TASK_DIVERSITY_FINITE.md": ("task_diversity_finite_results.json", _task_diversity_finite),
    "MATRIX.md": ("matrix_results.json", _matrix),
    "LENGTHGEN.md": ("lengthgen_results.json", _lengthgen),
    "DYNAMICS.md": ("dynamics_results.json", _dynamics),
    "ROBUSTNESS.md": ("robustness_results.json", _robustness),
    "LINEAR_ATTENTION.md": ("linear_attention_results.json", _linear_attention),
    "SWEEP_MECHANISMS.md": ("sweep_mechanisms_results.json", _sweep),
    "SWEEP_LENGTHGEN.md": ("sweep_lengthgen_results.json", _sweep),
    "YARN_RECENCY.md": ("yarn_recency_results.json", _yarn_recency),
    "MARKOV.md": ("markov_results.json", _markov),
    "MAD.md": ("mad_results.json", _mad),
    "CIRCUITS.md": ("circuits_results.json", _circuits),
}
PROVENANCE = ("- Produced", "- Date:", "- Git commit:", "- Machine:", "- Training:")


def write_index(report_dir: Path, head: dict | None = None) -> Path:
    """report_dir/README.md from the reports in it (missing ones are left out), after writing each
    report's "Beside the paper" section. `head`: src.provenance.git_commit() taken before the
    caller wrote anything (a study's own report would otherwise mark the tree changed); taken
    here when None (the command line, which has written nothing yet)."""
    from plots.beside_paper import VERDICTS, counted, tally, write_section
    from src.provenance import git_commit

    head = head if head is not None else git_commit()  # once: a section written must not mark the rest dirty
    lines = []
    totals = {w: 0 for w in VERDICTS}
    for report, (results, headline) in REPORTS.items():
        path = report_dir / report
        if not path.is_file():
            continue
        write_section(report_dir, report, results, head)
        counts = tally(path.read_text(encoding="utf-8"))
        totals = {w: totals[w] + counts[w] for w in VERDICTS}
        text = path.read_text(encoding="utf-8").splitlines()
        title = text[0].lstrip("# ").strip() if text else report
        try:
            line = headline(json.loads((report_dir / results).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            line = "(results file unreadable)"
        lines += [
            f"## [{title}]({report})",
            "",
            f"- Headline: {line}",
            "- Beside the paper: " + (counted(counts) if any(counts.values()) else "no claim of a paper measured"),
        ]
        lines += [t for t in text[:12] if t.startswith(PROVENANCE)] + [""]
    lines = [
        "# Reports",
        "",
        "Each study writes its report, its results (JSON) and its figures here; this index is written "
        "again after every study. Headlines are read from each report's results file; verdicts from "
        "each report's \"Beside the paper\" table (the papers' numbers: report/anchors.yaml).",
        "",
        f"- Verdicts beside the papers, all reports: {counted(totals)}.",
        "",
    ] + lines
    out = report_dir / "README.md"
    atomic_write_text(out, "\n".join(lines))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--report-dir", default="report", help="the reports' folder")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if dry_run(PROG, f"write {Path(args.report_dir) / 'README.md'}"):
        return 0
    print(write_index(Path(args.report_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
