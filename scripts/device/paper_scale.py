"""One device command for the paper cell (issue: the papers' own scale on one GPU), sized to a
lent GPU's 10-minute command: what a step costs, limits_of_icl's own step beside it, and a sweep
of training protocols for softmax attention at the paper's model size.

    python -m scripts.device.paper_scale --out OUT --budget-s 560 --commit HASH \
        --original .originals/limits_of_icl

1. `scripts.bench.paper_cell` (every setting timed, two traced): OUT/paper_cell_bench.json.
2. limits_of_icl's own step (scripts/originals/limits_of_icl_step.py on CUDA: float32, then TF32),
   3 rounds of 50 steps each after 10 warm-up steps: OUT/original_step.json.
3. The sweep (or, with --table PROTOCOL, every mechanism under one protocol: OUT/table.json and
   OUT/PAPER_SCALE_MECHANISMS.md): softmax attention at the paper's size (configs/paper/mechanisms.yaml) under
   SWEEP's protocols at once on the device, each `python -m runners.train` with the fastest
   setting step 1 measured, for as many steps as the time left allows (each run's steps from its
   measured ms per step, the runs sharing the device), the curriculum compressed to its first 30 %;
   each run evaluated by `scripts.paper_mechanisms --evaluate`: OUT/sweep.json.
Everything is written as it comes, so a command stopped at its limit still brings back what it did.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from scripts.device.paper_cell_plan import SWEEP, SWEEP_MARGIN_S, fastest_setting, sweep_jobs
from src.flags import OneLineParser, UsageError, add_both_spellings, dry_run, summary

PROG = "python -m scripts.device.paper_scale"
BUDGET_S = 560.0  # the default device budget of the whole command, seconds
BENCH_LIMIT_S = 200  # the single-run settings and their traces
TOGETHER_LIMIT_S = 100  # the runs trained together


def log_to(path: Path):
    def log(text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        print(line, flush=True)
        with open(path, "a") as f:
            f.write(line + "\n")

    return log


def shell(command: str) -> str:
    try:
        return subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30).stdout
    except Exception as err:
        return f"{type(err).__name__}: {err}"


def original_step(checkout: str, tf32: bool, rounds: int = 3, timeout: float = 90.0) -> dict:
    from scripts.bench.paper_cell import paper_settings
    from scripts.bench.compare_originals import limits_of_icl_cell

    _, command = limits_of_icl_cell(paper_settings(), sys.executable, checkout, 10, 50, "cuda", "1" if tf32 else "0")
    try:
        done = subprocess.run(command, input="\n" * rounds, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    records = []
    for line in done.stdout.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            pass
    ms = [r["ms_per_step"] for r in records if "ms_per_step" in r]
    return {
        "ready": next((r for r in records if r.get("ready")), None),
        "rounds_ms": ms,
        "exit": done.returncode,
        "stderr_tail": done.stderr[-800:] if done.returncode else "",
    }


def flags() -> OneLineParser:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--out", required=True)
    add_both_spellings(parser, "--budget-s", type=float, default=BUDGET_S)
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--original", default=None, help="limits_of_icl's checkout (its src/)")
    add_both_spellings(
        parser,
        "--bench-args",
        default="",
        help="extra arguments for scripts.bench.paper_cell (e.g. --tiny on a CPU)",
    )
    add_both_spellings(
        parser,
        "--sweep-sets",
        default="",
        help="extra runners.train overrides for every sweep run, space-separated (a CPU check)",
    )
    parser.add_argument(
        "--table",
        default=None,
        metavar="PROTOCOL",
        help=f"instead of the sweep, train every mechanism under this protocol ({', '.join(SWEEP)}) "
        "and write OUT/PAPER_SCALE_MECHANISMS.md",
    )
    parser.add_argument(
        "--mechanisms",
        default="",
        help="with --table: a comma list of the mechanisms to train (default all); the table in two calls",
    )
    add_both_spellings(
        parser,
        "--with-table",
        default=None,
        help="with --table: an earlier call's table.json, whose mechanisms join this call's report",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="the steps of every sweep or table run (default: what the time left allows)",
    )
    add_both_spellings(
        parser,
        "--bench-json",
        default=None,
        help="an earlier call's paper_cell_bench.json: its fastest setting and step times are "
        "used and step 1 is skipped (the sweep or table in a call of its own)",
    )
    parser.add_argument("--skip", default="", help="comma list of bench, original, sweep (the sweep or table)")
    return parser


def parse(argv) -> tuple:
    """The command's flags, checked before any work: (args, mechanisms, earlier table rows)."""
    args = flags().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.table is not None and args.table not in SWEEP:
        raise UsageError(f"--table={args.table!r} is unknown; accepted: {', '.join(SWEEP)}")
    from scripts.paper_mechanisms import MECHANISMS

    mechanisms = tuple(m for m in args.mechanisms.split(",") if m)
    if set(mechanisms) - set(MECHANISMS):
        raise UsageError(
            f"--mechanisms={args.mechanisms!r} is not accepted; accepted: a comma list of {', '.join(MECHANISMS)}"
        )
    if (mechanisms or args.with_table) and args.table is None:
        raise UsageError(
            "--mechanisms and --with-table are not accepted without --table; accepted: --table PROTOCOL with them"
        )
    earlier = []
    if args.with_table:
        try:
            earlier = json.loads(Path(args.with_table).read_text())["results"]
            assert isinstance(earlier, list) and all(isinstance(r, dict) and "name" in r for r in earlier)
        except (OSError, ValueError, KeyError, TypeError, AssertionError):
            raise UsageError(
                f"--with-table={args.with_table!r} is not accepted; accepted: a table.json of this command"
            ) from None
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps={args.steps} is not accepted; accepted: an integer >= 1")
    if args.budget_s < 60:
        raise UsageError(f"--budget-s={args.budget_s:g} is not accepted; accepted: at least 60 seconds")
    unknown = set(args.skip.split(",")) - {"", "bench", "original", "sweep"}
    if unknown:
        raise UsageError(f"--skip={args.skip!r} is not accepted; accepted: a comma list of bench, original, sweep")
    if args.bench_json and not Path(args.bench_json).is_file():
        raise UsageError(f"--bench-json={args.bench_json!r} is not a file; accepted: a paper_cell_bench.json")
    if args.original and not Path(args.original, "src", "wrapper_model.py").is_file():
        raise UsageError(
            f"--original={args.original!r} has no src/wrapper_model.py; accepted: a limits_of_icl checkout"
        )
    return args, mechanisms, earlier


