"""The mixers study's checks and cell selection (plots/mixers_report.py, scripts.mixers): a `Check`
is a claim about the study's rows (one dict per run: mixer, task, width, κ, seed, accuracy, ...),
`evaluate` scores it on them, and `_cell` gathers one metric over seeds ({n, mean, std, ...}) of the
rows that match.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from src.stats import over_seeds

CELL = ("task", "width", "kappa", "seed")  # what a row and its reference row share


@dataclass(frozen=True)
class Check:
    """A claim about the study's rows: every row whose fields equal `where` (and are at least
    `minimum`) has `metric` in [low, high]; with `reference`, the metric minus that of the row
    of the same cell (task, width, κ, seed) whose fields equal `reference`."""

    claim: str
    where: dict
    metric: str
    low: float = -math.inf
    high: float = math.inf
    minimum: dict = field(default_factory=dict)
    reference: dict | None = None


def _matches(row: dict, where: dict, minimum: dict | None = None) -> bool:
    return all(row.get(k) == v for k, v in where.items()) and all(
        row.get(k) is not None and row[k] >= v for k, v in (minimum or {}).items()
    )


def evaluate(check: Check, rows: Sequence[dict]) -> dict:
    """{claim, bounds, values [{run, value}], worst, status}: status "pass" when every matched
    row is within the bounds, "FAIL" when one is not, "n/a" when no row (or reference) matched."""
    values = []
    for row in rows:
        if not _matches(row, check.where, check.minimum) or row.get(check.metric) is None:
            continue
        value = float(row[check.metric])
        if check.reference is not None:
            ref = next(
                (
                    r
                    for r in rows
                    if _matches(r, {**{k: row[k] for k in CELL}, **check.reference}) and r.get(check.metric) is not None
                ),
                None,
            )
            if ref is None:
                continue
            value -= float(ref[check.metric])
        values.append({"run": row["run"], "value": value})
    inside = [check.low <= v["value"] <= check.high for v in values]
    bounds = ("difference " if check.reference is not None else "") + (
        f"in [{check.low:g}, {check.high:g}]"
        if math.isfinite(check.low) and math.isfinite(check.high)
        else f">= {check.low:g}"
        if math.isfinite(check.low)
        else f"<= {check.high:g}"
    )
    worst = None
    if values:  # the value furthest past (or closest to) the bounds
        worst = min((v["value"] for v in values), key=lambda x: min(x - check.low, check.high - x))
    return {
        "claim": check.claim,
        "metric": check.metric,
        "bounds": bounds,
        "relative": check.reference is not None,
        "values": values,
        "worst": worst,
        "status": "n/a" if not values else "pass" if all(inside) else "FAIL",
    }


def _cell(rows: list[dict], metric: str, **where) -> dict:
    return over_seeds([r[metric] for r in rows if _matches(r, where)])
