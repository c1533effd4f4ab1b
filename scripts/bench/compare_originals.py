"""Training speed of the sequence family against the originals' own PyTorch code, side by side:
the mechanisms study's cell against the mechanisms paper's code (width 64, 3 layers, 4 heads,
batch 64, d = 5, 11 points = 22 tokens, softmax attention, Adam; both in float32), and the ICL
benchmark's default cell against its recipe's code (MQAR V = 8,192, T = 64, κ = 8; width 128,
2 layers, 8 heads, batch 256, attention + MLP, AdamW; ours in float32, the original in its
defaults, bfloat16 and torch.compile, and in float32 eager). Each round times every side in
turn (ours now, ours as it was before 2026-11-26 — batched dense layers and logits at every
position — and the original, kept running between rounds), so that load on the machine falls
on all alike. Prints the median ms/step of each side and the ratios, and writes
runs/compare_originals/<cell>.json.

With --paper-cell (and --device cuda on a GPU), also the paper cell (12 layers, width 256, 8 heads,
d = 20, 41 points, batch 64) against limits_of_icl's step as its train.py runs it there: ours in
float32 and in bfloat16 with the fused attention and flat update (scripts/bench/paper_cell.py).

The originals run under another Python (a scratch environment with torch; see
docs/workbench.md, "Against the original code") from checkouts of their repositories.

    python -m scripts.bench.compare_originals --torch-python SCRATCH/bin/python \
        --limits-of-icl CHECKOUT --miniseq CHECKOUT
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from src.flags import OneLineParser, UsageError, dry_run, fail, summary
from src.files import atomic_write_json

PROG = "python -m scripts.bench.compare_originals"
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "runs" / "compare_originals"


class Original:
    """An original's harness (scripts/originals/) kept running: `round()` times one round."""

    def __init__(self, argv: list[str], what: str):
        self.what = what
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.meta = self._line()

    def _line(self) -> dict:
        while True:
            line = self.process.stdout.readline()
            if not line:
                tail = (self.process.stderr.read().strip().splitlines() or ["(no output)"])[-1]
                raise UsageError(f"{self.what} stopped: {tail}")
            if line.startswith("{"):
                return json.loads(line)

    def round(self) -> float:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return self._line()["ms_per_step"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def ours(settings, steps: int):
    """A function timing one round of `steps` steps of our compiled chunk (compiled here), in ms per
    step (src.loop.chunk_timer)."""
    from src.loop import chunk_timer
    from src.systems import build

    return chunk_timer(build(settings), steps)


def limits_of_icl_cell(settings, python: str, checkout, warmup: int, steps: int, *extra: str) -> tuple[dict, list[str]]:
    """(the cell of gpt2 `settings` in the harness's terms, the command line of limits_of_icl's
    harness under `python` from `checkout`, timing `steps` steps a round after `warmup`, then
    `extra` arguments: DEVICE, TF32)."""
    m = settings.model
    cell = {
        "width": m.width,
        "layers": m.n_layer,
        "heads": m.n_head,
        "batch": settings.train.batch_size,
        "dims": m.n_dims,
        "points": settings.curriculum.points.end,
    }
    harness = [
        python,
        str(ROOT / "scripts" / "originals" / "limits_of_icl_step.py"),
        str(checkout),
        *map(str, (*cell.values(), warmup, steps)),
        *extra,
    ]
    return cell, harness


def mechanisms_sides(args) -> tuple[dict, dict]:
    """(the cell, read from configs/mechanisms.yaml; its sides)."""
    from src.formats.limits_of_icl import read_config

    base, _ = read_config(str(ROOT / "configs" / "mechanisms.yaml"))
    m = base.model
    cell, harness = limits_of_icl_cell(base, args.torch_python, args.limits_of_icl, 20, args.steps)
    return cell, {
        "ours": ours(base, args.steps),
        "ours_before": ours(replace(base, model=replace(m, dense_layout="batched")).validate(), args.steps),
        "original": Original(harness, "the mechanisms paper's code"),
    }


def paper_cell_sides(args) -> tuple[dict, dict]:
    """(the paper cell, scripts/bench_paper_cell's; its sides: ours in float32 and in the fastest
    setting, and the original's step on --device, float32 or with TF32 allowed (--tf32))."""
    from scripts.bench.paper_cell import paper_settings, variant_settings

    base = paper_settings()
    cell, harness = limits_of_icl_cell(
        base, args.torch_python, args.limits_of_icl, 10, args.paper_steps, args.device, "1" if args.tf32 else "0"
    )
    return cell, {
        "ours": ours(base, args.paper_steps),
        "ours_bfloat16_fused_flat": ours(variant_settings(base, "bfloat16_fused_flat"), args.paper_steps),
        "original": Original(harness, "the mechanisms paper's code at the paper cell"),
    }


def icl_sides(args) -> tuple[dict, dict]:
    """(the ICL benchmark's default cell, scripts/bench_recipe's; its sides)."""
    from scripts.bench.recipe import original_default_cell

    settings, steps = original_default_cell(), args.icl_steps
    m, task = settings.model, settings.task.options
    cell = {
        "width": m.width,
        "layers": m.n_layer,
        "heads": m.n_head,
        "batch": settings.train.batch_size,
        "vocab": task.vocab_size,
        "seq_len": task.seq_len,
        "pairs": task.num_pairs,
    }

    def harness(dtype, compiled):
        return [
            args.torch_python,
            str(ROOT / "scripts" / "originals" / "miniseq_step.py"),
            str(args.miniseq),
            dtype,
            compiled,
            *map(str, (*cell.values(), 2, steps)),
        ]

    return cell, {
        "ours": ours(settings, steps),
        "ours_before": ours(original_default_cell("batched", "all"), steps),
        "original": Original(harness("bfloat16", "1"), "the ICL benchmark's code (bfloat16, compiled)"),
        "original_float32_eager": Original(harness("float32", "0"), "the ICL benchmark's code (float32, eager)"),
    }


def _backend() -> str:
    import jax

    return f"{jax.default_backend()} ({jax.devices()[0].device_kind})"


def compare(name: str, cell: dict, sides: dict, rounds: int) -> dict:
    times = {side: [] for side in sides}
    try:
        for r in range(rounds):
            for side, timer in sides.items():
                times[side].append(timer.round() if isinstance(timer, Original) else timer())
            print(
                f"{name} round {r + 1}: " + "  ".join(f"{k} {v[-1]:.1f}" for k, v in times.items()) + " ms/step",
                flush=True,
            )
    finally:
        for timer in sides.values():
            if isinstance(timer, Original):
                timer.close()
    median = {side: statistics.median(v) for side, v in times.items()}
    originals = {side: timer.meta for side, timer in sides.items() if isinstance(timer, Original)}
    result = {
        "cell": cell,
        "rounds": rounds,
        "ms_per_step": times,
        "median_ms_per_step": median,
        "speed_up_over": {side: median[side] / median["ours"] for side in sides if side != "ours"},
        "originals": originals,
        "machine": platform.processor() or platform.machine(),
        "ours": f"float32 unless the side's name says otherwise, JAX on {_backend()}",
    }
    atomic_write_json(OUT / f"{name}.json", result)
    print(
        f"{name}: median ms/step "
        + ", ".join(f"{k} {v:.1f}" for k, v in median.items())
        + "; ours faster than "
        + ", ".join(f"{k} {v:.2f}x" for k, v in result["speed_up_over"].items())
        + f" -> {(OUT / f'{name}.json').relative_to(ROOT)}",
        flush=True,
    )
    return result


def main(argv=None) -> int:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--torch-python", required=True, help="the scratch environment's python (with torch)")
    parser.add_argument("--limits-of-icl", type=Path, help="a checkout of the mechanisms paper's repository")
    parser.add_argument("--miniseq", type=Path, help="a checkout of the ICL benchmark's repository (miniseq)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per cell (default 7)")
    parser.add_argument("--steps", type=int, default=100, help="steps per round at the mechanisms cell (default 100)")
    parser.add_argument("--icl-steps", type=int, default=4, help="steps per round at the ICL cell (default 4)")
    parser.add_argument(
        "--paper-cell",
        action="store_true",
        help="also the paper cell (12 x 256, d 20, 41 points; a GPU comparison) with --limits-of-icl",
    )
    parser.add_argument("--paper-steps", type=int, default=50, help="steps per round at the paper cell (default 50)")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the original's step runs (cuda: as its train.py on a GPU)",
    )
    parser.add_argument("--tf32", action="store_true", help="the original with TF32 matrix passes allowed (cuda)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return run(args)
    except UsageError as err:
        return fail(PROG, err)


def run(args) -> int:
    if args.limits_of_icl is None and args.miniseq is None:
        raise UsageError("nothing to compare; accepted: --limits-of-icl CHECKOUT and/or --miniseq CHECKOUT")
    for flag, path, inside in (
        ("--limits-of-icl", args.limits_of_icl, "src/wrapper_model.py"),
        ("--miniseq", args.miniseq, "examples/icl_benchmark/model.py"),
    ):
        if path is not None and not (path / inside).is_file():
            raise UsageError(f"{flag}={str(path)!r} has no {inside}; accepted: a checkout of that repository")
    if not Path(args.torch_python).is_file():
        raise UsageError(f"--torch-python={args.torch_python!r} is not a file; accepted: a Python with torch installed")
    if args.paper_cell and args.limits_of_icl is None:
        raise UsageError("--paper-cell needs --limits-of-icl CHECKOUT; accepted: both")
    for flag, value in (
        ("--rounds", args.rounds),
        ("--steps", args.steps),
        ("--icl-steps", args.icl_steps),
        ("--paper-steps", args.paper_steps),
    ):
        if value < 1:
            raise UsageError(f"{flag}={value} is not accepted; accepted: an integer >= 1")
    if dry_run(PROG, f"time {args.rounds} interleaved rounds per cell"):
        return 0
    if args.limits_of_icl is not None:
        compare("limits_of_icl", *mechanisms_sides(args), args.rounds)
    if args.paper_cell:
        compare("limits_of_icl_paper_cell", *paper_cell_sides(args), args.rounds)
    if args.miniseq is not None:
        compare("miniseq", *icl_sides(args), args.rounds)
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
