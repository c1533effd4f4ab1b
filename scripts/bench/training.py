"""Training-speed benchmark with a physical floor.

For each model: compile one chunk of `--chunk` training steps at the given batch,
time `--repeats` further chunks and report the median ms/step, the compile
seconds, the seconds of one evaluation (a log point), the FLOPs of one step from
XLA's cost analysis, and the matmul throughput of this machine measured at the
model's own shapes. floor_ms = FLOPs per step / measured FLOP/s; the fraction of
the floor achieved is floor_ms / ms_per_step. Writes runs/bench/bench.json.

    python -m scripts.bench.training                  # batch 2048, both models
    python -m scripts.bench.training --quick          # seconds-long smoke
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import jax

from src.flags import dry_run, summary
from src.gd_paper.models.layouts import model_width, num_tokens

from src.files import atomic_write_json
from src.device_rate import matmul_rate
from src.loop import step_flops
from src.gd_paper.presets import preset
from src.systems.lsa import LSATrainer

REFERENCE_MS = {"lsa1": 15.9, "twolayer": 70.0}  # reference implementation, batch 2048, 2 cores


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_model(name: str, batch: int, chunk_steps: int, repeats: int, eval_size: int) -> dict:
    settings = preset(name)
    settings = replace(
        settings, train=replace(settings.train, batch_size=batch, eval_size=eval_size, log_every=chunk_steps)
    )
    trainer = LSATrainer(settings)  # the system's own chunk, as the loop runs it
    chunk, seed_input = trainer.jitted_chunk, trainer.seed_input
    params, opt_state = trainer.init_state()

    t0 = time.perf_counter()
    params, opt_state, losses, _ = chunk(params, opt_state, seed_input, 0, chunk_steps)
    losses.block_until_ready()
    compile_s = time.perf_counter() - t0  # first call: compile + one chunk

    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        params, opt_state, losses, _ = chunk(params, opt_state, seed_input, (r + 1) * chunk_steps, chunk_steps)
        losses.block_until_ready()
        times.append(time.perf_counter() - t0)
    ms_per_step = 1000 * statistics.median(times) / chunk_steps
    compile_s -= statistics.median(times)

    state = trainer.init_state()._replace(params=params)
    trainer.evaluate(state)  # compile (and draw the eval set)
    t0 = time.perf_counter()
    trainer.evaluate(state)
    eval_s = time.perf_counter() - t0

    flops = step_flops(trainer)
    width, tokens = model_width(settings.task, settings.model), num_tokens(settings.task, settings.model)
    gflops = matmul_rate((batch, tokens, width)) / 1e9  # the projections' [B, T, D] @ [D, D]
    floor_ms = 1000 * flops / (gflops * 1e9) if flops else None
    ref = REFERENCE_MS.get(name)
    return {
        "model": name,
        "batch_size": batch,
        "chunk_steps": chunk_steps,
        "repeats": repeats,
        "ms_per_step": round(ms_per_step, 3),
        "ms_per_step_all": [round(1000 * t / chunk_steps, 3) for t in times],
        "compile_s": round(compile_s, 2),
        "eval_s_per_log_point": round(eval_s, 3),
        "eval_size": eval_size,
        "step_gflop": round(flops / 1e9, 4) if flops else None,
        "matmul_gflops_per_s": round(gflops, 1),
        "floor_ms_per_step": round(floor_ms, 3) if floor_ms else None,
        "fraction_of_floor": round(floor_ms / ms_per_step, 3) if floor_ms else None,
        "reference_ms_per_step": ref,
        "speedup_vs_reference": round(ref / ms_per_step, 2) if ref else None,
        "final_train_loss": float(losses[-1]),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.training", description=summary(__doc__))
    parser.add_argument("--models", default="lsa1,twolayer")
    parser.add_argument("--batch_size", type=int, default=2048)
    parser.add_argument("--chunk", type=int, default=100, help="steps per timed chunk")
    parser.add_argument("--repeats", type=int, default=3, help="timed chunks (median reported)")
    parser.add_argument("--eval_size", type=int, default=10_000)
    parser.add_argument("--out", default="runs/bench/bench.json")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a seconds-long smoke")
    args = parser.parse_args(argv)
    if dry_run(parser.prog, "time the benchmark"):
        return 0
    if args.quick:
        args.batch_size, args.chunk, args.repeats, args.eval_size = 64, 5, 3, 200
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in REFERENCE_MS:
            parser.error(f"--models: {m!r} is unknown; accepted: {', '.join(REFERENCE_MS)}")
    if min(args.batch_size, args.chunk, args.repeats, args.eval_size) < 1:
        parser.error("--batch_size, --chunk, --repeats and --eval_size must be >= 1")
    results = [bench_model(m, args.batch_size, args.chunk, args.repeats, args.eval_size) for m in models]
    record = {
        "results": results,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "machine": {
            "cpus": jax.local_device_count(),
            "platform": platform.platform(),
            "processor": platform.processor(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
        },
    }
    atomic_write_json(Path(args.out), record)
    header = (
        f"{'model':9} {'ms/step':>8} {'ref':>6} {'speedup':>8} {'compile s':>9} {'eval s':>7} "
        f"{'GFLOP/step':>10} {'GFLOP/s':>8} {'floor ms':>8} {'of floor':>8}"
    )
    print(header)
    for r in results:
        fmt = lambda v, spec: format(v, spec) if v is not None else "n/a"
        print(
            f"{r['model']:9} {r['ms_per_step']:8.2f} {fmt(r['reference_ms_per_step'], '6.1f')} "
            f"{fmt(r['speedup_vs_reference'], '7.1f')}x {r['compile_s']:9.1f} "
            f"{r['eval_s_per_log_point']:7.3f} {fmt(r['step_gflop'], '10.4f')} "
            f"{r['matmul_gflops_per_s']:8.1f} {fmt(r['floor_ms_per_step'], '8.3f')} "
            f"{fmt(r['fraction_of_floor'], '8.2f')}"
        )
    print(f"peak RSS {record['peak_rss_mb']:.0f} MB -> {args.out}")
    return 0


if __name__ == "__main__":
    from src.flags import summary
    from src.process import guarded

    sys.exit(guarded(main))
