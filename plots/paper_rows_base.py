"""The pieces every "Beside the paper" row builder shares (plots/paper_rows.py and its per-paper
modules plots/paper_rows_*.py): `Budget` (what a run trained on), `Row` (our number for one claim),
our studies' budgets as shipped (sequences = steps × batch of configs/) and the helpers that read a
recorded statistic ({mean, values}: the mean over seeds and the per-seed values) into a row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """What a run trained on: sequences seen (steps × batch, or epochs × the fixed set), the model
    (layers × width) and the learning-rate protocol."""

    sequences: int | None
    model: str
    rates: str


@dataclass(frozen=True)
class Row:
    """Our number for one claim: `value` (mean over seeds), `values` (per seed, for the range),
    what it is (`ours`: the setting in a few words), our `budget`, and `unlike` when our setting
    differs from the paper's in kind (the verdict is then "not comparable", saying this)."""

    claim: str
    value: float | None
    ours: str
    budget: Budget
    values: tuple[float, ...] = ()
    unlike: str = ""
    digits: int = 3


# our studies' budgets (sequences = steps × batch of the shipped configs)
GD_PAPER = Budget(5000 * 2048, "1 LSA layer (d = 10)", "Adam 1e-3, one rate")
GD_TWOLAYER = Budget(10000 * 2048, "2 attention layers (d = 10)", "Adam 1e-3, one rate")
GD_SINE = Budget(8000 * 512, "MLP + LSA layer", "Adam 1e-3, one rate")
MECHANISMS = Budget(7000 * 64, "3 × 64, 4 heads (d = 5)", "Adam 2e-3 warm-up + decay, one rate")
MIXERS = Budget(1500 * 64, "2 × 64, attention + MLP (V 256)", "AdamW 3e-3, one rate")
ZOO = Budget(1500 * 64, "2 × 64, 1 head, + MLP (V 256)", "AdamW 3e-3, one rate")
MATRIX = Budget(2500 * 64, "2 × 64, 4 heads, + MLP (d = 10)", "Adam 2e-3 warm-up + decay, one rate")
TASK_DIVERSITY = Budget(5000 * 64, "3 × 64, 4 heads", "Adam 2e-3 warm-up + decay, one rate")
LENGTHGEN = Budget(1500 * 64, "2 × 32 Llama, 2 heads", "AdamW 2e-3, one rate")
YARN_RECENCY = Budget(6000 * 64, "2 × 64 Llama, 4 heads", "AdamW 1e-3 warm-up + decay, one rate")
MAD = Budget(600 * 32, "2 × 64, [mixer, SwiGLU] × 2, 4 heads", "AdamW 3e-3, one rate")  # the recall tasks
MAD_COPYING = Budget(400 * 32, MAD.model, MAD.rates)  # selective copying trains 400 steps
MAD_MEMORIZATION = Budget(1000 * 32, MAD.model, MAD.rates)  # memorization trains 1,000 steps
MARKOV = Budget(6000 * 64, "2 × 16 attention-only, 1 head, relative positions", "AdamW 5e-4, one rate")
INDUCTION = Budget(2000 * 64, "1-2 × 64 attention-only, 2 heads, rotary positions", "AdamW 1e-3, one rate")


def circuits_gpt2(gpt2: dict) -> Budget:
    """The circuits study's GPT-2 budget from its recorded GPT-2 (plots/circuits_probes.recorded_gpt2)."""
    rate = f"{gpt2['learning_rate']:.0e}".replace("e-0", "e-")
    return Budget(
        gpt2["steps"] * gpt2["batch_size"],
        f"{gpt2['layers']} × {gpt2['width']}, {gpt2['heads']} heads (d = 5)",
        f"Adam {rate} warm-up + decay, one rate",
    )


DYNAMICS = Budget(6001 * 5000, "linear attention, D = 4 (their defaults)", "full-batch GD 1e-3")


def _values(stats: dict | None) -> tuple[float, ...]:
    return tuple(float(v) for v in (stats or {}).get("values", []) if v is not None and not math.isnan(v))


def _mean(stats: dict | None) -> float | None:
    return None if not stats or stats.get("mean") is None else float(stats["mean"])


def _ratio(top: dict | None, bottom: dict | None) -> tuple[float | None, tuple[float, ...]]:
    """mean(top) / mean(bottom), and the per-seed ratios where both have a value per seed."""
    mean_top, mean_bottom = _mean(top), _mean(bottom)
    if mean_top is None or not mean_bottom:
        return None, ()
    a, b = _values(top), _values(bottom)
    return mean_top / mean_bottom, tuple(x / y for x, y in zip(a, b) if y) if len(a) == len(b) else ()


def _stat_row(claim: str, stats: dict | None, ours: str, budget: Budget, digits: int = 3, unlike: str = "") -> Row:
    return Row(claim, _mean(stats), ours, budget, _values(stats), unlike, digits)


def _ratio_row(claim: str, top: dict | None, bottom: dict | None, ours: str, budget: Budget, unlike: str = "") -> Row:
    value, values = _ratio(top, bottom)
    return Row(claim, value, ours, budget, values, unlike)
