"""report/PAPER_SCALE.md: the papers at their own size, from every GPU-queue job recorded under
report/measurements/gpu/<job>/<stamp>/ (scripts/device/gpu_queue.py), each job's latest record: the
mechanisms at limits_of_icl's size beside the original's numbers, the paper cell's speed beside
limits_of_icl's own step, and the "Beside the paper" table under the verdict rule of every report.

    python -m scripts.device.gpu_queue report            # or: make paper_scale_report
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from plots.beside_paper import load_anchors, section
from plots.paper_rows_base import Budget, Row
from plots.paper_rows_limits import _inversions

# the runs of the mechanisms jobs, in the table's order (a job's run name -> the mechanism it is)
ORDER = ("softmax_causal", "softmax_causal_seed1", "mqa", "favor", "rebased", "rela", "local_global", "linear")
SHIFTS = ("query x2.1", "10 dims flipped", "orthogonal query")
RANKED = ("softmax_causal", "mqa", "favor", "rebased", "rela", "local_global")  # the paper's order
D = 20


def records(job: str, records_dir: Path) -> list[dict]:
    """The job's records, oldest first: record.json of each records_dir/<job>/<stamp>/."""
    found = []
    for path in sorted((records_dir / job).glob("*/record.json")):
        try:
            found.append({**json.loads(path.read_text()), "dir": str(path.parent)})
        except ValueError:
            continue
    return found


def latest(records_dir: Path, job: str) -> tuple[dict, Path] | None:
    """(record.json, its folder) of the job's latest record, or None."""
    found = sorted((records_dir / job).glob("*/record.json"))
    if not found:
        return None
    return json.loads(found[-1].read_text()), found[-1].parent


