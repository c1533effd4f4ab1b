"""The task-diversity study (Raventós et al., NeurIPS 2023, at a CPU's scale): a transformer
pretrained on noisy linear regression whose task vectors come from a finite pool of M, for M from
2 up to fresh tasks every step, evaluated on prompts from its pool and from the Gaussian prior
beside the two Bayes estimators: dMMSE (the posterior mean over the pool) and ridge (the posterior
mean under the prior). Below some M the model should track dMMSE, above it ridge, also on tasks it
was never shown. `make task_diversity` runs it.

    python -m scripts.task_diversity             # configs/task_diversity.yaml, pools 2^1 .. 2^13 and fresh, 3 seeds
    python -m scripts.task_diversity --quick     # pools 2 and fresh, 60 steps, 1 seed (a smoke test)
    python -m scripts.task_diversity --pools 4,64,0   # any pool sizes (0: fresh tasks every step)
    python -m scripts.task_diversity --finite-size     # the finite-size test: 10x the steps, seed 0

Each run is configs/task_diversity.yaml (the workbench's own settings schema, src.jobs.study.read_settings)
with its train.num_tasks and seed, made by the job engine (finished runs are reused); the report is
report/TASK_DIVERSITY.md, report/task_diversity_results.json and
report/figures/task_diversity/error_pool.png (quick: under report/quick; plots/task_diversity_report.py).

--finite-size (`make task_diversity_finite`): pools 32 … 8,192 at 10× the steps, seed 0, a checkpoint
kept every tenth of them, each evaluated as the study evaluates a finished run: does the distance to
ridge rise with training (M below our model's threshold: the switch was a transient) or not? Report:
report/TASK_DIVERSITY_FINITE.md (plots/task_diversity_finite.py; about 3.5 h on 2 cores).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from analysis.common import pairs_of
from analysis.icl_curve import load_run
from baselines.bayes import dmmse, ridge
from plots import task_diversity_finite
from plots.task_diversity_report import RESULTS, write_report
from src.flags import UsageError, refuse_repeats, seed_list
from src.jobs.declared import Cell, CellJob, Study, StudyRun, cell_runs
from src.jobs.study import read_settings, run_as_command, study_command
from src.rundir import names
from src.tasks.pools import pooled, task_pool

CONFIG = "configs/task_diversity.yaml"
POOLS = (2, 8, 32, 128, 512, 2048, 8192, 0)  # 0: fresh tasks every step (an effectively infinite pool)
SEEDS = (0, 1, 2)
QUICK = {"steps": 60, "log_every": 30, "checkpoint_every": 60, "eval_size": 200}
QUICK_POOLS = (2, 0)
FINITE_POOLS = (32, 128, 512, 2048, 8192)
QUICK_FINITE = {"steps": 90, "log_every": 30, "checkpoint_every": 30, "keep_every": 30, "eval_size": 200}
EVAL_PROMPTS, POOL_EVAL_SEED = 1000, 29  # the prompts drawn from a run's own pool


def pool_sizes(text: str | None, quick: bool) -> tuple[int, ...]:
    """--pools: a comma list of integers >= 0 (UsageError, one line)."""
    if text is None:
        return QUICK_POOLS if quick else POOLS
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        sizes = ()
    if not sizes or any(size < 0 for size in sizes):
        raise UsageError(
            f"--pools={text!r} is not accepted; accepted: a comma list of integers >= 0 (0: fresh tasks every step)"
        )
    refuse_repeats("--pools", text, sizes)
    return sizes


def pool_cells(pools: Sequence[int], quick: bool, config: str = CONFIG, finite_size: bool = False) -> list[Cell]:
    """Cell pool<M> (poolfresh for M = 0) of the config with train.num_tasks = M; with `finite_size`,
    at STEPS_FACTOR × its steps keeping a checkpoint every 1/KEEP_FRACTION of them."""
    base = read_settings(config)
    changes = QUICK if quick else {}
    if finite_size:
        steps = base.train.steps * task_diversity_finite.STEPS_FACTOR
        every = steps // task_diversity_finite.KEEP_FRACTION
        changes = QUICK_FINITE if quick else {"steps": steps, "keep_every": every, "checkpoint_every": every}
    return [
        Cell(f"pool{size or 'fresh'}", replace(base, train=replace(base.train, num_tasks=size, **changes)))
        for size in pools
    ]


def make_jobs(
    runs_dir: Path,
    pools: Sequence[int],
    seeds: Sequence[int],
    quick: bool,
    config: str = CONFIG,
    finite_size: bool = False,
) -> list[CellJob]:
    """Run pool<M>_seed<s> of pool_cells x seeds."""
    return cell_runs(pool_cells(pools, quick, config, finite_size), seeds, runs_dir)


# The study's step: each finished run evaluated (the report only draws what this returns)


def evaluate(job, at_step: int | None = None) -> dict:
    """{prompts ("pool", "prior") -> {estimator -> error}} of one finished run: error, squared error / d
    averaged over the points, of the model, ridge (the prior's λ = σ²) and dMMSE (over the run's own
    pool), and distance_<estimator>, the model's squared difference / d from it; with `at_step`, of
    the checkpoint it kept at that step."""
    settings, model, params, state = load_run(job.run)
    if at_step is not None:
        params = params_at(job.run, params, at_step)
    tr, c = settings.train, settings.curriculum
    dims, points, noise = c.dims.end, c.points.end, settings.task.options.noise_std
    pairs = pairs_of(settings)
    sample = pairs.sampler()
    batches = {"prior": pairs.prompts()}
    pool = None
    if tr.num_tasks:
        pool = task_pool(sample, tr.seed, tr.num_tasks, dims, points)
        batches["pool"] = jax.jit(lambda key: pooled(sample, tr.seed, tr.num_tasks)(key, EVAL_PROMPTS, dims, points))(
            jax.random.key(POOL_EVAL_SEED)
        )
    out = {}
    for name, batch in batches.items():
        predict = pairs.predictor(model, params, state, points, batch.xs.shape[0])
        guesses = {"model": predict(batch), "ridge": ridge(batch, noise, 1.0)}
        if pool is not None:
            guesses["dmmse"] = dmmse(batch, pool, noise)
        guesses = {k: np.asarray(g) for k, g in guesses.items()}
        out[name] = {k: float(np.mean((g - np.asarray(batch.ys)) ** 2) / dims) for k, g in guesses.items()}
        out[name].update(
            {
                f"distance_{k}": float(np.mean((guesses["model"] - g) ** 2) / dims)
                for k, g in guesses.items()
                if k != "model"
            }
        )
    return out


def collect(jobs: Sequence) -> list[dict]:
    rows = []
    for job in jobs:
        if job.run.path.is_dir() and (job.run.path / names.PARAMS).exists():
            rows.append(
                {"run": job.name, "num_tasks": job.settings.train.num_tasks, "seed": job.seed, "errors": evaluate(job)}
            )
    return rows


def params_at(run, like, step: int):
    """The parameters of the checkpoint kept at `step` (checkpoint_<step>.npz), in the tree of `like`."""
    arrays = run.load_arrays(names.kept_checkpoint(step))
    leaves, treedef = jax.tree_util.tree_flatten(like)
    stored = [arrays.get(f"params/{i:04d}") for i in range(len(leaves))]
    if any(a is None or a.shape != leaf.shape for a, leaf in zip(stored, leaves)):
        raise run.corrupt(names.kept_checkpoint(step), "its parameters are not this model's")
    return jax.tree_util.tree_unflatten(treedef, [jnp.asarray(a) for a in stored])


def kept_steps(job) -> list[int]:
    every, total = job.settings.train.keep_every, job.settings.train.steps
    return (
        [s for s in range(every, total + 1, every) if (job.run.path / names.kept_checkpoint(s)).exists()]
        if every
        else []
    )


def curve(job) -> dict:
    """{step, distance_ridge, distance_dmmse, model, ridge, dmmse}: each a list over the kept
    checkpoints, on prompts from the prior."""
    out = {k: [] for k in ("step", "distance_ridge", "distance_dmmse", "model", "ridge", "dmmse")}
    for step in kept_steps(job):
        errors = evaluate(job, at_step=step)["prior"]
        out["step"].append(step)
        for key in ("distance_ridge", "distance_dmmse", "model", "ridge", "dmmse"):
            out[key].append(errors.get(key))
    return out


def finite_curves(jobs: Sequence) -> dict[int, dict]:
    """Pool size -> curve of its finished run (the finite-size test)."""
    return {j.settings.train.num_tasks: curve(j) for j in jobs if (j.run.path / names.PARAMS).exists()}


def study_switch(report_dir: Path) -> int | None:
    """The pool size from which the study's own runs track ridge (its recorded results), or None."""
    import json

    try:
        return json.loads((report_dir / RESULTS).read_text(encoding="utf-8")).get("threshold")
    except (OSError, ValueError, AttributeError):
        return None


