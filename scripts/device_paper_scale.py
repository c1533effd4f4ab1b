"""One device command for the paper cell (issue: the papers' own scale on one GPU), sized to a
lent GPU's 10-minute command: what a step costs, limits_of_icl's own step beside it, and a sweep
of training protocols for softmax attention at the paper's model size.

    python -m scripts.device_paper_scale --out OUT --budget-s 560 --commit HASH \
        --original .originals/limits_of_icl

1. `scripts.bench_paper_cell` (every setting timed, two traced): OUT/paper_cell_bench.json.
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

from src.flags import OneLineParser, UsageError, dry_run, summary

PROG = "python -m scripts.device_paper_scale"
CONFIG = "configs/paper/mechanisms.yaml"
# protocol -> runners.train overrides (besides the steps, the curriculum's interval and the setting)
SWEEP = {"adam1e-4_b64": ["training.learning_rate=0.0001"],
         "adam3e-4_b64": ["training.learning_rate=0.0003"],
         "adam3e-4_b256": ["training.learning_rate=0.0003", "training.batch_size=256"],
         "adam1e-3_b256_warm": ["training.learning_rate=0.001", "training.batch_size=256",
                                "training.warmup_fraction=0.05", "training.grad_clip=1.0"]}
BUDGET_S = 560.0                # the default device budget of the whole command, seconds
BENCH_LIMIT_S = 200             # the single-run settings and their traces
TOGETHER_LIMIT_S = 100          # the runs trained together
SWEEP_MARGIN_S = 90             # the sweep's runs stop this long before the budget ends (compilation, evaluation)
# measured on one H200, 2026-11-27 (report/measurements/gpu_2026-11-27): four runs sharing the
# device each ran 4.6x (batch 64) and 5.1x (batch 256) slower than one alone, and compiled in ~60 s
SHARING_COST = 1.3              # a shared run's step time over (its time alone x the runs sharing)
COMPILE_S = 60.0                # seconds of each run's start before its first step
# each run's evaluation after training (a process of its own: 22 s to load on an H200, 2026-11-27,
# then one compilation; before its least squares moved to the host, four evaluations did not end
# in 130-180 s and one alone not in 35 s, so none of those runs has its shifts)
EVAL_S = 60.0
CURRICULUM_SHARE = 0.3          # the curriculum reaches d = 20, 41 points at this share of the steps
CURRICULUM_STEPS = 15           # its increments (dims 5 -> 20 by 1, points 11 -> 41 by 2)
SETTING_SETS = {"float32": [], "float32_flat": ["training.flat_update=true"],
                "tf32": ["training.precision=tf32"],
                "tf32_fused_flat": ["training.precision=tf32", "training.flat_update=true",
                                    "model.attention_kernel=fused"],
                "bfloat16": ["training.precision=bfloat16"],
                "bfloat16_fused": ["training.precision=bfloat16", "model.attention_kernel=fused"],
                "bfloat16_fused_flat": ["training.precision=bfloat16", "training.flat_update=true",
                                        "model.attention_kernel=fused"]}


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
    from scripts.bench_paper_cell import paper_settings
    from scripts.compare_originals import limits_of_icl_cell
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
    return {"ready": next((r for r in records if r.get("ready")), None), "rounds_ms": ms,
            "exit": done.returncode, "stderr_tail": done.stderr[-800:] if done.returncode else ""}


def fastest_setting(bench: dict) -> tuple[str, float, float | None]:
    """(setting, ms per step at batch 64, ms per step at batch 256 or None) of the fastest single
    run setting step 1 timed."""
    timed = {k: v["ms_per_run_step"] for k, v in bench.get("variants", {}).items()
             if "ms_per_run_step" in v and v.get("runs_together", 1) == 1 and k in SETTING_SETS}
    if not timed:
        return "float32", 13.0, None
    best = min(timed, key=timed.get)
    b256 = bench["variants"].get(best + "_b256", {}).get("ms_per_run_step")
    return best, timed[best], b256


def sweep_jobs(setting: str, ms64: float, ms256: float | None, seconds: float, runs_dir: Path,
               extra: tuple = (), table: str | None = None, fixed_steps: int | None = None,
               mechanisms: tuple = ()) -> list:
    """The sweep's runs (softmax under every protocol), or the table's (`mechanisms`, default all,
    under the protocol `table`), each with the steps the time left allows on a shared device
    (SHARING_COST, COMPILE_S, EVAL_S, 20 % to spare), or fixed_steps."""
    from scripts.paper_mechanisms import MECHANISMS, train_command
    runs = ([(m, m, SWEEP[table]) for m in (mechanisms or MECHANISMS)] if table
            else [(n, "softmax_causal", s) for n, s in SWEEP.items()])
    jobs = []
    share = len(runs)
    for name, mechanism, sets in runs:
        batch = 256 if "training.batch_size=256" in sets else 64
        ms = ms64 if batch == 64 else (ms256 or 4 * ms64)
        steps = fixed_steps or max(200, int(0.8 * (seconds - COMPILE_S - EVAL_S) * 1000 / (ms * share * SHARING_COST))
                                   // 100 * 100)
        interval = max(1, int(CURRICULUM_SHARE * steps / CURRICULUM_STEPS))
        sets = [*sets, *SETTING_SETS[setting], f"training.train_steps={steps}",
                f"training.log_every={max(100, steps // 10 // 100 * 100)}", f"training.save_every_steps={steps}",
                f"training.curriculum.dims.interval={interval}", f"training.curriculum.points.interval={interval}",
                *extra]
        jobs.append((name, train_command(CONFIG, mechanism, sets, runs_dir / name)))
    return jobs


def main(argv=None) -> int:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget-s", "--budget_s", dest="budget_s", type=float, default=BUDGET_S)
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--original", default=None, help="limits_of_icl's checkout (its src/)")
    parser.add_argument("--bench-args", "--bench_args", dest="bench_args", default="",
                        help="extra arguments for scripts.bench_paper_cell (e.g. --tiny on a CPU)")
    parser.add_argument("--sweep-sets", "--sweep_sets", dest="sweep_sets", default="",
                        help="extra runners.train overrides for every sweep run, space-separated (a CPU check)")
    parser.add_argument("--table", default=None, metavar="PROTOCOL",
                        help=f"instead of the sweep, train every mechanism under this protocol ({', '.join(SWEEP)}) "
                             "and write OUT/PAPER_SCALE_MECHANISMS.md")
    parser.add_argument("--mechanisms", default="",
                        help="with --table: a comma list of the mechanisms to train (default all); the table in two calls")
    parser.add_argument("--with-table", "--with_table", dest="with_table", default=None,
                        help="with --table: an earlier call's table.json, whose mechanisms join this call's report")
    parser.add_argument("--steps", type=int, default=None,
                        help="the steps of every sweep or table run (default: what the time left allows)")
    parser.add_argument("--bench-json", "--bench_json", dest="bench_json", default=None,
                        help="an earlier call's paper_cell_bench.json: its fastest setting and step times are "
                             "used and step 1 is skipped (the sweep or table in a call of its own)")
    parser.add_argument("--skip", default="", help="comma list of bench, original, sweep (the sweep or table)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.table is not None and args.table not in SWEEP:
        raise UsageError(f"--table={args.table!r} is unknown; accepted: {', '.join(SWEEP)}")
    from scripts.paper_mechanisms import MECHANISMS
    mechanisms = tuple(m for m in args.mechanisms.split(",") if m)
    if set(mechanisms) - set(MECHANISMS):
        raise UsageError(f"--mechanisms={args.mechanisms!r} is not accepted; accepted: a comma list of {', '.join(MECHANISMS)}")
    if (mechanisms or args.with_table) and args.table is None:
        raise UsageError("--mechanisms and --with-table are not accepted without --table; accepted: --table PROTOCOL with them")
    earlier = []
    if args.with_table:
        try:
            earlier = json.loads(Path(args.with_table).read_text())["results"]
            assert isinstance(earlier, list) and all(isinstance(r, dict) and "name" in r for r in earlier)
        except (OSError, ValueError, KeyError, TypeError, AssertionError):
            raise UsageError(f"--with-table={args.with_table!r} is not accepted; accepted: a table.json of this command") from None
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
        raise UsageError(f"--original={args.original!r} has no src/wrapper_model.py; accepted: a limits_of_icl checkout")
    if dry_run(PROG, f"time the paper cell, then {'the table under ' + args.table if args.table else 'the sweep'} "
                     f"within {args.budget_s:g} s into {args.out}"):
        return 0
    began = time.time()
    deadline = began + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = log_to(out / "device_paper_scale.log")
    skip = set(args.skip.split(","))
    info = {"commit": args.commit, "began_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            "nvidia_smi": shell("nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv"),
            "python": sys.version, "pip": shell(f"{sys.executable} -m pip list 2>/dev/null | grep -iE "
                                                "'^(jax|jaxlib|jax-cuda|dm-haiku|optax|torch|numpy) '")}
    (out / "device_info.json").write_text(json.dumps(info, indent=1))
    log(f"commit {args.commit}; budget {args.budget_s:.0f} s")

    bench_json = out / "paper_cell_bench.json"
    # single runs first (and traced); runs together in a process of their own, so that a setting
    # the device refuses there cannot take the others with it
    parts = [(bench_json, "float32,float32_flat,tf32,tf32_fused_flat,bfloat16,bfloat16_fused,bfloat16_fused_flat,"
                          "bfloat16_fused_flat_b256", "float32,bfloat16_fused_flat", BENCH_LIMIT_S),
             (out / "paper_cell_bench_together.json", "bfloat16_fused_flat_x8,tf32_fused_flat_x8", "", TOGETHER_LIMIT_S)]
    if args.bench_json:
        skip.add("bench")
        bench_json.write_text(Path(args.bench_json).read_text())
    for target, variants, traced, limit in parts if "bench" not in skip else []:
        command = [sys.executable, "-m", "scripts.bench_paper_cell", "--json", str(target), "--variants", variants,
                   *(["--profile", traced] if traced else []), *args.bench_args.split()]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=min(limit, deadline - time.time()))
            log("bench exit %d\n%s%s" % (done.returncode, done.stdout[-3000:], done.stderr[-2000:]))
        except subprocess.TimeoutExpired as err:
            log(f"bench timed out: {str(err.stdout)[-2000:] if err.stdout else ''}")
    bench = json.loads(bench_json.read_text()) if bench_json.exists() else {}

    if "original" not in skip and args.original:
        record = {}
        for tf32 in (False, True):
            record["tf32" if tf32 else "float32"] = original_step(args.original, tf32)
            (out / "original_step.json").write_text(json.dumps(record, indent=1))
        log(f"original: {json.dumps({k: v.get('rounds_ms') or v.get('error') or v.get('stderr_tail') for k, v in record.items()})}")

    if "sweep" not in skip:
        from scripts.paper_mechanisms import run_all
        setting, ms64, ms256 = fastest_setting(bench)
        seconds = deadline - time.time() - SWEEP_MARGIN_S
        jobs = sweep_jobs(setting, ms64, ms256, max(seconds, 30),
                          Path("runs/paper_table" if args.table else "runs/paper_sweep"),
                          tuple(args.sweep_sets.split()), args.table, args.steps, mechanisms)
        log(f"sweep with {setting} ({ms64:.2f} ms/step at batch 64, {ms256} at 256) for {seconds:.0f} s")
        for name, command in jobs:
            log(f"  {name}: {' '.join(command[2:])}")

        def save(results):
            (out / ("table.json" if args.table else "sweep.json")).write_text(
                json.dumps({"setting": setting, "protocol": args.table, "commit": args.commit, "results": results},
                           indent=1))
        results = run_all(jobs, parallel=len(jobs), deadline=deadline - 25, on_result=save, log=log)
        if args.table:
            from scripts.paper_mechanisms import write_report
            trained_now = {r["name"] for r in results}
            joined = [r for r in earlier if r["name"] not in trained_now] + results
            write_report(joined, out / "PAPER_SCALE_MECHANISMS.md",
                         [f"- Produced {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from commit {args.commit}",
                          f"- Device: {info['nvidia_smi'].splitlines()[-1] if info['nvidia_smi'] else '?'}",
                          f"- Command: `{PROG} {' '.join(sys.argv[1:] if argv is None else argv)}` "
                          f"({time.time() - began:.0f} s)",
                          f"- Protocol {args.table}: {' '.join(SWEEP[args.table])}; setting {setting}",
                          *([f"- Joined with {args.with_table}: {', '.join(r['name'] for r in earlier if r['name'] not in trained_now)}"]
                            if earlier else [])])
        for r in results:
            errors = r.get("errors", {})
            log(f"{r['name']}: exit {r['exit']}, {r.get('steps')} steps, standard "
                f"{errors.get('standard', {}).get('model')}, 10 flipped {errors.get('10 dims flipped', {}).get('model')}")
    log(f"done in {time.time() - began:.0f} s")
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
