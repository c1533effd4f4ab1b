"""The "Beside the paper" rows of the ICL benchmark's (miniseq) and Zoology's claims
(plots/paper_rows.py ROWS): the mixers study (MIXERS.md) and the zoo (ZOO.md, with its settling
runs' rows, ZOO_SETTLING); an accuracy cell is {mean, values} over seeds of MQAR accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path

from plots.paper_rows_base import MIXERS, ZOO, Budget, Row, _stat_row


def _accuracies(rows: list[dict], **match) -> dict:
    values = [
        r["accuracy"] for r in rows if r.get("accuracy") is not None and all(r.get(k) == v for k, v in match.items())
    ]
    return {"mean": sum(values) / len(values), "values": values} if values else {}


def mixers(data: dict, report_dir: Path) -> list[Row]:
    rows = [r for r in data.get("results", []) if r.get("kappa")]
    out = [
        _stat_row(
            "miniseq.attention_mqar",
            _accuracies(rows, mixer="attention", kappa=8, width=64),
            "attention + MLP, T 64, κ 8, width 64, V 256",
            MIXERS,
        )
    ]
    for kappa in (4, 16):
        out.append(
            _stat_row(
                "zoology.attention",
                _accuracies(rows, mixer="attention", kappa=kappa, width=64),
                f"attention + MLP, T 64, κ {kappa}, width 64, V 256"
                + (" (not one of figure 2's cells: its κ 16 is at T 256)" if kappa == 16 else ""),
                MIXERS,
            )
        )
    return out


ZOO_CLAIMS = {
    "base_conv+base_conv:kernel_size=-1": "base_conv",
    "hyena": "hyena",
    "h3": "h3",
    "rwkv7": "rwkv",
    "base_conv+rwkv7": "rwkv",
}


def zoo_budget(data: dict) -> Budget:
    """The zoo's budget as its results say: the block (run names end _zoology_block under Zoology's)
    and the rates tried (every_rate), at the shipped steps and batch."""
    runs = [r.get("run", "") for r in data.get("every_rate", data.get("results", []))]
    rates = sorted({r["learning_rate"] for r in data.get("every_rate", []) if r.get("learning_rate")})
    zoology = bool(runs) and all("_zoology_block" in name for name in runs)
    model = "2 × 64, 1 head, Zoology's block (no MLP; V 256)" if zoology else ZOO.model
    said = (
        f"AdamW, best of {', '.join(f'{r:g}' for r in rates)}"
        if len(rates) > 1
        else f"AdamW {rates[0]:g}, one rate"
        if rates
        else ZOO.rates
    )
    seen = {r["steps"] * r["batch_size"] for r in data.get("results", []) if r.get("steps") and r.get("batch_size")}
    return Budget(max(seen) if seen else ZOO.sequences, model, said)


# the zoo's settling runs (report/<folder>/zoo_results.json beside report/ZOO.md): folder -> what they are
ZOO_SETTLING = {
    "zoo_zoology_settling": "Zoology's block, best of 3 rates",
    "zoo_zoology_settling_long": "Zoology's block, 10× the steps at the winning rate",
}


def zoo(data: dict, report_dir: Path, label: str = "") -> list[Row]:
    """The zoo's rows; in report/ZOO.md also its settling runs' (ZOO_SETTLING), labelled."""
    paths = {words: report_dir / folder / "zoo_results.json" for folder, words in ZOO_SETTLING.items()}
    settling = (
        []
        if label
        else [
            row
            for words, path in paths.items()
            if path.is_file()
            for row in zoo(json.loads(path.read_text()), path.parent, words)
        ]
    )
    rows, out, budget, label = data.get("results", []), [], zoo_budget(data), f", {label}" if label else ""
    for t, kappa in sorted({(r["seq_len"], r["kappa"]) for r in rows if r.get("width") == 64}):
        tag = {64: "t64", 128: "t128"}.get(t)
        found = _accuracies(rows, mixer="attention", seq_len=t, kappa=kappa, width=64)
        if found:
            out.append(_stat_row("zoology.attention", found, f"attention, T {t}, κ {kappa}, width 64{label}", budget))
        for mixer, name in ZOO_CLAIMS.items():
            found = _accuracies(rows, mixer=mixer, seq_len=t, kappa=kappa, width=64)
            if tag and found:
                unlike = "RWKV-7 here, RWKV-4 in the figure" if name == "rwkv" else ""
                out.append(
                    _stat_row(
                        f"zoology.{name}_{tag}",
                        found,
                        f"{mixer}, T {t}, κ {kappa}, width 64{label}",
                        budget,
                        unlike=unlike,
                    )
                )
    return out + settling
