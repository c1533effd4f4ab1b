"""The "Beside the paper" rows of von Oswald et al.'s claims (plots/paper_rows.py ROWS): the
reproduction (REPRODUCTION.md) and the matrix of mixers (MATRIX.md, with its settling runs' rows
from report/matrix_settling_results.json).
"""

from __future__ import annotations

import json
from pathlib import Path

from plots.paper_rows_base import (
    GD_PAPER,
    GD_SINE,
    GD_TWOLAYER,
    MATRIX,
    Budget,
    Row,
    _mean,
    _ratio_row,
    _stat_row,
    _values,
)


def reproduction(data: dict, report_dir: Path) -> list[Row]:
    res = data.get("results", {})
    one, k4 = res.get("one_step_gd", {}), res.get("k_steps", {}).get("4", {})
    copy, sine = res.get("copy", {}), res.get("nonlinear", {}).get("final", {})
    rel = one.get("rel_gap") or {}
    gap_values = tuple(1 + v for v in _values(rel))
    rows = [
        Row("von_oswald.gd_loss", one.get("gd_loss"), "one GD step, η tuned, 10,000 eval tasks", GD_PAPER, digits=4),
        Row(
            "von_oswald.lsa_is_gd",
            None if _mean(rel) is None else 1 + _mean(rel),
            "lsa1, 5,000 steps, 3 seeds",
            GD_PAPER,
            gap_values,
            digits=4,
        ),
        _stat_row(
            "von_oswald.lsa_align",
            one.get("final", {}).get("align_cos"),
            "lsa1's sensitivity cosine",
            GD_PAPER,
            digits=4,
        ),
    ]
    tf, gdk = k4.get("tf_loss"), k4.get("gdk_loss")
    if isinstance(gdk, (int, float)) and tf:
        rows.append(
            Row(
                "von_oswald.recurrent_k_steps",
                _mean(tf) / gdk,
                "4 recurrent LSA layers / 4 GD steps",
                GD_PAPER,
                tuple(v / gdk for v in _values(tf)),
            )
        )
    rows.append(
        _stat_row(
            "von_oswald.copy_then_gd",
            copy.get("final", {}).get("eval_loss"),
            "twolayer, 10,000 steps",
            GD_TWOLAYER,
            digits=4,
        )
    )
    rows.append(
        _ratio_row(
            "von_oswald.sine_features_gd",
            sine.get("mlp_lsa"),
            sine.get("features_gd"),
            "MLP + LSA / GD on learned features, 8,000 steps at batch 512",
            GD_SINE,
        )
    )
    return rows


# --- von Oswald et al.'s claim on the matrix of mixers: mixer -> (claim, what it is, unlike)
INTERLEAVED = (
    "interleaved tokens: x_i and y_i meet only after a layer copies one into the other's token, which a "
    "linear layer does not learn (MATRIX.md, the settling runs); the paper's layer reads them in one token"
)
MATRIX_CLAIMS = {
    "linear_attention": (
        "von_oswald.lsa_is_gd",
        "the ICL benchmark's linear attention (feature map, no normaliser)",
        INTERLEAVED,
    ),
    "linear": ("von_oswald.lsa_is_gd", "limits_of_icl's linear attention", INTERLEAVED),
    "gated_linear_attn": ("von_oswald.lsa_is_gd", "gated linear attention", INTERLEAVED),
    "softmax_causal": ("von_oswald.softmax_interleaved_gd", "softmax attention", ""),
}


def matrix(data: dict, report_dir: Path) -> list[Row]:
    summary = data.get("summary", {})
    out = []
    for mixer, (claim, what, unlike) in MATRIX_CLAIMS.items():
        found = summary.get(mixer)
        if found:
            out.append(
                _stat_row(
                    claim,
                    found.get("loss_vs_gd"),
                    f"{what}: loss / GD, interleaved tokens, 2 layers + MLP, 2,500 steps",
                    MATRIX,
                    unlike=unlike,
                )
            )
    settling = report_dir / "matrix_settling_results.json"
    if settling.is_file():
        out += settling_rows(json.loads(settling.read_text(encoding="utf-8")))
    return out


def settling_rows(data: dict) -> list[Row]:
    """The matrix's settling runs (report/matrix_settling_results.json): rows the file declares as
    {claim, mixer, what, steps, batch_size, loss_vs_gd: {mean, values}}."""
    out = []
    for entry in data.get("rows", []):
        budget = Budget(
            int(entry["steps"]) * int(entry.get("batch_size", 64)), MATRIX.model, entry.get("rates", MATRIX.rates)
        )
        out.append(
            _stat_row(entry["claim"], entry.get("loss_vs_gd"), entry["what"], budget, unlike=entry.get("unlike", ""))
        )
    return out
