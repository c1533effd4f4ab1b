"""Reading a sweep's results CSV (eval_order / eval_noise) for the figure templates: the
rows, the condition each row belongs to ("order", "noise", "p", "σ", "placement"; "a→b" when
training and evaluation differ), and aggregates over seeds (src.stats: sample std, ddof 1).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

from src.stats import std_over_seeds

REQUIRED = ("model", "seed", "eval_loss")
# Condition parts: name -> (train column, eval column, shared column used when those are absent)
PARTS = {
    "order": ("train_ordering", "eval_ordering", "ordering"),
    "noise": ("train_noise_mode", "eval_noise_mode", "noise_mode"),
    "p": ("train_noise_p", "eval_noise_p", "p"),
    "σ": ("train_noise_sigma", "eval_noise_sigma", "sigma"),
    "placement": ("train_noise_placement", "eval_noise_placement", "placement"),
}


# ---------------------------------------------------------------------------
# Reading and describing rows


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def part_value(row: pd.Series, part: str) -> str:
    train_col, eval_col, shared_col = PARTS[part]
    if train_col in row.index and eval_col in row.index:
        a, b = _text(row[train_col]), _text(row[eval_col])
        return a if a == b else f"{a or '–'}→{b or '–'}"
    return _text(row.get(shared_col))


def load_results(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path} lacks column(s) {', '.join(missing)}; accepted: a CSV written by python -m eval_order / eval_noise"
        )
    for part in PARTS:
        frame[f"_{part}"] = [part_value(row, part) for _, row in frame.iterrows()]
    return frame


def varying(frame: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    return [p for p in PARTS if p not in exclude and frame[f"_{p}"].nunique(dropna=False) > 1]


def label_column(frame: pd.DataFrame, parts: Sequence[str], fallback: str = "all runs") -> pd.Series:
    def label(row):
        bits = [(row[f"_{p}"] if p == "order" else f"{p}={row[f'_{p}']}") for p in parts if row[f"_{p}"]]
        return ", ".join(bits) or fallback

    return frame.apply(label, axis=1) if len(frame) else pd.Series([], dtype=str)


def mean_std(frame: pd.DataFrame, keys: list[str], column: str) -> pd.DataFrame:
    """Mean, std over seeds (src.stats: sample std, ddof 1; 0 for one seed) and count of
    `column` per `keys` (NaN values dropped)."""
    data = frame[keys + [column]].copy()
    data[column] = pd.to_numeric(data[column], errors="coerce")
    data = data.dropna(subset=[column])
    grouped = data.groupby(keys, sort=False)[column]
    out = grouped.agg(mean="mean", std=lambda s: std_over_seeds(s.to_numpy()), n="count")
    return out.reset_index()


def has_values(frame: pd.DataFrame, column: str) -> bool:
    return column in frame.columns and pd.to_numeric(frame[column], errors="coerce").notna().any()
