"""The "Beside the paper" rows of Garg et al.'s and limits_of_icl's claims (plots/paper_rows.py
ROWS): the mechanisms study (MECHANISMS.md), its robustness battery (ROBUSTNESS.md) and the
linear-attention study (LINEAR_ATTENTION.md); PAPER_ORDER is limits_of_icl's table order, which
the mechanism-order row counts inversions against.
"""

from __future__ import annotations

from pathlib import Path

from plots.paper_rows_base import MECHANISMS, Budget, Row, _mean, _ratio, _ratio_row, _stat_row, _values

# limits_of_icl's six mechanisms in its table's order (ours: `local` is a window of 8, no globals)
PAPER_ORDER = ("softmax_causal", "mqa", "favor", "rebased", "rela", "local")


def _inversions(errors: dict[str, float]) -> int:
    names = [m for m in PAPER_ORDER if m in errors]
    return sum(1 for i, a in enumerate(names) for b in names[i + 1 :] if errors[a] > errors[b])


def _order_row(by_mechanism: dict[str, dict], ours: str, budget: Budget) -> Row:
    means = {m: _mean(s) for m, s in by_mechanism.items() if m in PAPER_ORDER and _mean(s) is not None}
    if len(means) < len(PAPER_ORDER):
        return Row("limits_of_icl.mechanism_order", None, ours, budget)
    seeds = min(len(_values(by_mechanism[m])) for m in PAPER_ORDER)
    per_seed = tuple(float(_inversions({m: _values(by_mechanism[m])[i] for m in PAPER_ORDER})) for i in range(seeds))
    return Row("limits_of_icl.mechanism_order", float(_inversions(means)), ours, budget, per_seed, digits=0)


RELA_UNLIKE = (
    "our rela gates the normalised heads with sigmoid(x W_g) on the layer's input (W_g D × D, RMSNorm "
    "ε 1e-6); the original's with sigmoid(w ⊙ z) on the heads' output (w a D-vector, ε 1e-8): "
    "report/measurements/rela_local_definitions.md"
)
LOCAL_UNLIKE = (
    "ours is a window of 8 without global positions, the paper's local_global a window of 15 "
    "with globals [20, 40] over 82 tokens"
)


def mechanisms(data: dict, report_dir: Path) -> list[Row]:
    at = {m: r.get("summary", {}).get("clean_n10") for m, r in data.get("results", {}).items()}
    soft = at.get("softmax_causal")
    return [
        _stat_row("garg.matches_least_squares", soft, "softmax, d = 5, 3 seeds", MECHANISMS),
        _stat_row("limits_of_icl.softmax_error", soft, "softmax, d = 5 (the paper: d = 20)", MECHANISMS),
        _order_row(at, "the six mechanisms at n = 2d, d = 5", MECHANISMS),
        _ratio_row(
            "limits_of_icl.rela_error",
            at.get("rela"),
            soft,
            "ReLA / softmax at n = 2d, d = 5",
            MECHANISMS,
            unlike=RELA_UNLIKE,
        ),
        _ratio_row(
            "limits_of_icl.local_fails",
            at.get("local"),
            soft,
            "local / softmax at n = 2d, d = 5",
            MECHANISMS,
            unlike=LOCAL_UNLIKE,
        ),
    ]


def robustness(data: dict, report_dir: Path) -> list[Row]:
    models = data.get("models", {})
    shift = "opposite_quadrants=original"

    def degradation(m: str) -> dict | None:
        cells = models.get(m, {})
        if not cells.get(shift) or not cells.get("standard"):
            return None
        value, values = _ratio(cells[shift], cells["standard"])
        return {"mean": value, "values": list(values)}

    soft = degradation("softmax_causal")
    standard = {m: c.get("standard") for m, c in models.items()}
    return [
        _ratio_row(
            "limits_of_icl.kernel_quadrant",
            degradation("favor"),
            soft,
            "(FAVOR+ shifted/standard) ÷ (softmax's), query in a random orthant, d = 5",
            MECHANISMS,
        ),
        _ratio_row(
            "limits_of_icl.rebased_quadrant",
            degradation("rebased"),
            soft,
            "(ReBased shifted/standard) ÷ (softmax's), query in a random orthant, d = 5",
            MECHANISMS,
        ),
        _order_row(standard, "the six mechanisms on standard prompts at the last point, d = 5", MECHANISMS),
        _ratio_row(
            "limits_of_icl.local_fails",
            standard.get("local"),
            standard.get("softmax_causal"),
            "local / softmax on standard prompts, d = 5",
            MECHANISMS,
            unlike=LOCAL_UNLIKE,
        ),
    ]


# the linear-attention study's variants (its labels) that are not one linear layer as the paper's
LINEAR_ATTENTION_UNLIKE = {
    "linear, sum, lr 1e-3 (the study's)": "",
    "linear, sum, lr 1e-4": "",
    "linear, mean, lr 1e-3": "not the paper's layer: a mean over the context instead of a sum",
    "linear, mean, lr 1e-4": "not the paper's layer: a mean over the context instead of a sum",
    "ICL benchmark's linear_attention, lr 1e-3": (
        "not one linear layer: three layers with a feature map, no normaliser, and MLPs"
    ),
    "rebased (normalised positive features), lr 1e-3": "not one linear layer: normalised positive features",
}


def linear_attention(data: dict, report_dir: Path) -> list[Row]:
    rows = []
    for label, result in data.get("results", {}).items():
        curve = result.get("curve_mean", {})
        model, gd = curve.get("model") or [], curve.get("gd_step") or []
        if not model or not gd or not gd[-1]:
            continue
        per_seed = tuple(
            c["model"][-1] / c["gd_step"][-1] for c in result.get("curves", []) if c.get("gd_step", [0])[-1]
        )
        rows.append(
            Row(
                "von_oswald.lsa_is_gd",
                model[-1] / gd[-1],
                f"{label}: error / one GD step's at n = 2d in Garg's layout (3 × 64, d = 5)",
                MECHANISMS,
                per_seed,
                LINEAR_ATTENTION_UNLIKE.get(label, "a study variant the anchors do not describe"),
            )
        )
    return rows
