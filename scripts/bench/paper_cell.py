"""The paper cell's training step (limits_of_icl / Garg et al.'s model: GPT-2, 12 layers, width
256, 8 heads, d = 20, 41 points = 82 tokens, batch 64; 9.5 M parameters) in each setting of how a
step computes: ms per run-step after compilation (median of interleaved rounds of one compiled
chunk), the FLOPs of a step counted by hand, and the fraction of this device's measured bfloat16
matrix rate that makes. Part of `make bench` on a GPU (on a CPU a step takes seconds: `--tiny`).

    python -m scripts.bench.paper_cell                       # every setting, one line each
    python -m scripts.bench.paper_cell --variants float32,bfloat16_fused_flat
    python -m scripts.bench.paper_cell --profile float32,bfloat16_fused_flat --json out.json

Settings (train.precision, model.attention_kernel, train.flat_update; `_xS`: S runs trained
together as one program, src/together.py, timed per run-step). `--profile` traces one chunk of
each named setting with JAX's profiler and sums the device's kernel time by the part of the
model or the step each kernel's name stack names (docs/workbench.md, "Where a paper-cell step
goes").

FLOPs by hand (XLA's cost analysis on a GPU leaves out the library's matrix products):
scripts.paper_scale.step_work, 6 x (12 D² L matrix-product parameters, and the read-out) x (tokens),
plus attention's two [T, T] products, 12 x L x B x T² x D for forward and backward (the full
square, as the masked products compute it).
"""

from __future__ import annotations

import concurrent.futures
import glob
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace

import jax
import jax.numpy as jnp

from scripts.paper_scale import step_work
from src.flags import OneLineParser, UsageError, add_both_spellings, dry_run, summary
from src.device_rate import median_seconds
from src.loop import chunk_timer

PROG = "python -m scripts.bench.paper_cell"
CONFIG = "configs/paper/mechanisms.yaml"
# name -> (train overrides, model overrides, runs together)
VARIANTS = {
    "float32": ({}, {}, 1),
    "float32_flat": ({"flat_update": True}, {}, 1),
    "tf32": ({"precision": "tf32"}, {}, 1),
    "tf32_fused_flat": ({"precision": "tf32", "flat_update": True}, {"attention_kernel": "fused"}, 1),
    "bfloat16": ({"precision": "bfloat16"}, {}, 1),
    "bfloat16_fused": ({"precision": "bfloat16"}, {"attention_kernel": "fused"}, 1),
    "bfloat16_fused_flat": ({"precision": "bfloat16", "flat_update": True}, {"attention_kernel": "fused"}, 1),
    "bfloat16_fused_flat_b256": (
        {"precision": "bfloat16", "flat_update": True, "batch_size": 256},
        {"attention_kernel": "fused"},
        1,
    ),
    "tf32_fused_flat_x8": ({"precision": "tf32", "flat_update": True}, {"attention_kernel": "fused"}, 8),
    "bfloat16_fused_flat_x8": ({"precision": "bfloat16", "flat_update": True}, {"attention_kernel": "fused"}, 8),
}
# the part of a step a kernel belongs to, from its name stack (op_name) first, then its name
PARTS = [
    ("sampler", r"_normal|_uniform|threefry|random"),
    ("attention", r"seq_mixer|dot_product_attention|softmax|fmha|flash|cudnn"),
    ("MLP", r"/up/|/down/|gelu|state_mixer"),
    ("norms", r"norm_seq|norm_state|norm_final"),
    ("read-in/out", r"read_in|read_out|interleave"),
    ("model, other (residuals, positions)", r"gpt2"),
    ("optimizer update, clipping, loss", r"\S"),
]  # any other name stack: outside the model
KERNEL_PARTS = [
    ("matrix products (no name stack)", r"gemm|cublas|cutlass|wgmma|sm90|xmma|nvjet|dot"),
    ("layout copies (no name stack)", r"copy|transpose|memcpy|concatenate"),
]


def paper_settings(tiny: bool = False):
    """The paper cell: configs/paper/mechanisms.yaml at the curriculum's end (d = 20, 41 points)."""
    from src.formats.limits_of_icl import read_config

    settings, _ = read_config(CONFIG)
    c = settings.curriculum
    curriculum = replace(c, dims=replace(c.dims, start=c.dims.end), points=replace(c.points, start=c.points.end))
    settings = replace(settings, curriculum=curriculum, train=replace(settings.train, eval_size=64))
    if tiny:
        settings = replace(settings, model=replace(settings.model, width=16, n_layer=2, n_head=2))
    return settings.validate()


def variant_settings(base, name: str):
    train, model, _ = VARIANTS[name]
    return replace(base, train=replace(base.train, **train), model=replace(base.model, **model)).validate()


def bf16_rate(size: int = 8192, repeats: int = 10) -> float:
    """FLOP/s of a [size, size] @ [size, size] bfloat16 product on random data (median)."""
    a = jax.random.normal(jax.random.key(0), (size, size), jnp.bfloat16)
    b = jax.random.normal(jax.random.key(1), (size, size), jnp.bfloat16)
    return 2.0 * size**3 / median_seconds(jax.jit(lambda a, b: a @ b), (a, b), repeats, warmups=3)


