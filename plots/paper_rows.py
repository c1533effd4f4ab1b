"""Which number of ours stands beside each claim of a paper, report by report: `rows_for(report,
results, report_dir)` reads a study's recorded results file (the JSON its report writer wrote) and
returns the rows of its "Beside the paper" table (plots/beside_paper.py) with our budget.
ROWS maps each report to its row builder: Raventós et al.'s, Lin et al.'s and Zhang et al.'s are
here; von Oswald et al.'s, Garg et al.'s / limits_of_icl's and Zoology's in
plots/paper_rows_von_oswald.py, plots/paper_rows_limits.py and plots/paper_rows_zoology.py; `Budget`,
`Row` and the shared helpers in plots/paper_rows_base.py.

Budgets are the studies' shipped configs (sequences = steps × batch; a test checks them against
configs/): a study run at other settings says so in its own report, not here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from plots.paper_rows_base import (
    circuits_gpt2,
    DYNAMICS,
    INDUCTION,
    LENGTHGEN,
    MAD,
    MAD_COPYING,
    MAD_MEMORIZATION,
    MARKOV,
    MECHANISMS,
    TASK_DIVERSITY,
    YARN_RECENCY,
    Budget,
    Row,
    _ratio_row,
    _stat_row,
)
from plots.circuits_probes import recorded_gpt2
from plots.paper_rows_limits import linear_attention, mechanisms, robustness
from plots.paper_rows_von_oswald import matrix, reproduction
from plots.paper_rows_zoology import mixers, zoo
from src.read_side import HIDDEN_READ_WORDS


# --- Raventós et al.
def task_diversity(data: dict, report_dir: Path) -> list[Row]:
    found = data.get("threshold")
    value = math.log2(found) if found else None
    fresh = [r for r in data.get("results", []) if r.get("num_tasks") == 0]
    ratios = tuple(r["errors"]["prior"]["model"] / r["errors"]["prior"]["ridge"] for r in fresh)
    ours = f"switch at M = {found} (the smallest pool from which the model is nearer ridge), 3 × 64"
    return [
        Row("raventos.threshold", value, ours, TASK_DIVERSITY, digits=1),
        Row("raventos.small_threshold", value, ours, TASK_DIVERSITY, digits=1),
        Row(
            "raventos.fresh_tasks_ridge",
            sum(ratios) / len(ratios) if ratios else None,
            "fresh tasks every step, error / ridge's on prior prompts",
            TASK_DIVERSITY,
            ratios,
        ),
    ]


def task_diversity_finite(data: dict, report_dir: Path) -> list[Row]:
    found, steps = data.get("threshold_at_budget"), int(data.get("steps") or 0)
    budget = Budget(steps * 64, TASK_DIVERSITY.model, TASK_DIVERSITY.rates)
    ours = (
        f"threshold at {steps:,} steps by the finite-size rule (the smallest M from which no distance to ridge rises)"
    )
    value = math.log2(found) if found else None
    return [
        Row("raventos.threshold", value, ours, budget, digits=1),
        Row("raventos.small_threshold", value, ours, budget, digits=1),
    ]


# --- Lin et al.
def lengthgen(data: dict, report_dir: Path) -> list[Row]:
    cells = data.get("summary", {}).get("linear_regression", {})
    fire, nope, yarn = cells.get("fire", {}), cells.get("nope", {}), cells.get("dynamic_yarn", {})
    serial = nope.get("serial", {})
    return [
        _stat_row(
            "lin.fire_in_distribution", fire.get("in_distribution"), "FIRE, d = 5, trained to 21 points", LENGTHGEN
        ),
        _stat_row("lin.fire_8x", fire.get("error_8x"), "FIRE at 8× the trained length, d = 5", LENGTHGEN),
        _ratio_row(
            "lin.nope_late_block",
            serial.get("end"),
            serial.get("start"),
            "NoPE, informative block at the end / at the start",
            LENGTHGEN,
        ),
        _stat_row("lin.dynamic_yarn_recency", yarn.get("last_20pct"), "dynamic YaRN, last layer, at 4× L", LENGTHGEN),
    ]


def yarn_recency(data: dict, report_dir: Path) -> list[Row]:
    tails = {k: v for k, v in data.get("mean_tail", {}).items() if k.startswith("dynamic_yarn@")}
    if not tails:
        return []
    longest = max(tails, key=lambda k: int(k.split("@")[1]))
    by_layer = [sum(heads) / len(heads) for heads in tails[longest]]
    best = max(range(len(by_layer)), key=by_layer.__getitem__)
    return [
        Row(
            "lin.dynamic_yarn_recency",
            by_layer[best],
            f"dynamic YaRN at {longest.split('@')[1]} points, layer {best} (its most recent), mean over heads",
            YARN_RECENCY,
        )
    ]


def markov(data: dict, report_dir: Path) -> list[Row]:
    """Edelman et al.'s claims from the Markov chains study (scripts/markov.py's cells)."""
    cells = {(c["states"], c["doubly"]): c for c in data.get("cells", {}).values()}
    per_seed = lambda cell, key: tuple(float(r[key]) for r in cell["runs"])
    out = []
    for states, claim in ((2, "edelman.bigram_end_k2"), (3, "edelman.bigram_end_k3")):
        if (states, False) in cells:
            values = per_seed(cells[(states, False)], "final_over_bigram")
            out.append(
                Row(claim, sum(values) / len(values), f"k = {states}, mean over seeds", MARKOV, values, digits=4)
            )
    for states, claim in ((2, "edelman.bigram_last_k2"), (3, "edelman.bigram_last_k3")):
        if (states, False) in cells and "last_over_bigram" in cells[(states, False)]["runs"][0]:
            values = per_seed(cells[(states, False)], "last_over_bigram")
            out.append(
                Row(
                    claim,
                    sum(values) / len(values),
                    f"k = {states}, last token, mean over seeds",
                    MARKOV,
                    values,
                    digits=4,
                )
            )
    for doubly, claim in ((False, "edelman.unigram_plateau"), (True, "edelman.no_plateau_doubly")):
        if (2, doubly) in cells:
            values = per_seed(cells[(2, doubly)], "plateau_steps")
            words = "doubly stochastic" if doubly else "Dirichlet rows"
            worst, which = (max(values), "most") if doubly else (min(values), "fewest")
            out.append(Row(claim, worst, f"k = 2, {words}, the {which} over seeds", MARKOV, values, digits=0))
    return out


def mad(data: dict, report_dir: Path) -> list[Row]:
    """MAD's claims from the MAD study (scripts/mad.py's checks: one seed, each cell its best rate)."""
    claims = {  # the check's opening words -> (claim, our setting in words, our budget)
        "attention reaches 0.94 on in-context recall": ("mad.recall_attention", "attention, in-context recall", MAD),
        "attention reaches 0.99 on selective copying": (
            "mad.selective_copy_attention",
            "attention, selective copying",
            MAD_COPYING,
        ),
        "fuzzy recall: attention and DeltaNet": ("mad.fuzzy_order", "fuzzy recall, 12 mixers", MAD),
        "memorization: Hyena and Mamba": (
            "mad.memorization_order",
            "memorization, Hyena and Mamba against attention",
            MAD_MEMORIZATION,
        ),
    }
    out = []
    for check in data.get("checks", []):
        for start, (claim, words, budget) in claims.items():
            if check["claim"].startswith(start) and check["value"] is not None:
                unlike = (
                    "every model at 100 % on the baseline setting: it cannot order them (MAD's scores average "
                    "its grid up to V 8,192)"
                    if check.get("saturated")
                    else ""
                )
                value = float(check["value"])
                out.append(Row(claim, value, f"{words}, seed 0", budget, (value,), unlike=unlike))
    return out


def sweep(claims: tuple[str, ...], budget_of: Callable[[dict], Budget]) -> Callable[[dict, Path], list[Row]]:
    def rows(data: dict, report_dir: Path) -> list[Row]:
        out = []
        for name, result in data.get("results", {}).items():
            keys = {
                "garg.matches_least_squares": "final",
                "lin.fire_in_distribution": "in_distribution",
                "lin.fire_8x": "error_8x",
            }
            for claim in claims:
                out.append(
                    _stat_row(
                        claim,
                        result.get(keys[claim]),
                        f"protocol {name}" + (" (the study's)" if result.get("is_study") else ""),
                        budget_of(result),
                    )
                )
        return out

    return rows


def _steps_of(result: dict) -> int:
    return int(result.get("steps") or 0)


# --- Zhang et al.
def dynamics(data: dict, report_dir: Path) -> list[Row]:
    res = data.get("results", {})
    runs = {r["name"]: r for group in res.values() for r in group}
    out = []
    attn, mlp = runs.get("attnM"), runs.get("mlp")
    if attn and mlp:
        a, m = attn["dynamics"]["final_loss"], mlp["dynamics"]["final_loss"]
        out.append(
            Row(
                "zhang.merged_equals_mlp",
                abs(a - m) / m,
                "ATTN_M (unrestricted) against the cubic MLP",
                DYNAMICS,
                digits=4,
            )
        )
        out.append(
            Row(
                "zhang.merged_one_drop",
                float(len(attn["dynamics"]["drops"])),
                "ATTN_M, their defaults",
                DYNAMICS,
                digits=0,
            )
        )
    stair = runs.get("attnS_rank1_D4")
    if stair:
        out.append(
            Row(
                "zhang.separate_staircase",
                float(len(stair["dynamics"]["drops"])),
                "ATTN_S, rank-one heads, D = 4, 80,001 epochs",
                Budget(80001 * 5000, DYNAMICS.model, DYNAMICS.rates),
                digits=0,
            )
        )
        gaps = [abs(p["difference"]) for p in stair["dynamics"]["plateaus"]]
        out.append(
            Row(
                "zhang.plateau_levels",
                max(gaps) if gaps else None,
                "ATTN_S's plateaus against top-m least squares",
                Budget(80001 * 5000, DYNAMICS.model, DYNAMICS.rates),
                digits=4,
            )
        )
    return out


def circuits(data: dict, report_dir: Path) -> list[Row]:
    """Olsson et al.'s, Akyürek et al.'s and Bai et al.'s claims from the circuits study's checks
    (scripts/circuits.py, plots/circuits_report.py: one seed)."""
    checks, out, gpt2 = data.get("checks", {}), [], circuits_gpt2(recorded_gpt2(data))
    induction = checks.get("induction", {})
    if "induction_L2" in induction:
        c = induction["induction_L2"]
        out.append(Row("olsson.induction_2layer", c["best_prefix"], "2 layers, repeated tokens, seed 0", INDUCTION))
    if "induction_L1" in induction:
        c = induction["induction_L1"]
        out.append(
            Row("olsson.no_induction_1layer", c["best_prefix_any_layer"], "1 layer, repeated tokens, seed 0", INDUCTION)
        )
    if checks.get("probes"):
        probe = checks["probes"]
        read = HIDDEN_READ_WORDS.get(probe.get("read", "query"))
        out.append(Row("akyurek.w_ols_probe", probe["w_ols_ridge"], f"softmax GPT-2, d = 5, read {read}, seed 0", gpt2))
    selection = checks.get("selection")
    if selection:
        worst = max(selection["model_over_bayes"].values())
        best_fixed = min(selection["fixed_ridge_worst_ratio"].values())
        out.append(Row("bai.selection_near_bayes", worst, "GPT-2 on σ ∈ {0.1, 0.5}, seed 0", gpt2))
        out.append(Row("bai.fixed_ridge_loses", best_fixed, "ridge at λ 0.05 and 1.25, these prompts", gpt2))
    return out


ROWS: dict[str, Callable[[dict, Path], list[Row]]] = {
    "REPRODUCTION.md": reproduction,
    "MECHANISMS.md": mechanisms,
    "MIXERS.md": mixers,
    "ZOO.md": zoo,
    "TASK_DIVERSITY.md": task_diversity,
    "TASK_DIVERSITY_FINITE.md": task_diversity_finite,
    "MATRIX.md": matrix,
    "LENGTHGEN.md": lengthgen,
    "DYNAMICS.md": dynamics,
    "ROBUSTNESS.md": robustness,
    "LINEAR_ATTENTION.md": linear_attention,
    "SWEEP_MECHANISMS.md": sweep(
        ("garg.matches_least_squares",),
        lambda r: Budget(_steps_of(r) * 64, MECHANISMS.model, "Adam, one rate per protocol"),
    ),
    "SWEEP_LENGTHGEN.md": sweep(
        ("lin.fire_in_distribution", "lin.fire_8x"),
        lambda r: Budget(_steps_of(r) * 64, "Llama, 2 layers", "AdamW, one rate per protocol"),
    ),
    "YARN_RECENCY.md": yarn_recency,
    "MARKOV.md": markov,
    "MAD.md": mad,
    "CIRCUITS.md": circuits,
}


def rows_for(report: str, data: dict, report_dir: Path) -> list[Row]:
    """The rows of `report`'s "Beside the paper" table from its results (KeyError: no such report)."""
    return ROWS[report](data, report_dir)