def time_the_cell(args, out: Path, deadline: float, log) -> dict:
    """Step 1 (unless skipped or read from --bench-json): every setting's step time, into
    OUT/paper_cell_bench.json; returns what that file holds."""
    bench_json = out / "paper_cell_bench.json"
    # single runs first (and traced); runs together in a process of their own, so that a setting
    # the device refuses there cannot take the others with it
    parts = [
        (
            bench_json,
            "float32,float32_flat,tf32,tf32_fused_flat,bfloat16,bfloat16_fused,bfloat16_fused_flat,"
            "bfloat16_fused_flat_b256",
            "float32,bfloat16_fused_flat",
            BENCH_LIMIT_S,
        ),
        (out / "paper_cell_bench_together.json", "bfloat16_fused_flat_x8,tf32_fused_flat_x8", "", TOGETHER_LIMIT_S),
    ]
    if args.bench_json:
        bench_json.write_text(Path(args.bench_json).read_text())
    for target, variants, traced, limit in parts if not ({"bench"} & skipped(args) or args.bench_json) else []:
        command = [
            sys.executable,
            "-m",
            "scripts.bench.paper_cell",
            "--json",
            str(target),
            "--variants",
            variants,
            *(["--profile", traced] if traced else []),
            *args.bench_args.split(),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=min(limit, deadline - time.time()))
            log("bench exit %d\n%s%s" % (done.returncode, done.stdout[-3000:], done.stderr[-2000:]))
        except subprocess.TimeoutExpired as err:
            log(f"bench timed out: {str(err.stdout)[-2000:] if err.stdout else ''}")
    return json.loads(bench_json.read_text()) if bench_json.exists() else {}


