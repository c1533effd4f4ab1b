"""The mechanisms paper's own PyTorch code trained at our mechanisms study's cell and protocol and
scored on the same prompts and metric as our runs, beside our recorded numbers: softmax_causal and
FAVOR+, 3 seeds each, with a verdict per mechanism.

    python -m scripts.originals_beside_ours --torch-python .originals/venv/bin/python \
        --limits-of-icl .originals/limits_of_icl

What it does:
1. exports our eval prompts (the gpt2 system's fixed eval set of configs/mechanisms.yaml: eval_size
   tasks drawn from eval_seed, the same for every mechanism and seed) to runs/originals_beside_ours/
   prompts.npz, and proves they are the recorded ones: the baselines of baselines/ computed on the
   exported prompts must give the rows recorded in report/mechanisms_results.json (least squares,
   averaging) to 1e-5 relative, else it stops (exit 1) before any training;
2. trains the original (scripts/originals/limits_of_icl_train.py under --torch-python: its nanogpt
   model, samplers, tasks, loss and train_step; our Adam, clipping and schedule) for every
   mechanism and seed, --jobs at a time, one torch thread each; a finished run's line is kept in
   runs/originals_beside_ours/<mechanism>_seed<s>.json and reused when its command and prompts
   are the same (--rerun trains again), and a killed run continues from its checkpoint
   (<mechanism>_seed<s>.pt, every 250 steps; bit for bit);
3. writes report/measurements/originals_mechanisms.json: provenance, per mechanism the per-seed
   squared error / d at n = 2d examples (ours, from the results JSON, and the original's), mean,
   sample std, min-max, the full curves and the verdict: "agrees" when the means differ by less
   than the larger of the two seed spreads (max - min), else "disagrees" (by that many spreads).

The prompts and their check are scripts/originals_beside_ours_prompts.py's, the original's runs
scripts/originals_beside_ours_runs.py's.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shlex
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np

from scripts.originals_beside_ours_prompts import ROOT, check_prompts, export_prompts, mechanisms_settings
from scripts.originals_beside_ours_runs import HARNESS, ORIGINAL_NAMES, ORIGINALS, harness_argv, protocol_of, run_one
from src.files import atomic_write_json
from src.flags import OneLineParser, UsageError, choices_list, dry_run, fail, int_at_least, seed_list, summary

PROG = "python -m scripts.originals_beside_ours"
RESULTS = ROOT / "report" / "mechanisms_results.json"
OUT = ROOT / "report" / "measurements" / "originals_mechanisms.json"
WORK = ROOT / "runs" / "originals_beside_ours"


# ---------------------------------------------------------------- the verdict


def spread_summary(values: Sequence[float]) -> dict:
    values = [float(v) for v in values]
    return {
        "per_seed": values,
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
        "spread": max(values) - min(values),
    }


def verdict(ours: Sequence[float], original: Sequence[float]) -> dict:
    """ "agrees" when |mean(ours) - mean(original)| < the larger seed spread (max - min) of the
    two; else "disagrees", with the gap in units of that spread."""
    a, b = spread_summary(ours), spread_summary(original)
    gap, spread = abs(a["mean"] - b["mean"]), max(a["spread"], b["spread"])
    agrees = gap < spread
    in_spreads = gap / spread if spread > 0 else math.inf
    text = (
        f"agrees: the means differ by {gap:.4f}, less than the larger seed spread {spread:.4f}"
        if agrees
        else f"disagrees: the means differ by {gap:.4f}, {in_spreads:.2f} times the larger seed spread {spread:.4f}"
    )
    return {
        "verdict": "agrees" if agrees else "disagrees",
        "mean_difference": b["mean"] - a["mean"],
        "larger_spread": spread,
        "difference_in_spreads": in_spreads if math.isfinite(in_spreads) else None,
        "text": text,
    }


def side_by_side(results: dict, originals: dict[str, dict[int, dict]], seeds: Sequence[int]) -> dict:
    out = {}
    for mechanism, runs in originals.items():
        recorded = results["results"][mechanism]
        recorded_seeds = list(recorded.get("seeds", range(len(recorded["curves"]))))
        ours_curves = {s: recorded["curves"][recorded_seeds.index(s)]["model"] for s in seeds}
        last = len(next(iter(ours_curves.values()))) - 1
        ours_last = [ours_curves[s][last] for s in seeds]
        original_last = [runs[s]["curve"][last] for s in seeds]
        out[mechanism] = {
            "original_attention_type": ORIGINAL_NAMES[mechanism],
            "original_attention_kwargs": runs[seeds[0]]["attention_kwargs"],
            "n_examples": last,
            "seeds": list(seeds),
            "ours": spread_summary(ours_last),
            "original": spread_summary(original_last),
            **verdict(ours_last, original_last),
            "curves": {
                "ours": {str(s): ours_curves[s] for s in seeds},
                "original": {str(s): runs[s]["curve"] for s in seeds},
                "ours_mean": list(np.mean([ours_curves[s] for s in seeds], axis=0)),
                "original_mean": list(np.mean([runs[s]["curve"] for s in seeds], axis=0)),
                "least_squares": recorded["curves"][0]["least_squares"],
            },
            "original_runs": {
                str(s): {
                    k: runs[s][k]
                    for k in (
                        "seconds",
                        "seconds_train",
                        "parameters",
                        "final_loss_mean_last_100",
                        "clipped_steps",
                        "threads",
                    )
                }
                for s in seeds
            },
        }
    return out


# ---------------------------------------------------------------- the command line


def main(argv=None) -> int:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--torch-python", required=True, help="the scratch environment's python (with torch)")
    parser.add_argument("--limits-of-icl", required=True, type=Path, help="a checkout of kenzhengjk/limits_of_icl")
    parser.add_argument(
        "--mechanisms",
        default=",".join(ORIGINAL_NAMES),
        help=f"comma list of {', '.join(ORIGINAL_NAMES)} (default: both)",
    )
    parser.add_argument("--seeds", default="0,1,2", help="comma list of seeds our study recorded (default 0,1,2)")
    parser.add_argument("--jobs", type=int_at_least(1, 2), default=2, help="trainings at once (default 2)")
    parser.add_argument(
        "--steps",
        type=int_at_least(1),
        default=None,
        help="train this many steps instead of the study's (a smoke test: the verdict then "
        "compares unlike runs; written beside --out with .steps<N>)",
    )
    parser.add_argument("--out", type=Path, default=OUT, help=f"(default {OUT.relative_to(ROOT)})")
    parser.add_argument("--rerun", action="store_true", help="train again even where a kept run matches")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    try:
        return run(args)
    except UsageError as err:
        return fail(PROG, err)


def check_flags(args) -> tuple[list[str], list[int]]:
    if not (args.limits_of_icl / "src" / "wrapper_model.py").is_file():
        raise UsageError(
            f"--limits-of-icl={str(args.limits_of_icl)!r} has no src/wrapper_model.py; accepted: a "
            "checkout of kenzhengjk/limits_of_icl (040e95d)"
        )
    if not Path(args.torch_python).is_file():
        raise UsageError(f"--torch-python={args.torch_python!r} is not a file; accepted: a Python with torch installed")
    if not RESULTS.is_file():
        raise UsageError(
            f"{RESULTS.relative_to(ROOT)} is missing; accepted: the mechanisms study's results (make mechanisms)"
        )
    mechanisms = choices_list("--mechanisms", args.mechanisms, tuple(ORIGINAL_NAMES))
    seeds = seed_list(args.seeds)
    if args.out.exists() and not args.out.is_file():
        raise UsageError(f"--out={str(args.out)!r} is not a file; accepted: a file path")
    return mechanisms, seeds


def check_recorded_seeds(args, results: dict, mechanisms: list[str], seeds: list[int]) -> None:
    for mechanism in mechanisms:
        recorded = results["results"].get(mechanism)
        have = list(recorded.get("seeds", [])) if recorded else []
        missing = [s for s in seeds if s not in have]
        if missing:
            raise UsageError(
                f"--seeds={args.seeds!r}: {mechanism} has no recorded seed {missing[0]}; accepted: seeds among {have}"
            )


def train_originals(args, settings, mechanisms, seeds, prompts: Path, sha: str) -> dict[str, dict[int, dict]]:
    """Every mechanism and seed of the original, --jobs at a time, the longest first; raises
    RuntimeError when a run fails."""
    work = [(mechanism, seed) for mechanism in mechanisms for seed in seeds]
    work.sort(key=lambda ms: -ORIGINALS[ms[0]].hours)  # the longest first, so the slots stay busy
    suffix = "" if args.steps is None else f"_steps{args.steps}"

    def one(ms):
        mechanism, seed = ms
        argv = harness_argv(
            args.torch_python, args.limits_of_icl.resolve(), settings, mechanism, seed, prompts, args.steps
        )
        stem = f"{mechanism}_seed{seed}{suffix}"
        checkpoint = WORK / f"{stem}.pt"  # a killed training continues from here, bit for bit
        if args.rerun:
            checkpoint.unlink(missing_ok=True)
        argv += ["--checkpoint", str(checkpoint), "--checkpoint-every", "250"]
        return ms, run_one(argv, WORK / f"{stem}.json", WORK / f"{stem}.log", sha, args.rerun)

    originals: dict[str, dict[int, dict]] = {m: {} for m in mechanisms}
    with ThreadPoolExecutor(args.jobs) as pool:
        for (mechanism, seed), result in pool.map(one, work):
            originals[mechanism][seed] = result
    return originals


def provenance(began: float, first: dict) -> dict:
    import jax
    from src.provenance import git_commit

    return {
        **git_commit(),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cpus": os.cpu_count(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch": first["torch"],
        "jax": jax.__version__,
        "python": platform.python_version(),
        "original": "kenzhengjk/limits_of_icl 040e95d",
        "harness": str(HARNESS.relative_to(ROOT)),
        "seconds": time.perf_counter() - began,
        "note": "kept runs (runs/originals_beside_ours/*.json) are reused; their own seconds are under original_runs",
    }


def measurement_record(args, began, settings, prompts, xs, sha, check, results, originals, seeds) -> dict:
    first = originals[next(iter(originals))][seeds[0]]
    return {
        "what": "limits_of_icl's own PyTorch code (nanogpt) trained at our mechanisms study's cell and protocol, "
        "scored on our eval prompts and metric, beside our recorded runs",
        "command": f"{PROG} " + " ".join(shlex.quote(a) for a in args.argv),
        "provenance": provenance(began, first),
        "protocol": protocol_of(settings) if args.steps is None else {**protocol_of(settings), "steps": args.steps},
        "prompts": {
            "file": str(prompts.relative_to(ROOT)),
            "shape": list(xs.shape),
            "sha256": sha,
            "recorded_baselines_max_relative_difference": check,
        },
        "rule": "agrees when |mean(ours) - mean(original)| at n = 2d < max(spread(ours), spread(original)), "
        "spread = max - min over the seeds",
        "ours_source": str(RESULTS.relative_to(ROOT)),
        "mechanisms": side_by_side(results, originals, seeds),
    }


def print_verdicts(record: dict) -> None:
    for mechanism, row in record["mechanisms"].items():
        a, b = row["ours"], row["original"]
        print(
            f"{mechanism}: ours {a['mean']:.4f} ± {a['std']:.4f} [{a['min']:.4f}, {a['max']:.4f}]  original "
            f"{b['mean']:.4f} ± {b['std']:.4f} [{b['min']:.4f}, {b['max']:.4f}]  -> {row['text']}",
            flush=True,
        )


def run(args) -> int:
    began = time.perf_counter()
    mechanisms, seeds = check_flags(args)
    results = json.loads(RESULTS.read_text())
    check_recorded_seeds(args, results, mechanisms, seeds)
    out = args.out if args.steps is None else args.out.with_suffix(f".steps{args.steps}.json")
    if dry_run(PROG, f"train {len(mechanisms) * len(seeds)} runs of the original and write {out}"):
        return 0
    settings = mechanisms_settings()
    WORK.mkdir(parents=True, exist_ok=True)
    prompts = WORK / "prompts.npz"
    xs, ys = export_prompts(prompts, settings)
    try:
        check = check_prompts(xs, ys, results, mechanisms)
    except RuntimeError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1
    print(
        f"prompts: {xs.shape} -> {prompts.relative_to(ROOT)}; recorded baseline rows reproduced "
        f"(worst relative difference {max(v for m in check.values() for v in m.values()):.2g})",
        flush=True,
    )
    sha = hashlib.sha256(xs.tobytes() + ys.tobytes()).hexdigest()
    try:
        originals = train_originals(args, settings, mechanisms, seeds, prompts, sha)
    except RuntimeError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1
    record = measurement_record(args, began, settings, prompts, xs, sha, check, results, originals, seeds)
    atomic_write_json(out, record)
    print_verdicts(record)
    print(f"-> {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} ({time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
