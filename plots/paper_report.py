"""The reproduction's report: its figures (plots/paper_figures.py) and REPRODUCTION.md (one
table: experiment | what the paper reports | what we measured | wall time), both written
atomically from the experiments' results (src/gd_paper/study/one_step_gd.py, k_steps.py, copy_model.py,
ood_scales.py, distractors.py) and checks (src/gd_paper/study/paper_checks.py).
"""

from __future__ import annotations

import datetime as dt

from plots.paper_figures import FIGURES
from plots.style import png_bytes
from plots.report_index import write_index
from plots.provenance import commit_line, duration, machine, training_seconds
from src.stats import format_pm
from src.files import atomic_write_bytes, atomic_write_text

RESULTS = "reproduce_results.json"
REPORT = "REPRODUCTION.md"
FIG_DIR = "figures/paper"


def write_figures(plan, results: dict) -> list[tuple[str, str]]:
    """Every figure whose experiment is in `results`, into plan.report_dir/FIG_DIR; returns
    (path relative to the report, caption) of each."""
    written = []
    for key, (filename, draw, caption) in FIGURES.items():
        if key not in results:
            continue
        path = plan.report_dir / FIG_DIR / filename
        atomic_write_bytes(path, png_bytes(draw(results[key])))
        written.append((f"{FIG_DIR}/{filename}", caption))
    return written


