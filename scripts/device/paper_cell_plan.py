"""The plan of the paper cell's device runs (scripts/device/paper_scale.py, scripts/device/gpu_job.py): the
training protocols and precision settings, and how many steps each run gets in the seconds left on a
device shared by every run, from the step times one H200 measured."""

from __future__ import annotations

from pathlib import Path

CONFIG = "configs/paper/mechanisms.yaml"
# protocol -> runners.train overrides (besides the steps, the curriculum's interval and the setting)
SWEEP = {
    "adam1e-4_b64": ["training.learning_rate=0.0001"],
    "adam3e-4_b64": ["training.learning_rate=0.0003"],
    "adam3e-4_b256": ["training.learning_rate=0.0003", "training.batch_size=256"],
    "adam1e-3_b256_warm": [
        "training.learning_rate=0.001",
        "training.batch_size=256",
        "training.warmup_fraction=0.05",
        "training.grad_clip=1.0",
    ],
}
SWEEP_MARGIN_S = 90  # the sweep's runs stop this long before the budget ends (compilation, evaluation)
# measured on one H200, 2026-11-27 (report/measurements/gpu_2026-11-27): four runs sharing the
# device each ran 4.6x (batch 64) and 5.1x (batch 256) slower than one alone, and compiled in ~60 s
SHARING_COST = 1.3  # a shared run's step time over (its time alone x the runs sharing)
COMPILE_S = 60.0  # seconds of each run's start before its first step
# each run's evaluation after training (a process of its own: 22 s to load on an H200, 2026-11-27,
# then one compilation; before its least squares moved to the host, four evaluations did not end
# in 130-180 s and one alone not in 35 s, so none of those runs has its shifts)
EVAL_S = 60.0
CURRICULUM_SHARE = 0.3  # the curriculum reaches d = 20, 41 points at this share of the steps
CURRICULUM_STEPS = 15  # its increments (dims 5 -> 20 by 1, points 11 -> 41 by 2)
SETTING_SETS = {
    "float32": [],
    "float32_flat": ["training.flat_update=true"],
    "tf32": ["training.precision=tf32"],
    "tf32_fused_flat": ["training.precision=tf32", "training.flat_update=true", "model.attention_kernel=fused"],
    "bfloat16": ["training.precision=bfloat16"],
    "bfloat16_fused": ["training.precision=bfloat16", "model.attention_kernel=fused"],
    "bfloat16_fused_flat": ["training.precision=bfloat16", "training.flat_update=true", "model.attention_kernel=fused"],
}


def fastest_setting(bench: dict) -> tuple[str, float, float | None]:
    """(setting, ms per step at batch 64, ms per step at batch 256 or None) of the fastest single
    run setting step 1 timed."""
    timed = {
        k: v["ms_per_run_step"]
        for k, v in bench.get("variants", {}).items()
        if "ms_per_run_step" in v and v.get("runs_together", 1) == 1 and k in SETTING_SETS
    }
    if not timed:
        return "float32", 13.0, None
    best = min(timed, key=timed.get)
    b256 = bench["variants"].get(best + "_b256", {}).get("ms_per_run_step")
    return best, timed[best], b256


def step_sets(steps: int, log_every: int, save_every: int) -> list[str]:
    """runners.train overrides for a run of `steps` steps, logged every `log_every` and saved every
    `save_every`, with the paper's curriculum compressed into its first CURRICULUM_SHARE."""
    interval = max(1, int(CURRICULUM_SHARE * steps / CURRICULUM_STEPS))
    return [
        f"training.train_steps={steps}",
        f"training.log_every={log_every}",
        f"training.save_every_steps={save_every}",
        f"training.curriculum.dims.interval={interval}",
        f"training.curriculum.points.interval={interval}",
    ]


def sweep_jobs(
    setting: str,
    ms64: float,
    ms256: float | None,
    seconds: float,
    runs_dir: Path,
    extra: tuple = (),
    table: str | None = None,
    fixed_steps: int | None = None,
    mechanisms: tuple = (),
) -> list:
    """The sweep's runs (softmax under every protocol), or the table's (`mechanisms`, default all,
    under the protocol `table`), each with the steps the time left allows on a shared device
    (SHARING_COST, COMPILE_S, EVAL_S, 20 % to spare), or fixed_steps."""
    from scripts.paper_mechanisms import MECHANISMS, train_command

    runs = (
        [(m, m, SWEEP[table]) for m in (mechanisms or MECHANISMS)]
        if table
        else [(n, "softmax_causal", s) for n, s in SWEEP.items()]
    )
    jobs = []
    share = len(runs)
    for name, mechanism, sets in runs:
        batch = 256 if "training.batch_size=256" in sets else 64
        ms = ms64 if batch == 64 else (ms256 or 4 * ms64)
        steps = fixed_steps or max(
            200, int(0.8 * (seconds - COMPILE_S - EVAL_S) * 1000 / (ms * share * SHARING_COST)) // 100 * 100
        )
        sets = [*sets, *SETTING_SETS[setting], *step_sets(steps, max(100, steps // 10 // 100 * 100), steps), *extra]
        jobs.append((name, train_command(CONFIG, mechanism, sets, runs_dir / name)))
    return jobs