def pools_of(flags) -> tuple[int, ...]:
    if flags.pools or not flags.finite_size:
        return pool_sizes(flags.pools, flags.quick)
    return FINITE_POOLS[:2] if flags.quick else FINITE_POOLS


def seeds_of(flags) -> Sequence[int]:
    return seed_list(flags.seeds) if flags.seeds else (SEEDS[:1] if flags.quick or flags.finite_size else SEEDS)


def add_flags(parser) -> None:
    parser.add_argument(
        "--pools",
        default=None,
        help=f"comma list of pool sizes, 0 for fresh tasks (default: {','.join(map(str, POOLS))})",
    )
    parser.add_argument("--seeds", default=None, help=f"comma list (default: {','.join(map(str, SEEDS))})")
    parser.add_argument(
        "--config",
        default=CONFIG,
        help=f"every run's settings file (default: {CONFIG}; "
        "configs/gpu/task_diversity_small.yaml is Raventós et al.'s small model at their protocol)",
    )
    parser.add_argument(
        "--finite-size",
        action="store_true",
        help=f"the finite-size test: pools {','.join(map(str, FINITE_POOLS))} at 10x the steps, seed 0",
    )


def report(run: StudyRun) -> list[Path]:
    """The study's step (each finished run evaluated), then its report; the finite-size test's
    (each kept checkpoint evaluated) with --finite-size."""
    if run.flags.finite_size:
        return task_diversity_finite.write_report(
            run, finite_curves(run.jobs), study_switch=study_switch(run.report_dir)
        )
    return write_report(run, collect(run.jobs))


STUDY = Study(
    "task_diversity",
    __doc__,
    "pools 2 and fresh, 60 steps, seed 0 (a smoke test)",
    cells=lambda flags, runs_dir: pool_cells(pools_of(flags), flags.quick, flags.config, flags.finite_size),
    report=report,
    seeds=seeds_of,
    flags=add_flags,
    check=pools_of,
    runs_name=lambda flags: "task_diversity_finite" if flags.finite_size else "task_diversity",
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
