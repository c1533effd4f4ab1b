"""The original's runs in the originals' comparison (scripts/originals_beside_ours.py, step 2):
which of limits_of_icl's attention types stands for each of our mechanisms (ORIGINALS), the
harness's command line at the study's cell and protocol (harness_argv, protocol_of), and one
training run through the harness, its JSON line kept and reused (run_one).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Callable, NamedTuple

from scripts.originals_beside_ours_prompts import CONFIG, ROOT
from src.files import atomic_write_json

HARNESS = ROOT / "scripts" / "originals" / "limits_of_icl_train.py"


class Original(NamedTuple):
    """How one of our mechanisms is asked of the original."""

    attention_type: str  # its name in nanogpt_model.ATTENTION_CLASSES
    attention_kwargs: Callable[[], dict]  # its attention_kwargs matching our mixer's options
    hours: float  # about how long a run takes here (the longest start first)


def favor_features() -> int:
    """The number of features of our study's FAVOR+ (scripts/mechanisms sets the mixer by name,
    with its default options: src/models/mixers/linear_attention.FavorOptions)."""
    from src.registry import choice

    return int(choice("seq_mixer", "favor").options.num_features)


# our mechanism -> the original's (the same names; FAVOR+'s number of features is its rf_dim, by
# default 2 x head size = 32 there, 64 here; its prefix sums over [B, H, T, m, K] take ~15x longer)
ORIGINALS = {
    "softmax_causal": Original("softmax_causal", dict, 0.1),
    "favor": Original("favor", lambda: {"rf_dim": favor_features()}, 1.5),
}
ORIGINAL_NAMES = {ours: original.attention_type for ours, original in ORIGINALS.items()}
# glibc keeps the large blocks FAVOR+'s [B, H, T, m, K] prefix sums need instead of mapping them
# afresh each step (about 25 % faster there); the arithmetic is unchanged
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824"}


def harness_argv(
    python: str, checkout: Path, settings, mechanism: str, seed: int, prompts: Path, steps: int | None = None
) -> list[str]:
    """The original's training at the cell and protocol of `settings` (configs/mechanisms.yaml)."""
    m, tr, c = settings.model, settings.train, settings.curriculum
    kwargs = ORIGINALS[mechanism].attention_kwargs()
    return [
        python,
        str(HARNESS),
        str(checkout),
        "--attention",
        ORIGINAL_NAMES[mechanism],
        "--attention-kwargs",
        json.dumps(kwargs, sort_keys=True),
        "--seed",
        str(seed),
        "--prompts",
        str(prompts),
        "--steps",
        str(steps or tr.steps),
        "--lr",
        repr(tr.learning_rate),
        "--warmup-fraction",
        repr(tr.warmup_fraction),
        "--grad-clip",
        repr(tr.grad_clip),
        "--batch",
        str(tr.batch_size),
        "--width",
        str(m.width),
        "--layers",
        str(m.n_layer),
        "--heads",
        str(m.n_head),
        "--dims",
        str(c.dims.end),
        "--points",
        str(c.points.end),
        "--n-positions",
        str(m.max_tokens // 2),
        "--threads",
        "1",
    ]


def protocol_of(settings) -> dict:
    m, tr, c = settings.model, settings.train, settings.curriculum
    return {
        "config": str(CONFIG.relative_to(ROOT)),
        "width": m.width,
        "layers": m.n_layer,
        "heads": m.n_head,
        "dims": c.dims.end,
        "points": c.points.end,
        "position_table_tokens": m.max_tokens,
        "batch_size": tr.batch_size,
        "steps": tr.steps,
        "learning_rate": tr.learning_rate,
        "schedule": f"linear warm-up over ceil({tr.warmup_fraction} x steps) updates from 0, then linear "
        "decay to 0 (optax join_schedules here; torch LambdaLR there)",
        "optimizer": f"Adam (b1 0.9, b2 0.999, eps 1e-8, no weight decay) after global-norm clipping at {tr.grad_clip}",
        "curriculum": "none (the full task from step 0)",
        "eval": f"{tr.eval_size} prompts from eval_seed {tr.eval_seed}; squared error / d per position, "
        "mean over prompts",
    }


def run_one(argv: list[str], record: Path, log: Path, prompts_sha: str, rerun: bool) -> dict:
    """The harness's JSON line for `argv` (kept in `record`; reused when the command and the
    prompts' digest match, unless `rerun`)."""
    key = {"argv": argv[1:], "prompts_sha256": prompts_sha}
    if record.is_file() and not rerun:
        kept = json.loads(record.read_text())
        if kept.get("key") == key:
            print(f"{record.name}: reused", flush=True)
            return kept["result"]
    print(f"{record.stem}: training ({' '.join(shlex.quote(a) for a in argv[1:4])} ...)", flush=True)
    with open(log, "a") as err:
        done = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, **MALLOC_ENV, "OMP_NUM_THREADS": "1"},
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (log.read_text().strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(
            f"{record.stem}: the original's training failed (exit {done.returncode}): {tail}; log: {log}"
        )
    result = json.loads(lines[-1])
    atomic_write_json(record, {"key": key, "result": result})
    print(
        f"{record.stem}: error at n = {len(result['curve']) - 1}: {result['error_last']:.4f} "
        f"({result['seconds']:.0f} s)",
        flush=True,
    )
    return result