def fmt_seconds(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _seed_note(r: dict) -> str:
    bad = [p for p, s in r.get("status", {}).items() if s != "complete"]
    note = f"seeds {r['seeds']}, {r['steps']} steps"
    return note + (f"; **not complete: {', '.join(bad)}**" if bad else "")


def _part_checks(checks: list[dict]):
    """The checks whose names start with any of `names`, one line each, as a table cell."""

    def part_checks(*names: str) -> str:
        lines = [
            f"**{c['status']}** {c['name']}: {c['detail']}"
            for c in checks
            if any(c["name"].startswith(n) for n in names)
        ]
        return "<br>".join(lines)

    return part_checks


def _one_step_row(results: dict, part_checks, part_seconds: dict) -> list[str]:
    one = results["one_step_gd"]
    f = one["final"]
    return [
        "1. One LSA layer = one GD step (`lsa1`)",
        "One tuned GD step: loss ≈ 0.206 (η ≈ 6.06, η/N ≈ 0.61); trained lsa1 converges to "
        "within ~1–2 % of it; align_cos ≥ 0.99 (SPEC §1, §4–5; paper Fig. 2).",
        f"{_seed_note(one)}. GD: loss {one['gd_loss']:.4f} ± {one['gd_loss_se']:.4f} (SE over "
        f"{one['eval_size']} eval tasks), η = {one['gd_eta']['mean']:.3f}; predict-0 loss "
        f"{one['zero_loss']:.4f}. lsa1: loss {format_pm(f['eval_loss'])} "
        f"({100 * one['rel_gap']['mean']:+.2f} ± {100 * one['rel_gap']['std']:.2f} % vs GD), "
        f"align_cos {format_pm(f['align_cos'])}, model_diff {format_pm(f['model_diff'])}, "
        f"l2_pred_diff {format_pm(f['l2_pred_diff'])}.<br>" + part_checks("lsa1", "one-step GD"),
        fmt_seconds(part_seconds["one_step_gd"]),
    ]


def _k_steps_row(results: dict, part_checks, part_seconds: dict) -> list[str]:
    ks = results["k_steps"]
    lines = []
    for k, r in sorted(ks.items(), key=lambda kv: int(kv[0])):
        a = r["align"]
        lines.append(
            f"K={k} ({_seed_note(r)}, lr {r['lr']:g}, clip {r['clip_value']:g}): TF {format_pm(r['tf_loss'])}; "
            f"{k}-step GD {r['gdk_loss']:.4f} (η {r['gdk_eta']:.2f}); GD++ {r['gdpp_loss']:.4f}; "
            f"1-step GD {r['gd1_loss']:.4f}. align_cos vs GD {format_pm(a['vs_gdk']['align_cos'])}, "
            f"vs GD++ {format_pm(a['vs_gdpp']['align_cos'])}; model_diff vs GD "
            f"{format_pm(a['vs_gdk']['model_diff'])}, vs GD++ {format_pm(a['vs_gdpp']['model_diff'])}; "
            f"l2_pred_diff vs GD {format_pm(a['vs_gdk']['l2_pred_diff'])}, vs GD++ "
            f"{format_pm(a['vs_gdpp']['l2_pred_diff'])}."
        )
    return [
        "2. K recurrent LSA layers ≈ K GD steps; GD++ (`lsa_rec`, K = " + ", ".join(sorted(ks, key=int)) + ")",
        "A K-layer (weight-shared) linear transformer reaches a loss at or below K steps of GD and "
        "close to GD++ (GD with input preconditioning), and aligns more closely with GD++ than "
        "with plain GD (paper §3, Fig. 4).",
        "<br>".join(lines) + "<br>" + part_checks("K="),
        fmt_seconds(part_seconds["k_steps"]),
    ]


def _copy_row(results: dict, part_checks, part_seconds: dict) -> list[str]:
    cp = results["copy"]
    cf = cp["final"]
    return [
        "3. Token construction: copy layer + GD layer (`twolayer`)",
        "On interleaved tokens x, ȳ the first (softmax) layer learns to copy each neighbour into "
        "its partner token, then the second layer does the GD step; loss ≈ one-step GD ≈ 0.21, "
        "neighbour sensitivity dominating (SPEC §3; paper Fig. 5).",
        f"{_seed_note(cp)}. twolayer loss {format_pm(cf['eval_loss'])} vs one-step GD "
        f"{cf['gd_loss']['mean']:.4f} (gap {format_pm(cp['gap'])}). Copy sensitivities: own "
        f"{format_pm(cf['copy_own'], 3)} (incl. residual), next {format_pm(cf['copy_next'], 3)}, prev "
        f"{format_pm(cf['copy_prev'], 3)}, other {format_pm(cf['copy_other'], 3)}. First-layer attention "
        f"(mean over {cp['attention_tasks']} eval tasks): x token → its own label token "
        f"{format_pm(cp['attention_partner'], 3)}, all tokens → one fixed pair (max over pairs) "
        f"{format_pm(cp['attention_fixed_pair'], 3)}.<br>" + part_checks("copy"),
        fmt_seconds(part_seconds["copy"]),
    ]


def _ood_row(results: dict, part_checks, part_seconds: dict) -> list[str]:
    o = results["ood"]

    def at(rows_, x):
        return min(rows_, key=lambda row: abs(row["x"] - x))

    def ood_line(rows_, label):
        bits = []
        for x in (rows_[0]["x"], 1.0 if label == "α" else o["train_weight_scale"], rows_[-1]["x"]):
            row = at(rows_, x)
            bits.append(
                f"{label}={row['x']:g}: TF {format_pm(row['tf_loss'])}, GD {row['gd_loss']:.4f}, "
                f"TF/GD {format_pm(row['tf_over_gd'], 2)}"
            )
        return "; ".join(bits)

    return [
        "4. Out of distribution (`lsa1`, α and weight scale)",
        "The trained model tracks GD (η tuned in distribution) when the input range α changes at "
        "test time, and both degrade outside the training range (SPEC §6; paper Fig. 3).",
        f"Seeds {o['seeds']}, GD η = {o['gd_eta']:.3f}. Input range: {ood_line(o['alpha'], 'α')}.<br>"
        f"Weight scale: {ood_line(o['weight_scale'], 'σ_w')}.<br>(No PASS/MISMATCH: the paper "
        "states this qualitatively; see fig4.)",
        fmt_seconds(part_seconds["ood"]),
    ]


def _distractors_row(results: dict, part_checks, part_seconds: dict) -> list[str]:
    d = results["distractors"]
    bits = [f"k={row['k']}: TF {format_pm(row['tf_loss'])}, GD {row['gd_loss']:.4f}" for row in d["rows"]]
    return [
        "5. Distractors (`lsa1`, random pairs in the context)",
        "SPEC gives no number for this test (it is an extension: random pairs are fresh x' with "
        "labels y' ~ N(0, σ²) unrelated to x').",
        f"Seeds {d['seeds']}, σ = {d['sigma']:g}, GD η tuned on clean tasks = {d['gd_eta']:.3f}. "
        + "; ".join(bits)
        + ". (Measured only; no check.)",
        fmt_seconds(part_seconds["distractors"]),
    ]


def _nonlinear_row(results: dict, part_checks, part_seconds: dict) -> list[str]:
    nl = results["nonlinear"]
    b = nl["baselines"]
    opts = nl["task_options"]
    return [
        "6. Non-linear regression: MLP block + LSA on sine tasks (`nonlinear` system)",
        "A transformer with an MLP before its linear self-attention layer solves sine "
        "regression by learning features and taking a GD step on them: its loss and "
        'predictions follow a trained "MLP + GD" model (the reference notebook '
        "non_linear_regression.ipynb; 20,000 steps at batch 2,048; loss curves only, no table).",
        f"{_seed_note(nl)}, batch {nl['batch_size']}, {nl['schedule']}; "
        f"y = A sin(x + φ), A ~ U({opts['amplitude_low']:g}, "
        f"{opts['amplitude_high']:g}), φ ~ U(0, {opts['phase_high']:.3g}), x ~ U(±{opts['input_range'] / 2:g}), "
        f"N = {opts['num_context']}. Transformer {format_pm(nl['final']['mlp_lsa'], 5)}; GD on learned "
        f"features {format_pm(nl['final']['features_gd'], 5)}; RBF kernel ridge {b['kernel_ridge']['loss']:.5f}; "
        f"1 GD step, RBF kernel {b['kernel_gd_step']['loss']:.5f}; 1 GD step on raw x {b['gd_raw']['loss']:.5f}; "
        f"predict 0 {nl['zero_loss']:.5f}.<br>" + part_checks("sine"),
        fmt_seconds(part_seconds["nonlinear"]),
    ]


def report_rows(plan, results: dict, checks: list[dict], part_seconds: dict) -> list[list[str]]:
    """The table: experiment | paper | measured | wall time."""
    part_checks = _part_checks(checks)
    rows = [
        row(results, part_checks, part_seconds)
        for row in (_one_step_row, _k_steps_row, _copy_row, _ood_row, _distractors_row)
    ]
    if results.get("nonlinear"):
        rows.append(_nonlinear_row(results, part_checks, part_seconds))
    return rows


def write_report(
    plan,
    jobs,
    results: dict,
    checks: list[dict],
    part_seconds: dict,
    figures: list[tuple[str, str]],
    total_seconds: float,
    command: str,
    base_sizes: dict,
    head: dict,
) -> str:
    """REPRODUCTION.md: a header (date, commit, machine, mode, wall time, command, checks)
    and one table (experiment | paper | measured | wall time), written atomically. `head`:
    src.provenance.git_commit() taken before anything was written (the report's own figures
    would otherwise mark the tree changed)."""
    trained_now = sum(1 for j in jobs if j.seconds > 0)
    train_total, _ = training_seconds(jobs)
    rows = report_rows(plan, results, checks, part_seconds)
    mismatches = [c for c in checks if c["status"] != "PASS"]
    mode = "QUICK (reduced steps)" if plan.quick else "full (the paper's steps)"
    base = base_sizes
    if any(plan.steps[m] != base[m] for m in plan.steps) or plan.eval_size != base["eval_size"]:
        mode += ", sizes overridden by flags"
    lines = [
        "# Reproduction of von Oswald et al. (ICML 2023), *Transformers learn in-context by gradient descent*",
        "",
        f"- Produced {dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')} from {commit_line(head)}",
        f"- Machine: {machine()}",
        f"- Training: {len(jobs)} runs; their training loops took {duration(train_total)} in all "
        f"({train_total:.0f} s, one process per run)",
        f"- Mode: {mode}; steps lsa1 {plan.steps['lsa1']}, lsa_rec {plan.steps['lsa_rec']}, "
        f"twolayer {plan.steps['twolayer']}, sine models {plan.steps.get('nonlinear')}; "
        f"batch {plan.batch_size}; eval tasks {plan.eval_size} "
        f"(fixed eval seed, same for every seed); seeds {list(plan.seeds)}",
        f"- Total wall time: {fmt_seconds(total_seconds)} (training runs {plan.jobs} at a time; the "
        "wall-time column is the sum of that part's training-run times plus its evaluation time)",
        f"- Command: `{command}`",
        f"- Training runs: {trained_now} trained by this command, {len(jobs) - trained_now} "
        f"reused from `{plan.runs_dir}` (their wall time is their recorded training time)",
        f"- Checks: {len(checks) - len(mismatches)} PASS, {len(mismatches)} MISMATCH"
        + (" (" + "; ".join(c["name"] for c in mismatches) + ")" if mismatches else ""),
        "",
        "Loss is the paper's ½·mean (ŷ − y_q)². Numbers are mean ± std over seeds (sample std, ddof 1). "
        "PASS/MISMATCH lines are computed from these numbers with fixed thresholds (the paper's "
        "where it gives one).",
        "",
        "| Experiment | What the paper reports | What we measured | Wall time |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |")
    lines += ["", "## Figures", ""]
    lines += [f"- `{path}`: {caption}" for path, caption in figures]
    lines += ["", f"All numbers: `{RESULTS}`. Run directories: `{plan.runs_dir}`.", ""]
    text = "\n".join(lines)
    atomic_write_text(plan.report_dir / REPORT, text)
    write_index(plan.report_dir, head)
    return text