def make_trainer(settings, runs: int):
    from src.systems import build

    if runs == 1:
        return build(settings)
    from src.together import Together

    return Together([build(replace(settings, train=replace(settings.train, seed=s)).validate()) for s in range(runs)])


class Timed:
    """One setting: its trainer's chunk of `chunk_steps` compiled (`warm`, src.loop.chunk_timer),
    then timed in rounds."""

    def __init__(self, name: str, settings, chunk_steps: int):
        self.name, self.settings, self.chunk_steps = name, settings, chunk_steps
        self.runs = VARIANTS[name][2]
        self.trainer = make_trainer(settings, self.runs)
        self.rounds: list[float] = []
        self.compile_s = 0.0

    def warm(self) -> None:
        begin = time.perf_counter()
        self.timer = chunk_timer(self.trainer, self.chunk_steps)
        self.compile_s = time.perf_counter() - begin

    def one_round(self) -> float:
        """ms per run-step of one more chunk."""
        self.rounds.append(self.timer() / self.runs)
        return self.rounds[-1]


def _stat_text(event) -> str:
    try:
        return " ".join(f"{k}={v}" for k, v in dict(event.stats).items())
    except Exception:  # the profile's stats differ across jaxlib versions
        return ""


def _op_name(names: dict[str, str], event) -> str:
    """An event's name stack: by its hlo_op stat, else its own name (a kernel's name is its fusion's,
    '.' written '_')."""
    try:
        stats = dict(event.stats)
    except Exception:
        stats = {}
    for key in (str(stats.get("hlo_op", "")), event.name, re.sub(r"_(\d+)$", r".\1", event.name)):
        if key in names:
            return names[key]
    return str(stats.get("tf_op", ""))


def part_of(op_name: str, kernel: str) -> str:
    """The part of the step a kernel belongs to (PARTS by its name stack, else KERNEL_PARTS by its
    name and stats). A library call inside an XLA command buffer (cuBLAS, nvjet) carries the
    module's name alone ("XlaModule:"), no name stack: on 2026-11-27's H200 trace those matrix
    products were counted as the optimizer's before this rule."""
    stack = op_name if "/" in op_name else ""
    for part, pattern in PARTS if stack else KERNEL_PARTS:
        if re.search(pattern, stack or kernel, re.IGNORECASE):
            return part
    return "other (no name stack)"


def op_names(timed: Timed) -> dict[str, str]:
    """HLO instruction name -> its op_name metadata (the JAX name stack) in the compiled chunk of a
    single run; {} where it cannot be read."""
    trainer = timed.trainer
    if timed.runs != 1:
        return {}
    try:
        state = trainer.init_state()
        text = (
            trainer.jitted_chunk.lower(state.params, state.opt_state, trainer.seed_input, 0, timed.chunk_steps)
            .compile()
            .as_text()
        )
    except Exception:
        return {}
    return dict(re.findall(r'%?([\w.\-]+) = [^\n]*?op_name="([^"]+)"', text))


