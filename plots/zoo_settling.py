"""The zoo's settling runs beside Zoology's figure 2: a section of report/ZOO.md from the settling
reports beside it (report/zoo_zoology_settling/, report/zoo_zoology_settling_long/; each written
by `python -m scripts.zoo --config configs/<folder>.yaml --report-dir report/<folder>`). Their
verdicts are in ZOO.md's "Beside the paper" table (plots/paper_rows_zoology.py ZOO_SETTLING).

    python -m plots.zoo_settling            # rewrite the section from the recorded results
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

from plots.beside_paper import HEADING as BESIDE, load_anchors, replace_titled
from plots.paper_rows_zoology import ZOO_CLAIMS
from src.files import atomic_write_text
from src.flags import OneLineParser, UsageError, add_both_spellings, summary

PROG = "python -m plots.zoo_settling"
HEADING = "## Under Zoology's block, at the best of three rates (the settling runs)"
GRID, LONG = "zoo_zoology_settling", "zoo_zoology_settling_long"
CELL = {"seq_len": 64, "kappa": 4, "width": 64}


def _read(folder: Path) -> tuple[dict, str] | None:
    """(zoo_results.json, the report's 'Produced ...' line) of a settling report, or None."""
    results, report = folder / "zoo_results.json", folder / "ZOO.md"
    if not results.is_file() or not report.is_file():
        return None
    produced = next((line[2:] for line in report.read_text().splitlines() if line.startswith("- Produced ")), "")
    return json.loads(results.read_text()), produced


def _in_cell(row: dict) -> bool:
    return all(row.get(k) == v for k, v in CELL.items())


def _best(data: dict | None, mixer: str) -> dict | None:
    rows = [r for r in (data or {}).get("results", []) if r.get("mixer") == mixer and _in_cell(r)]
    return rows[0] if rows else None


def _acc(row: dict | None) -> str:
    return "—" if row is None else f"{row['accuracy']:.3f}"


def _grid_lines(grid: tuple[dict, str], long: tuple[dict, str] | None, rates: list[float]) -> list[str]:
    """The grid's command, settings and rates; the 10×-steps grid's where it ran."""
    steps = sorted({r["steps"] for r in grid[0].get("results", []) if _in_cell(r)})
    lines = [
        f"- The grid: `{grid[0].get('command', '?')}` ({grid[1]}): T 64, κ 4, width 64, Zoology's block (no MLP, "
        f"positions for attention only, dropout 0.1), {', '.join(f'{s:,}' for s in steps)} steps, seed 0, rates "
        f"{', '.join(f'{r:g}' for r in rates)}: each mixer's best is its accuracy.",
    ]
    if long is not None:
        long_steps = sorted({r["steps"] for r in long[0].get("results", []) if _in_cell(r)})
        lines.append(
            f"- 10× the steps: `{long[0].get('command', '?')}` ({long[1]}): "
            f"{', '.join(f'{s:,}' for s in long_steps)} steps at each gated convolution's winning rate."
        )
    return lines


def _rate_table(every: list[dict], rates: list[float], grid: dict, long: dict | None, ours: dict, anchors) -> list[str]:
    """A row per mixer: its accuracy at each rate, its best, at 10× the steps, under our block, figure 2's."""
    head = " | ".join(f"{r:g}" for r in rates)
    lines = [
        "",
        f"| mixer | {head} | best (rate) | 10× steps | our block (ZOO.md) | figure 2 |",
        "|" + "---|" * (len(rates) + 5),
    ]
    for mixer in dict.fromkeys(r["mixer"] for r in every):
        cells = []
        for rate in rates:
            found = [r["accuracy"] for r in every if r["mixer"] == mixer and r["learning_rate"] == rate]
            cells.append(f"{found[0]:.3f}" if found else "—")
        best, longer, mine = _best(grid, mixer), _best(long, mixer), _best(ours, mixer)
        claim = anchors.claims.get(f"zoology.{ZOO_CLAIMS[mixer]}_t64" if mixer in ZOO_CLAIMS else "zoology.attention")
        chosen = "—" if best is None else f"{_acc(best)} ({best['learning_rate']:g})"
        paper = "—" if claim is None else f"{claim.value:g}"
        lines.append(f"| {mixer} | {' | '.join(cells)} | {chosen} | {_acc(longer)} | {_acc(mine)} | {paper} |")
    return lines


def _reading(mixers: list[str], grid: dict, long: dict | None, ours: dict) -> list[str]:
    """What the table says: whether Zoology's block closes the gated convolutions' gap (and their
    accuracy at 10× the steps), ending with a blank line."""
    gated = [m for m in mixers if m in ZOO_CLAIMS]
    best = {m: _best(grid, m) for m in gated}
    mine = {m: _best(ours, m) for m in gated}
    worse = [m for m in gated if best[m] and mine[m] and best[m]["accuracy"] < mine[m]["accuracy"]]
    return [
        "",
        "What it says: "
        + (
            f"Zoology's block does not close the gap at this budget: {', '.join(worse)} "
            "score lower under it than under ours, each at its best rate"
            if worse
            else "under Zoology's block the gated convolutions score at least what they score under ours"
        )
        + (
            "; at 10× the steps, " + ", ".join(f"{m} {_acc(_best(long, m))}" for m in gated if _best(long, m))
            if long is not None
            else ""
        )
        + ". The verdicts are in the table below, each row beside figure 2's number.",
        "",
    ]


def section(report_dir: Path) -> list[str]:
    """The section's lines (heading first, a blank line last); [] without the grid's report."""
    grid, long = _read(report_dir / GRID), _read(report_dir / LONG)
    if grid is None:
        return []
    ours = json.loads((report_dir / "zoo_results.json").read_text())
    anchors = load_anchors()
    every = [r for r in grid[0].get("every_rate", []) if _in_cell(r)]
    rates = sorted({r["learning_rate"] for r in every})
    mixers = list(dict.fromkeys(r["mixer"] for r in every))
    lines = [HEADING, ""] + _grid_lines(grid, long, rates)
    lines += _rate_table(every, rates, grid[0], long[0] if long else None, ours, anchors)
    return lines + _reading(mixers, grid[0], long[0] if long else None, ours)


def replace_section(text: str, new: list[str]) -> str:
    """`text` with this section replaced by `new`, or inserted before the "Beside the paper" section."""
    return replace_titled(text, HEADING, new, before=BESIDE)


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    add_both_spellings(parser, "--report-dir", default="report")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    report_dir = Path(args.report_dir)
    if not (report_dir / "ZOO.md").is_file() or not (report_dir / GRID / "zoo_results.json").is_file():
        raise UsageError(
            f"--report-dir={args.report_dir!r} has no ZOO.md with {GRID}/zoo_results.json beside it; "
            "accepted: the zoo's report folder after the settling grid ran"
        )
    path = report_dir / "ZOO.md"
    atomic_write_text(path, replace_section(path.read_text(), section(report_dir)))
    print(f"wrote the section of {path}")
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