def time_the_original(checkout: str, out: Path, log) -> None:
    """Step 2: limits_of_icl's own step in float32, then TF32, into OUT/original_step.json."""
    record = {}
    for tf32 in (False, True):
        record["tf32" if tf32 else "float32"] = original_step(checkout, tf32)
        (out / "original_step.json").write_text(json.dumps(record, indent=1))
    log(
        "original: "
        + json.dumps({k: v.get("rounds_ms") or v.get("error") or v.get("stderr_tail") for k, v in record.items()})
    )


def train_the_runs(
    args, out: Path, bench: dict, mechanisms: tuple, earlier: list, header, deadline: float, log
) -> None:
    """Step 3: the sweep, or with --table the table (its report headed by the lines `header()`
    gives when it is written, and the protocol), every result saved the moment it comes."""
    from scripts.paper_mechanisms import run_all, write_report

    setting, ms64, ms256 = fastest_setting(bench)
    seconds = deadline - time.time() - SWEEP_MARGIN_S
    jobs = sweep_jobs(
        setting,
        ms64,
        ms256,
        max(seconds, 30),
        Path("runs/paper_table" if args.table else "runs/paper_sweep"),
        tuple(args.sweep_sets.split()),
        args.table,
        args.steps,
        mechanisms,
    )
    log(f"sweep with {setting} ({ms64:.2f} ms/step at batch 64, {ms256} at 256) for {seconds:.0f} s")
    for name, command in jobs:
        log(f"  {name}: {' '.join(command[2:])}")

    def save(results):
        (out / ("table.json" if args.table else "sweep.json")).write_text(
            json.dumps(
                {"setting": setting, "protocol": args.table, "commit": args.commit, "results": results}, indent=1
            )
        )

    results = run_all(jobs, parallel=len(jobs), deadline=deadline - 25, on_result=save, log=log)
    if args.table:
        trained_now = {r["name"] for r in results}
        kept = [r for r in earlier if r["name"] not in trained_now]
        write_report(
            kept + results,
            out / "PAPER_SCALE_MECHANISMS.md",
            [
                *header(),
                f"- Protocol {args.table}: {' '.join(SWEEP[args.table])}; setting {setting}",
                *([f"- Joined with {args.with_table}: {', '.join(r['name'] for r in kept)}"] if kept else []),
            ],
        )
    for r in results:
        errors = r.get("errors", {})
        log(
            f"{r['name']}: exit {r['exit']}, {r.get('steps')} steps, standard "
            f"{errors.get('standard', {}).get('model')}, 10 flipped {errors.get('10 dims flipped', {}).get('model')}"
        )


def skipped(args) -> set:
    return set(args.skip.split(","))


def main(argv=None) -> int:
    args, mechanisms, earlier = parse(argv)
    if dry_run(
        PROG,
        f"time the paper cell, then {'the table under ' + args.table if args.table else 'the sweep'} "
        f"within {args.budget_s:g} s into {args.out}",
    ):
        return 0
    began = time.time()
    deadline = began + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = log_to(out / "device_paper_scale.log")
    info = {
        "commit": args.commit,
        "began_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "nvidia_smi": shell("nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv"),
        "python": sys.version,
        "pip": shell(
            f"{sys.executable} -m pip list 2>/dev/null | grep -iE '^(jax|jaxlib|jax-cuda|dm-haiku|optax|torch|numpy) '"
        ),
    }
    (out / "device_info.json").write_text(json.dumps(info, indent=1))
    log(f"commit {args.commit}; budget {args.budget_s:.0f} s")
    bench = time_the_cell(args, out, deadline, log)
    if "original" not in skipped(args) and args.original:
        time_the_original(args.original, out, log)
    if "sweep" not in skipped(args):
        header = lambda: [
            f"- Produced {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from commit {args.commit}",
            f"- Device: {info['nvidia_smi'].splitlines()[-1] if info['nvidia_smi'] else '?'}",
            f"- Command: `{PROG} {' '.join(sys.argv[1:] if argv is None else argv)}` ({time.time() - began:.0f} s)",
        ]
        train_the_runs(args, out, bench, mechanisms, earlier, header, deadline, log)
    log(f"done in {time.time() - began:.0f} s")
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