def profile(
    timed: Timed, top: int = 40, plane_pattern: str = r"^/device:GPU", line_pattern: str = r"stream|^XLA Ops$"
) -> dict:
    """Device time of one traced chunk by part of the step, and the costliest kernels."""
    from jax.profiler import ProfileData

    names = op_names(timed)
    folder = tempfile.mkdtemp(prefix="paper_cell_trace_")
    try:
        jax.profiler.start_trace(folder)
        timed.one_round()
        jax.profiler.stop_trace()
        files = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
        data = ProfileData.from_file(files[-1])
        kernels: dict[str, dict] = {}
        lines_seen = {}
        for plane in data.planes:
            if not re.search(plane_pattern, plane.name):
                continue
            for line in plane.lines:
                events = list(line.events)
                lines_seen[f"{plane.name} | {line.name}"] = len(events)
                if not re.search(line_pattern, line.name, re.IGNORECASE):
                    continue
                for event in events:
                    key = f"{line.name} | {event.name}"
                    record = kernels.setdefault(
                        key,
                        {
                            "line": line.name,
                            "name": event.name,
                            "count": 0,
                            "ns": 0.0,
                            "stats": _stat_text(event)[:400],
                            "op_name": _op_name(names, event),
                        },
                    )
                    record["count"] += 1
                    record["ns"] += float(event.duration_ns)
        steps = timed.chunk_steps
        by_line: dict[str, dict[str, float]] = {}
        for record in kernels.values():
            part = part_of(record["op_name"], record["name"] + " " + record["stats"])
            record["part"] = part
            line = by_line.setdefault(record["line"], {})
            line[part] = line.get(part, 0.0) + record["ns"] / steps / 1e6 / timed.runs
        costly = sorted(kernels.values(), key=lambda r: -r["ns"])[:top]
        for record in costly:
            record["ms_per_run_step"] = record.pop("ns") / steps / 1e6 / timed.runs
        return {
            "lines": lines_seen,
            "ms_per_run_step_by_line_and_part": by_line,
            "costliest": costly,
            "kernels": len(kernels),
            "op_names": len(names),
            "launches_per_step": sum(r["count"] for r in kernels.values()) / steps,
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def time_settings(names: list[str], base, chunk_steps: int, rounds: int, rate: float, out: dict, save) -> dict:
    """Every setting in `names` compiled at once, then timed in turn for `rounds` rounds of
    `chunk_steps` steps; each one's record (or the error it raised) into out["variants"], saved
    as it comes. Returns the settings that ran, by name."""
    timed: dict[str, Timed] = {}
    for name in names:
        try:
            timed[name] = Timed(name, variant_settings(base, name), chunk_steps)
        except Exception as err:  # a setting this device refuses: recorded, the rest go on
            out["variants"][name] = {"error": f"{type(err).__name__}: {err}"[:500]}
    # compile every setting at once (XLA compiles outside the GIL), then time them in turn
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(timed))) as pool:
        futures = {pool.submit(t.warm): name for name, t in timed.items()}
        for future in concurrent.futures.as_completed(futures):
            name = futures[future]
            if future.exception() is not None:
                err = future.exception()
                out["variants"][name] = {"error": f"{type(err).__name__}: {err}"[:500]}
                timed.pop(name)
    save()
    for _ in range(rounds):
        for t in timed.values():
            t.one_round()
    for name, t in timed.items():
        ms, work = statistics.median(t.rounds), step_work(t.settings)
        out["variants"][name] = {
            "ms_per_run_step": ms,
            "rounds_ms": t.rounds,
            "runs_together": t.runs,
            "batch_size": t.settings.train.batch_size,
            "tflop_per_step": work / 1e12,
            "compile_s": round(t.compile_s, 1),
            "tflops": work / (ms / 1000) / 1e12,
            "of_bf16_rate": work / (ms / 1000) / rate,
        }
        print(
            f"{name:26} {ms:8.2f} ms/run-step  {work / (ms / 1000) / 1e12:6.1f} TFLOP/s "
            f"({work / (ms / 1000) / rate:5.1%} of bf16)  compiled in {t.compile_s:.0f}s",
            flush=True,
        )
    save()
    return timed


def flags() -> OneLineParser:
    parser = OneLineParser(prog=PROG, description=summary(__doc__))
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma list of settings")
    parser.add_argument("--profile", default="", help="comma list of settings to trace (GPU)")
    parser.add_argument("--json", default=None, help="write the results here as well")
    parser.add_argument("--rounds", type=int, default=3)
    add_both_spellings(parser, "--chunk-steps", type=int, default=50)
    parser.add_argument("--tiny", action="store_true", help="a tiny model (a CPU check, seconds)")
    add_both_spellings(
        parser,
        "--gpu-only",
        action="store_true",
        help="say so and stop where JAX finds no GPU (make bench)",
    )
    return parser


def main(argv=None) -> int:
    args = flags().parse_args(list(sys.argv[1:] if argv is None else argv))
    names = [n for n in args.variants.split(",") if n]
    traced = [n for n in args.profile.split(",") if n]
    for name in names + traced:
        if name not in VARIANTS:
            raise UsageError(f"--variants: {name!r} is unknown; accepted: {', '.join(VARIANTS)}")
    if args.rounds < 1 or args.chunk_steps < 1:
        raise UsageError(f"--rounds={args.rounds}, --chunk-steps={args.chunk_steps}: accepted: integers >= 1")
    if dry_run(PROG, f"time {', '.join(names)} at the paper cell"):
        return 0
    if args.gpu_only and jax.default_backend() != "gpu":
        print(
            f"the paper cell (12 x 256, d 20, 41 points): not timed on {jax.default_backend()} (a step takes "
            "seconds there; a GPU benchmark, docs/workbench.md)"
        )
        return 0
    base = paper_settings(args.tiny)
    flops = step_work(base)
    out = {
        "device": str(jax.devices()[0].device_kind),
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "cell": "GPT-2 12 x 256, 8 heads, d 20, 41 points (82 tokens), batch 64" if not args.tiny else "tiny",
        "tflop_per_step": flops / 1e12,
        "variants": {},
    }

    def save():
        if args.json:
            with open(args.json + ".tmp", "w") as f:
                json.dump(out, f, indent=1, default=str)
            os.replace(args.json + ".tmp", args.json)

    rate = bf16_rate(512 if args.tiny else 8192)
    out["bf16_tflops"] = rate / 1e12
    print(
        f"bfloat16 matrix rate here: {rate / 1e12:.0f} TFLOP/s; a step {flops / 1e12:.3f} TFLOP "
        f"(floor {1000 * flops / rate:.2f} ms)",
        flush=True,
    )
    save()
    timed = time_settings(names, base, args.chunk_steps, args.rounds, rate, out, save)
    for name in traced:
        if name in timed:
            try:
                out["variants"][name]["profile"] = profile(timed[name])
            except Exception as err:
                out["variants"][name]["profile"] = {"error": f"{type(err).__name__}: {err}"[:500]}
            save()
    return 0


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
