"""The stress tests of the workbench on a `gpt2`-family regression run (limits_of_icl's question:
which attention mechanism stays robust), all at evaluation time on the run's fixed eval tasks.


  clean_n{k}      error (squared error / d) at the prediction with k examples, k = d/2, d, 2d
  label_noise     error at the last point when round(0.25·(n−1)) context labels get + N(0, 0.5²)
  label_noise_clean_first / _noisy_first   the same with the noisy pairs placed last / first
  random_pairs    the same when round(0.2·(n−1)) context pairs are replaced by a fresh input and
                  an unrelated label ~ N(0, 1) (SPEC §7's noise modes, on the last point's context)
  order_random / order_easy2hard   the last point's context in uniform random order / sorted by
                  difficulty 1 − |cos(x_i, x_query)| (src/curricula.py's ordering keys)
  ood_alpha2      error at the last point with every input scaled by α = 2
  length_1.5x     error at the last of ceil(1.5·n) points when the position table allows it
                  (null, with the reason, when it does not)

    python -m analysis.robustness --run runs/<exp>

Writes analysis/robustness.json.
"""
from __future__ import annotations

import math
import sys
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from analysis.common import for_system, main_frame, register_analysis
from analysis.icl_curve import load_run, points_limit
from src import rundir as names
from src.curricula import num_corrupted, ordering_key
from src.rundir import RunDir
from src.tasks.regression import Tasks

JSON = names.ROBUSTNESS
STRESS_SEED = 7


def _last_point_error(model, params, state, xs, ys, dims) -> float:
    prediction = jax.jit(model.apply)(params, state, xs, ys)
    return float(jnp.mean((prediction[:, -1] - ys[:, -1]) ** 2) / dims)


def _corrupt(key, xs, ys, count: int, mode: str, sigma: float, placement: str = "mixed"):
    """Corrupt `count` context pairs (all but the last point) of every task: uniformly chosen
    (placement mixed), the first ones (noisy_first) or the last ones (clean_first)."""
    b, n, d = xs.shape
    k_pick, k_x, k_y = jax.random.split(key, 3)
    position = jnp.broadcast_to(jnp.arange(n - 1), (b, n - 1))
    rank = {"mixed": jnp.argsort(jnp.argsort(jax.random.uniform(k_pick, (b, n - 1)), -1), -1),
            "noisy_first": position, "clean_first": n - 2 - position}[placement]
    mask = jnp.concatenate([rank < count, jnp.zeros((b, 1), bool)], axis=1)
    if mode == "label_noise":
        return xs, jnp.where(mask, ys + sigma * jax.random.normal(k_y, ys.shape), ys)
    fresh_x = jnp.where(xs != 0, jax.random.normal(k_x, xs.shape), 0.0)   # inactive dims stay 0
    return (jnp.where(mask[..., None], fresh_x, xs),
            jnp.where(mask, sigma * jax.random.normal(k_y, ys.shape), ys))


def _reorder(key, xs, ys, ordering: str):
    """The context (all but the last point) sorted by `ordering` relative to the last point."""
    tasks = Tasks(xs[:, :-1], ys[:, :-1], xs[:, -1], ys[:, -1], jnp.zeros_like(xs[:, -1]))
    perm = jnp.argsort(ordering_key(key, tasks, ordering), axis=-1)
    context_x = jnp.take_along_axis(xs[:, :-1], perm[..., None], axis=1)
    context_y = jnp.take_along_axis(ys[:, :-1], perm, axis=1)
    return (jnp.concatenate([context_x, xs[:, -1:]], 1), jnp.concatenate([context_y, ys[:, -1:]], 1))


def robustness(settings, model, params, state) -> dict:
    from src.systems.gpt2 import eval_batch
    batch = eval_batch(settings)
    xs, ys, dims = batch.xs, batch.ys, float(batch.dims)
    n, d = xs.shape[1], int(dims)
    key = jax.random.key(STRESS_SEED)
    prediction = jax.jit(model.apply)(params, state, xs, ys)
    per_point = np.asarray(jnp.mean((prediction - ys) ** 2, axis=0) / dims)
    out = {f"clean_n{k}": float(per_point[k]) if k < n else None
           for k in sorted({max(1, d // 2), d, 2 * d})}
    out["clean_last"] = float(per_point[-1])
    for name, mode, p, sigma in (("label_noise", "label_noise", 0.25, 0.5),
                                 ("random_pairs", "random_pairs", 0.2, 1.0)):
        cx, cy = _corrupt(jax.random.fold_in(key, len(name)), xs, ys, num_corrupted(p, n - 1), mode, sigma)
        out[name] = _last_point_error(model, params, state, cx, cy, dims)
    for placement in ("clean_first", "noisy_first"):   # SPEC §7's placements, label noise p 0.25
        cx, cy = _corrupt(jax.random.fold_in(key, 11), xs, ys, num_corrupted(0.25, n - 1),
                          "label_noise", 0.5, placement)
        out[f"label_noise_{placement}"] = _last_point_error(model, params, state, cx, cy, dims)
    for ordering in ("random", "easy2hard"):
        ox, oy = _reorder(jax.random.fold_in(key, 3), xs, ys, ordering)
        out[f"order_{ordering}"] = _last_point_error(model, params, state, ox, oy, dims)
    far = eval_batch(settings, alpha=2.0)
    out["ood_alpha2"] = _last_point_error(model, params, state, far.xs, far.ys, float(far.dims))
    longer = math.ceil(1.5 * n)
    limit = points_limit(settings)
    if limit is None or longer <= limit:
        long = eval_batch(settings, n_points=longer)
        out["length_1.5x"] = _last_point_error(model, params, state, long.xs, long.ys, float(long.dims))
        out["length_points"] = longer
    else:
        out["length_1.5x"] = None
        out["length_reason"] = (f"{longer} points exceed the learned position table "
                                f"(n_positions={settings.model.max_tokens // 2})")
    return out


def run(run_dir: RunDir) -> dict:
    settings, model, params, state = load_run(run_dir)
    record = robustness(settings, model, params, state)
    run_dir.write_json(JSON, record)
    return record


def _regression(settings) -> bool:
    """A regression task (the stresses add Gaussian label noise)."""
    from src.tasks.objectives import objective_of
    return objective_of(settings.task.name).continuous_labels


register_analysis("robustness", run, "noise, order, OOD and length stress tests (gpt2 family, "
                  "regression tasks)", for_system("gpt2", when=_regression), [JSON])


def _print_record(args, run_dir) -> None:
    for key, value in run(run_dir).items():
        print(f"{key:16s} {value:.4f}" if isinstance(value, float) else f"{key:16s} {value}")
    print(f"-> {run_dir.file(JSON)}")


def main(argv: Sequence[str] | None = None) -> int:
    return main_frame("analysis.robustness", __doc__, lambda parser: None,
                      _print_record, argv)


if __name__ == "__main__":
    from src.cli import guarded, summary

    sys.exit(guarded(main))
