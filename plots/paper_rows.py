"""Which number of ours stands beside each claim of a paper, report by report: `rows_for(report,
results, report_dir)` reads a study's recorded results file (the JSON its report writer wrote) and
returns the rows of its "Beside the paper" table (plots/beside_paper.py) with our budget.

Budgets are the studies' shipped configs (sequences = steps × batch; a test checks them against
configs/): a study run at other settings says so in its own report, not here.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


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
DYNAMICS = Budget(6001 * 5000, "linear attention, D = 4 (their defaults)", "full-batch GD 1e-3")
# limits_of_icl's six mechanisms in its table's order (ours: `local` is a window of 8, no globals)
PAPER_ORDER = ("softmax_causal", "mqa", "favor", "rebased", "rela", "local")


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


def _ratio_row(claim: str, top: dict | None, bottom: dict | None, ours: str, budget: Budget,
               unlike: str = "") -> Row:
    value, values = _ratio(top, bottom)
    return Row(claim, value, ours, budget, values, unlike)


# --- von Oswald et al.
def reproduction(data: dict, report_dir: Path) -> list[Row]:
    res = data.get("results", {})
    one, k4 = res.get("one_step_gd", {}), res.get("k_steps", {}).get("4", {})
    copy, sine = res.get("copy", {}), res.get("nonlinear", {}).get("final", {})
    rel = one.get("rel_gap") or {}
    gap_values = tuple(1 + v for v in _values(rel))
    rows = [Row("von_oswald.gd_loss", one.get("gd_loss"), "one GD step, η tuned, 10,000 eval tasks", GD_PAPER,
                digits=4),
            Row("von_oswald.lsa_is_gd", None if _mean(rel) is None else 1 + _mean(rel), "lsa1, 5,000 steps, 3 seeds",
                GD_PAPER, gap_values, digits=4),
            _stat_row("von_oswald.lsa_align", one.get("final", {}).get("align_cos"), "lsa1's sensitivity cosine",
                      GD_PAPER, digits=4)]
    tf, gdk = k4.get("tf_loss"), k4.get("gdk_loss")
    if isinstance(gdk, (int, float)) and tf:
        rows.append(Row("von_oswald.recurrent_k_steps", _mean(tf) / gdk, "4 recurrent LSA layers / 4 GD steps",
                        GD_PAPER, tuple(v / gdk for v in _values(tf))))
    rows.append(_stat_row("von_oswald.copy_then_gd", copy.get("final", {}).get("eval_loss"),
                          "twolayer, 10,000 steps", GD_TWOLAYER, digits=4))
    rows.append(_ratio_row("von_oswald.sine_features_gd", sine.get("mlp_lsa"), sine.get("features_gd"),
                           "MLP + LSA / GD on learned features, 8,000 steps at batch 512", GD_SINE))
    return rows


# --- Garg et al., limits_of_icl: the mechanisms study and its robustness battery
def _inversions(errors: dict[str, float]) -> int:
    names = [m for m in PAPER_ORDER if m in errors]
    return sum(1 for i, a in enumerate(names) for b in names[i + 1:] if errors[a] > errors[b])


def _order_row(by_mechanism: dict[str, dict], ours: str, budget: Budget) -> Row:
    means = {m: _mean(s) for m, s in by_mechanism.items() if m in PAPER_ORDER and _mean(s) is not None}
    if len(means) < len(PAPER_ORDER):
        return Row("limits_of_icl.mechanism_order", None, ours, budget)
    seeds = min(len(_values(by_mechanism[m])) for m in PAPER_ORDER)
    per_seed = tuple(float(_inversions({m: _values(by_mechanism[m])[i] for m in PAPER_ORDER})) for i in range(seeds))
    return Row("limits_of_icl.mechanism_order", float(_inversions(means)), ours, budget, per_seed, digits=0)


RELA_UNLIKE = ("our rela gates the normalised heads with sigmoid(x W_g) on the layer's input (W_g D × D, RMSNorm "
               "ε 1e-6); the original's with sigmoid(w ⊙ z) on the heads' output (w a D-vector, ε 1e-8): "
               "report/measurements/rela_local_definitions.md")
LOCAL_UNLIKE = ("ours is a window of 8 without global positions, the paper's local_global a window of 15 "
                "with globals [20, 40] over 82 tokens")


def mechanisms(data: dict, report_dir: Path) -> list[Row]:
    at = {m: r.get("summary", {}).get("clean_n10") for m, r in data.get("results", {}).items()}
    soft = at.get("softmax_causal")
    return [_stat_row("garg.matches_least_squares", soft, "softmax, d = 5, 3 seeds", MECHANISMS),
            _stat_row("limits_of_icl.softmax_error", soft, "softmax, d = 5 (the paper: d = 20)", MECHANISMS),
            _order_row(at, "the six mechanisms at n = 2d, d = 5", MECHANISMS),
            _ratio_row("limits_of_icl.rela_error", at.get("rela"), soft, "ReLA / softmax at n = 2d, d = 5", MECHANISMS,
                       unlike=RELA_UNLIKE),
            _ratio_row("limits_of_icl.local_fails", at.get("local"), soft, "local / softmax at n = 2d, d = 5",
                       MECHANISMS, unlike=LOCAL_UNLIKE)]


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
    return [_ratio_row("limits_of_icl.kernel_quadrant", degradation("favor"), soft,
                       "(FAVOR+ shifted/standard) ÷ (softmax's), query in a random orthant, d = 5", MECHANISMS),
            _ratio_row("limits_of_icl.rebased_quadrant", degradation("rebased"), soft,
                       "(ReBased shifted/standard) ÷ (softmax's), query in a random orthant, d = 5", MECHANISMS),
            _order_row(standard, "the six mechanisms on standard prompts at the last point, d = 5", MECHANISMS),
            _ratio_row("limits_of_icl.local_fails", standard.get("local"), standard.get("softmax_causal"),
                       "local / softmax on standard prompts, d = 5", MECHANISMS, unlike=LOCAL_UNLIKE)]


# the linear-attention study's variants (its labels) that are not one linear layer as the paper's
LINEAR_ATTENTION_UNLIKE = {
    "linear, sum, lr 1e-3 (the study's)": "", "linear, sum, lr 1e-4": "",
    "linear, mean, lr 1e-3": "not the paper's layer: a mean over the context instead of a sum",
    "linear, mean, lr 1e-4": "not the paper's layer: a mean over the context instead of a sum",
    "ICL benchmark's linear_attention, lr 1e-3": ("not one linear layer: three layers with a feature map, no "
                                                  "normaliser, and MLPs"),
    "rebased (normalised positive features), lr 1e-3": "not one linear layer: normalised positive features",
}


def linear_attention(data: dict, report_dir: Path) -> list[Row]:
    rows = []
    for label, result in data.get("results", {}).items():
        curve = result.get("curve_mean", {})
        model, gd = curve.get("model") or [], curve.get("gd_step") or []
        if not model or not gd or not gd[-1]:
            continue
        per_seed = tuple(c["model"][-1] / c["gd_step"][-1] for c in result.get("curves", []) if c.get("gd_step", [0])[-1])
        rows.append(Row("von_oswald.lsa_is_gd", model[-1] / gd[-1],
                        f"{label}: error / one GD step's at n = 2d in Garg's layout (3 × 64, d = 5)", MECHANISMS,
                        per_seed, LINEAR_ATTENTION_UNLIKE.get(label, "a study variant the anchors do not describe")))
    return rows


# --- the ICL benchmark and Zoology
def _accuracies(rows: list[dict], **match) -> dict:
    values = [r["accuracy"] for r in rows if r.get("accuracy") is not None
              and all(r.get(k) == v for k, v in match.items())]
    return {"mean": sum(values) / len(values), "values": values} if values else {}


def mixers(data: dict, report_dir: Path) -> list[Row]:
    rows = [r for r in data.get("results", []) if r.get("kappa")]
    out = [_stat_row("miniseq.attention_mqar", _accuracies(rows, mixer="attention", kappa=8, width=64),
                     "attention + MLP, T 64, κ 8, width 64, V 256", MIXERS)]
    for kappa in (4, 16):
        out.append(_stat_row("zoology.attention", _accuracies(rows, mixer="attention", kappa=kappa, width=64),
                             f"attention + MLP, T 64, κ {kappa}, width 64, V 256"
                             + (" (not one of figure 2's cells: its κ 16 is at T 256)" if kappa == 16 else ""), MIXERS))
    return out


ZOO_CLAIMS = {"base_conv+base_conv:kernel_size=-1": "base_conv", "hyena": "hyena", "h3": "h3", "rwkv7": "rwkv",
              "base_conv+rwkv7": "rwkv"}


def zoo_budget(data: dict) -> Budget:
    """The zoo's budget as its results say: the block (run names end _zoology_block under Zoology's)
    and the rates tried (every_rate), at the shipped steps and batch."""
    runs = [r.get("run", "") for r in data.get("every_rate", data.get("results", []))]
    rates = sorted({r["learning_rate"] for r in data.get("every_rate", []) if r.get("learning_rate")})
    zoology = bool(runs) and all("_zoology_block" in name for name in runs)
    model = "2 × 64, 1 head, Zoology's block (no MLP; V 256)" if zoology else ZOO.model
    said = (f"AdamW, best of {', '.join(f'{r:g}' for r in rates)}" if len(rates) > 1
            else f"AdamW {rates[0]:g}, one rate" if rates else ZOO.rates)
    seen = {r["steps"] * r["batch_size"] for r in data.get("results", []) if r.get("steps") and r.get("batch_size")}
    return Budget(max(seen) if seen else ZOO.sequences, model, said)


# the zoo's settling runs (report/<folder>/zoo_results.json beside report/ZOO.md): folder -> what they are
ZOO_SETTLING = {"zoo_zoology_settling": "Zoology's block, best of 3 rates",
                "zoo_zoology_settling_long": "Zoology's block, 10× the steps at the winning rate"}


def zoo(data: dict, report_dir: Path, label: str = "") -> list[Row]:
    """The zoo's rows; in report/ZOO.md also its settling runs' (ZOO_SETTLING), labelled."""
    paths = {words: report_dir / folder / "zoo_results.json" for folder, words in ZOO_SETTLING.items()}
    settling = [] if label else [row for words, path in paths.items() if path.is_file()
                                 for row in zoo(json.loads(path.read_text()), path.parent, words)]
    rows, out, budget, label = data.get("results", []), [], zoo_budget(data), f", {label}" if label else ""
    for (t, kappa) in sorted({(r["seq_len"], r["kappa"]) for r in rows if r.get("width") == 64}):
        tag = {64: "t64", 128: "t128"}.get(t)
        found = _accuracies(rows, mixer="attention", seq_len=t, kappa=kappa, width=64)
        if found:
            out.append(_stat_row("zoology.attention", found, f"attention, T {t}, κ {kappa}, width 64{label}", budget))
        for mixer, name in ZOO_CLAIMS.items():
            found = _accuracies(rows, mixer=mixer, seq_len=t, kappa=kappa, width=64)
            if tag and found:
                unlike = "RWKV-7 here, RWKV-4 in the figure" if name == "rwkv" else ""
                out.append(_stat_row(f"zoology.{name}_{tag}", found, f"{mixer}, T {t}, κ {kappa}, width 64{label}",
                                     budget, unlike=unlike))
    return out + settling


# --- von Oswald et al.'s claim on the matrix of mixers: mixer -> (claim, what it is, unlike)
INTERLEAVED = ("interleaved tokens: x_i and y_i meet only after a layer copies one into the other's token, which a "
               "linear layer does not learn (MATRIX.md, the settling runs); the paper's layer reads them in one token")
MATRIX_CLAIMS = {
    "linear_attention": ("von_oswald.lsa_is_gd", "the ICL benchmark's linear attention (feature map, no normaliser)",
                         INTERLEAVED),
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
            out.append(_stat_row(claim, found.get("loss_vs_gd"),
                                 f"{what}: loss / GD, interleaved tokens, 2 layers + MLP, 2,500 steps", MATRIX,
                                 unlike=unlike))
    settling = report_dir / "matrix_settling_results.json"
    if settling.is_file():
        out += settling_rows(json.loads(settling.read_text(encoding="utf-8")))
    return out


def settling_rows(data: dict) -> list[Row]:
    """The matrix's settling runs (report/matrix_settling_results.json): rows the file declares as
    {claim, mixer, what, steps, batch_size, loss_vs_gd: {mean, values}}."""
    out = []
    for entry in data.get("rows", []):
        budget = Budget(int(entry["steps"]) * int(entry.get("batch_size", 64)), MATRIX.model,
                        entry.get("rates", MATRIX.rates))
        out.append(_stat_row(entry["claim"], entry.get("loss_vs_gd"), entry["what"], budget,
                             unlike=entry.get("unlike", "")))
    return out


# --- Raventós et al.
def task_diversity(data: dict, report_dir: Path) -> list[Row]:
    found = data.get("threshold")
    value = math.log2(found) if found else None
    fresh = [r for r in data.get("results", []) if r.get("num_tasks") == 0]
    ratios = tuple(r["errors"]["prior"]["model"] / r["errors"]["prior"]["ridge"] for r in fresh)
    ours = f"switch at M = {found} (the smallest pool from which the model is nearer ridge), 3 × 64"
    return [Row("raventos.threshold", value, ours, TASK_DIVERSITY, digits=1),
            Row("raventos.small_threshold", value, ours, TASK_DIVERSITY, digits=1),
            Row("raventos.fresh_tasks_ridge", sum(ratios) / len(ratios) if ratios else None,
                "fresh tasks every step, error / ridge's on prior prompts", TASK_DIVERSITY, ratios)]


def task_diversity_finite(data: dict, report_dir: Path) -> list[Row]:
    found, steps = data.get("threshold_at_budget"), int(data.get("steps") or 0)
    budget = Budget(steps * 64, TASK_DIVERSITY.model, TASK_DIVERSITY.rates)
    ours = f"threshold at {steps:,} steps by the finite-size rule (the smallest M from which no distance to ridge rises)"
    value = math.log2(found) if found else None
    return [Row("raventos.threshold", value, ours, budget, digits=1),
            Row("raventos.small_threshold", value, ours, budget, digits=1)]


# --- Lin et al.
def lengthgen(data: dict, report_dir: Path) -> list[Row]:
    cells = data.get("summary", {}).get("linear_regression", {})
    fire, nope, yarn = cells.get("fire", {}), cells.get("nope", {}), cells.get("dynamic_yarn", {})
    serial = nope.get("serial", {})
    return [_stat_row("lin.fire_in_distribution", fire.get("in_distribution"), "FIRE, d = 5, trained to 21 points",
                      LENGTHGEN),
            _stat_row("lin.fire_8x", fire.get("error_8x"), "FIRE at 8× the trained length, d = 5", LENGTHGEN),
            _ratio_row("lin.nope_late_block", serial.get("end"), serial.get("start"),
                       "NoPE, informative block at the end / at the start", LENGTHGEN),
            _stat_row("lin.dynamic_yarn_recency", yarn.get("last_20pct"), "dynamic YaRN, last layer, at 4× L", LENGTHGEN)]


def yarn_recency(data: dict, report_dir: Path) -> list[Row]:
    tails = {k: v for k, v in data.get("mean_tail", {}).items() if k.startswith("dynamic_yarn@")}
    if not tails:
        return []
    longest = max(tails, key=lambda k: int(k.split("@")[1]))
    by_layer = [sum(heads) / len(heads) for heads in tails[longest]]
    best = max(range(len(by_layer)), key=by_layer.__getitem__)
    return [Row("lin.dynamic_yarn_recency", by_layer[best],
                f"dynamic YaRN at {longest.split('@')[1]} points, layer {best} (its most recent), mean over heads",
                YARN_RECENCY)]


def sweep(claims: tuple[str, ...], budget_of: Callable[[dict], Budget]) -> Callable[[dict, Path], list[Row]]:
    def rows(data: dict, report_dir: Path) -> list[Row]:
        out = []
        for name, result in data.get("results", {}).items():
            keys = {"garg.matches_least_squares": "final", "lin.fire_in_distribution": "in_distribution",
                    "lin.fire_8x": "error_8x"}
            for claim in claims:
                out.append(_stat_row(claim, result.get(keys[claim]), f"protocol {name}"
                                     + (" (the study's)" if result.get("is_study") else ""), budget_of(result)))
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
        out.append(Row("zhang.merged_equals_mlp", abs(a - m) / m, "ATTN_M (unrestricted) against the cubic MLP",
                       DYNAMICS, digits=4))
        out.append(Row("zhang.merged_one_drop", float(len(attn["dynamics"]["drops"])), "ATTN_M, their defaults",
                       DYNAMICS, digits=0))
    stair = runs.get("attnS_rank1_D4")
    if stair:
        out.append(Row("zhang.separate_staircase", float(len(stair["dynamics"]["drops"])),
                       "ATTN_S, rank-one heads, D = 4, 80,001 epochs", Budget(80001 * 5000, DYNAMICS.model, DYNAMICS.rates),
                       digits=0))
        gaps = [abs(p["difference"]) for p in stair["dynamics"]["plateaus"]]
        out.append(Row("zhang.plateau_levels", max(gaps) if gaps else None, "ATTN_S's plateaus against top-m least squares",
                       Budget(80001 * 5000, DYNAMICS.model, DYNAMICS.rates), digits=4))
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
    "SWEEP_MECHANISMS.md": sweep(("garg.matches_least_squares",),
                                 lambda r: Budget(_steps_of(r) * 64, MECHANISMS.model, "Adam, one rate per protocol")),
    "SWEEP_LENGTHGEN.md": sweep(("lin.fire_in_distribution", "lin.fire_8x"),
                                lambda r: Budget(_steps_of(r) * 64, "Llama, 2 layers", "AdamW, one rate per protocol")),
    "YARN_RECENCY.md": yarn_recency,
}


def rows_for(report: str, data: dict, report_dir: Path) -> list[Row]:
    """The rows of `report`'s "Beside the paper" table from its results (KeyError: no such report)."""
    return ROWS[report](data, report_dir)