def mechanism_pieces(records_dir: Path) -> tuple[dict[str, dict], list[dict]]:
    """{run name: its evaluated piece} over the mechanisms jobs' latest records, and those records."""
    pieces, used = {}, []
    for job in ("mechanisms_a", "mechanisms_b"):
        found = latest(records_dir, job)
        if found is None:
            continue
        rec, folder = found
        used.append(rec)
        manifest = json.loads((folder / "job.json").read_text())
        for piece in manifest.get("pieces", []):
            pieces[piece["name"]] = {**piece, "record": rec}
    return pieces, used


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def mechanisms_table(pieces: dict[str, dict], original: dict[str, tuple]) -> list[str]:
    """The runs' errors beside limits_of_icl's (`original`: mechanism -> (standard, 10 dims flipped))."""
    original = {**original, "local_global": original.get("local", (None, None))}
    lines = [
        "| run | steps trained | standard (ours) | standard (limits_of_icl) | query x2.1 | 10 dims flipped (ours) "
        "| 10 dims flipped (limits_of_icl) | orthogonal query | training's own last evaluation |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in [n for n in ORDER if n in pieces] + sorted(set(pieces) - set(ORDER)):
        p = pieces[name]
        errors = p.get("errors", {})
        model = {k: errors.get(k, {}).get("model") for k in ("standard", *SHIFTS)}
        paper = original.get(name.replace("_seed1", ""), (None, None))
        last = next((m for m in reversed(p.get("metrics", [])) if "eval_error_last" in m or "eval_loss" in m), {})
        own = last.get("eval_error_last")
        steps = p.get("steps")
        if steps is None:
            steps = f"stopped, {p.get('exit')}: " + (p.get("evaluate_error", "")[:60] or "not evaluated")
        elif p.get("planned_steps") and p["planned_steps"] != steps:
            steps = f"{steps} of {p['planned_steps']} (stopped at the deadline)"
        lines.append(
            f"| {name} | {steps} | {_fmt(model['standard'])} | {_fmt(paper[0])} | {_fmt(model['query x2.1'])} "
            f"| {_fmt(model['10 dims flipped'])} | {_fmt(paper[1])} | {_fmt(model['orthogonal query'])} "
            f"| {_fmt(None if own is None else own * D)} |"
        )
    return lines


def speed_lines(records_dir: Path) -> list[str]:
    found = latest(records_dir, "speed")
    if found is None:
        return ["Not yet run (job `speed`)."]
    rec, folder = found
    lines = [
        f"- Recorded {rec['date']} at commit {rec['commit']}{'' if rec.get('clean') else ' (uncommitted changes)'} "
        f"on {rec['device']}, JAX {rec['jax']}, {rec['device_seconds']} device seconds",
        "",
        "| setting | ms per run-step |",
        "|---|---|",
    ]
    for name in ("paper_cell_bench.json", "paper_cell_bench_together.json"):
        path = folder / name
        if path.exists():
            variants = json.loads(path.read_text()).get("variants", {})
            for setting, v in variants.items():
                lines.append(
                    f"| {setting} | "
                    f"{_fmt(v.get('ms_per_run_step'), 2) if 'ms_per_run_step' in v else v.get('error', '—')} |"
                )
    original = folder / "original_step.json"
    if original.exists():
        for precision, v in json.loads(original.read_text()).items():
            rounds = v.get("rounds_ms") or []
            lines.append(
                f"| limits_of_icl's own step, {precision} | "
                f"{', '.join(f'{r:.2f}' for r in rounds) if rounds else v.get('error') or 'failed'} |"
            )
    return lines


def _headline(piece: dict) -> str:
    """A study run's last evaluation: its summary's eval_accuracy or eval_loss, else its last logged one."""
    found = {**(piece.get("metrics") or [{}])[-1], **piece.get("summary", {})}
    for key in ("eval_accuracy", "eval_loss", "eval_error"):
        if isinstance(found.get(key), (int, float)):
            return f"{key} {found[key]:.4g}"
    return "—"


def study_lines(records_dir: Path, job: str) -> tuple[list[str], list[Row]]:
    """A study job's section (its runs, finished or stopped at the deadline, and what its returned
    report says) and the rows of that report's "Beside the paper" table, from its latest record."""
    from plots.paper_rows import rows_for
    from plots.report_index import REPORTS

    found = latest(records_dir, job)
    if found is None:
        return [f"Not yet run (job `{job}`)."], []
    rec, folder = found
    manifest = json.loads((folder / "job.json").read_text())
    lines = [
        f"- Recorded {rec['date']} at commit {rec['commit']}{'' if rec.get('clean') else ' (uncommitted changes)'} "
        f"on {rec['device']}, JAX {rec['jax']}, {rec['device_seconds']} device seconds; "
        f"`python -m {manifest.get('plan', {}).get('command', '?')}`"
        + ("; **stopped at the job's deadline**" if manifest.get("stopped_at_deadline") else ""),
        "",
        "| run | learning rate | steps | state | last evaluation |",
        "|---|---|---|---|---|",
    ]
    for p in manifest.get("pieces", []):
        state = "finished" if p.get("finished") else "stopped at the deadline"
        lines.append(
            f"| {p['name']} | {p.get('settings', {}).get('learning_rate', '—')} | {p.get('steps')} | {state} "
            f"| {_headline(p)} |"
        )
    found_rows, reports = [], [n for n in manifest.get("report_files", []) if n in REPORTS]
    for name in reports:
        results = folder / REPORTS[name][0]
        try:
            found_rows += rows_for(name, json.loads(results.read_text()), folder)
        except (OSError, ValueError, KeyError) as err:
            lines.append(f"\n(its {name} came back, but its rows could not be read: {err})")
    lines += [
        "",
        f"Its report came back: {', '.join(f'[{n}](measurements/gpu/{job}/{folder.name}/{n})' for n in reports)}"
        "; its claims are in the table at the end."
        if reports
        else "No report came back (the study was stopped before writing it): the runs above are what it left.",
    ]
    return lines, found_rows


def rows(pieces: dict[str, dict]) -> list[Row]:
    """Our numbers for limits_of_icl's claims (report/anchors.yaml) from the mechanisms pieces."""

    def standard(name):
        return pieces.get(name, {}).get("errors", {}).get("standard", {}).get("model")

    def flipped(name):
        return pieces.get(name, {}).get("errors", {}).get("10 dims flipped", {}).get("model")

    softmax = [v for v in (standard("softmax_causal"), standard("softmax_causal_seed1")) if v is not None]
    seen = [p["steps"] * p.get("settings", {}).get("batch_size", 256) for p in pieces.values() if p.get("steps")]
    budget = Budget(
        max(seen) if seen else None, "12 × 256, 8 heads (d = 20)", "Adam 1e-3 at batch 256, warm-up + decay, one rate"
    )
    soft = sum(softmax) / len(softmax) if softmax else None
    out = [
        Row(
            "limits_of_icl.softmax_error",
            None if soft is None else soft / D,
            "softmax at n = 2d = 40, d = 20, standard prompts",
            budget,
            tuple(v / D for v in softmax),
            digits=5,
        )
    ]

    def ratio(claim, top, words, unlike=""):
        value = None if top is None or not soft else top / soft
        out.append(Row(claim, value, words, budget, unlike=unlike))

    ratio("limits_of_icl.local_fails", standard("local_global"), "local_global (window 15, globals [20, 40]) / softmax")
    from plots.paper_rows_limits import RELA_UNLIKE

    ratio("limits_of_icl.rela_error", standard("rela"), "ReLA / softmax", RELA_UNLIKE)
    soft_flip = flipped("softmax_causal")
    for claim, name in (("limits_of_icl.kernel_quadrant", "favor"), ("limits_of_icl.rebased_quadrant", "rebased")):
        parts = (flipped(name), standard(name), soft_flip, standard("softmax_causal"))
        value = None if None in parts or not parts[1] or not parts[3] else (parts[0] / parts[1]) / (parts[2] / parts[3])
        out.append(Row(claim, value, f"({name} 10 dims flipped / standard) ÷ (softmax's)", budget))
    ranked = {m: standard(m) for m in RANKED}
    order = (
        None
        if None in ranked.values()
        else float(_inversions({m.replace("local_global", "local"): v for m, v in ranked.items()}))
    )
    out.append(Row("limits_of_icl.mechanism_order", order, "the six mechanisms at n = 40, d = 20", budget, digits=0))
    return out


def queue_lines(records_dir: Path, queue: Sequence[tuple[str, str, float]]) -> list[str]:
    """The queue's table: each job, what it measures, its expected seconds and its latest record (or
    "waiting")."""
    lines = ["## The queue", "", "| job | what it measures | expected | recorded |", "|---|---|---|---|"]
    for name, title, expected in queue:
        done = records(name, records_dir)
        state = (
            f"{done[-1]['date']} at {done[-1]['commit']}{'' if done[-1].get('clean') else ' (dirty)'}, "
            f"{done[-1]['device']}, {done[-1]['device_seconds']} s"
            if done
            else "waiting"
        )
        lines.append(f"| {name} | {title} | {expected:.0f} s | {state} |")
    return lines


def mechanisms_lines(pieces: dict[str, dict], used: list[dict], original: dict[str, tuple]) -> list[str]:
    """limits_of_icl's mechanisms at the paper's size: the records used, the model, the error and the table
    (a line saying they are not yet run without them)."""
    lines = ["", "## limits_of_icl's mechanisms at the paper's size", ""]
    if not pieces:
        return lines + ["Not yet run (jobs `mechanisms_a`, `mechanisms_b`)."]
    lines += [
        f"- {r['job']}: recorded {r['date']} at commit {r['commit']}"
        f"{'' if r.get('clean') else ' (uncommitted changes)'} on {r['device']}, JAX {r['jax']}, "
        f"{r['device_seconds']} device seconds"
        for r in used
    ]
    return lines + [
        "- Model: GPT-2, 12 layers, width 256, 8 heads, d = 20, 41 points; protocol Adam 1e-3 at batch 256, "
        "5 % warm-up, linear decay, clipping at 1, the curriculum in the first 30 % of the steps (the "
        "paper: Adam 1e-4 at batch 64, 100,001 steps); bfloat16, fused attention, flat update.",
        "- Error: squared error at the last point (40 examples), not divided by d (the zero estimator "
        "scores 20); ours on the run's eval tasks, shifts as limits_of_icl's notebook makes them.",
        "",
        *mechanisms_table(pieces, original),
    ]


def study_sections(
    records_dir: Path, queue: Sequence[tuple[str, str, float]], studies: Sequence[str]
) -> tuple[list[str], list[Row]]:
    """(a section per study job, the rows its records measure)."""
    titles, lines, study_rows = dict((name, title) for name, title, _ in queue), [], []
    for job in studies:
        more, found_rows = study_lines(records_dir, job)
        lines += [f"## {job}: {titles.get(job, '')}", "", *more, ""]
        study_rows += found_rows
    return lines, study_rows


def write_report(
    records_dir: Path,
    path: Path,
    queue: Sequence[tuple[str, str, float]],
    limit_s: float,
    original: dict[str, tuple],
    studies: Sequence[str] = (),
) -> Path:
    """report/PAPER_SCALE.md from records_dir; `queue`: the jobs as (name, what it measures,
    expected seconds); `original`: limits_of_icl's errors per mechanism (standard, 10 dims flipped);
    `studies`: the study jobs' names, a section each."""
    import datetime as dt

    from plots.provenance import commit_line
    from src.provenance import git_commit

    pieces, used = mechanism_pieces(records_dir)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# The papers at their own size, on a lent GPU",
        "",
        f"- Produced {when} from {commit_line(git_commit())}",
        "",
        "Built by `make paper_scale_report` (`python -m scripts.device.gpu_queue report`) from every job of the GPU "
        "queue recorded under report/measurements/gpu/ (each job's latest record); nothing here is typed by "
        "hand. A lent GPU runs `make gpu_next`'s job, one device command of at most "
        f"{limit_s:.0f} s each.",
        "",
    ]
    lines += queue_lines(records_dir, queue) + mechanisms_lines(pieces, used, original)
    lines += ["", "## The paper cell's speed", "", *speed_lines(records_dir), ""]
    more, study_rows = study_sections(records_dir, queue, studies)
    lines += more
    all_rows = (rows(pieces) if pieces else []) + study_rows
    provenance = (
        "Written from the recorded jobs above and report/anchors.yaml"
        if all_rows
        else "No job that measures a paper's claim is recorded yet"
    )
    lines += section(all_rows, load_anchors(), provenance)
    path.parent.mkdir(parents=True, exist_ok=True)
    from src.files import atomic_write_text

    atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    return path
