"""The stress tests of the workbench on a regression run that predicts pairs
(gpt2; lm on its pair tasks) (limits_of_icl's question:
which attention mechanism stays robust), all at evaluation time on the run's fixed eval tasks.


  clean_n{k}      error (squared error / d) at the prediction with k examples, k = d/2, d, 2d
  label_noise     error at the last point when round(0.25·(n−1)) context labels get + N(0, 0.5²)
  label_noise_clean_first / _noisy_first   the same with the noisy pairs placed last / first
  random_pairs    the same when round(0.2·(n−1)) context pairs are replaced by a fresh input and
                  an unrelated label ~ N(0, 1) (SPEC §7's noise modes, on the last point's context)
  order_random / order_easy2hard   the last point's context in uniform random order / sorted by
                  difficulty 1 − |cos(x_i, x_query)| (src/gd_paper/curricula.py's ordering keys)
  ood_alpha2      error at the last point with every input scaled by α = 2
  length_1.5x     error at the last of ceil(1.5·n) points when the position table allows it
                  (null, with the reason, when it does not)

    python -m analysis.robustness --run runs/<exp>
    python -m analysis.robustness --run runs/<exp> --battery

Writes analysis/robustness.json (every run of the family gets it at the end of training; where
the nine passes over every eval task would exceed the analysis budget, analysis/budget.py, the
first tasks that fit, recorded as `tasks`, `eval_tasks` and `budget`; `--full`: all). With
--battery, also every registered evaluation shift (src/tasks/shifts.py) over the grids of
limits_of_icl's notebook and Garg et al.'s evaluation (battery_grid), each on 1,000 fixed tasks
at the trained shape, for the model and the least-squares, averaging, 3-NN and (sparse tasks)
Lasso baselines on the same shifted tasks: analysis/shifts.json. Input shifts need a task whose
labels are x·w (checked on the run's own eval tasks); otherwise they are null, with the reason.
The battery needs only the prediction at the last point, so it also runs on the paper's models
(system lsa, on the pair form of their eval tasks) and on the ICL benchmark's models trained on a
pair task (system lm): `--battery` alone there, the stress tests need every point's prediction;
any run that answers pair prompts (src/read_side.py).
"""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

from analysis.budget import budget, full_flag, report_cut, tasks_within
from analysis.common import (
    analysis_command,
    for_capability,
    pairs_of,
    register_analysis,
    regression_task,
    settings_with,
)
from analysis.icl_curve import baseline_rows, load_run, points_limit
from src import rundir as names
from src.gd_paper.config import CurriculumConfig
from src.gd_paper.curricula import corrupt_pairs, num_corrupted, order
from src.batched import in_blocks
from src.read_side import AnswersPairPrompts, PredictsPairs, has, read_side
from src.rundir import RunDir
from src.tasks.shifts import shifted_prompts

JSON = names.ROBUSTNESS
STRESS_SEED = 7


def _last_point_error(predict, prompt, dims: float) -> float:
    prediction = predict(prompt)
    return float(jnp.mean((prediction[:, -1] - prompt.ys[:, -1]) ** 2) / dims)


def _reorder(key, prompt, ordering: str):
    """The context (all but the last point) sorted by `ordering` relative to the last point."""
    return order(key, prompt, jnp.zeros(prompt.context_y.shape, bool), CurriculumConfig(ordering=ordering)).tasks


def robustness(settings, model, params, state) -> dict:
    pairs = pairs_of(settings)
    n, eval_size = pairs.trained_shape()[0], settings.train.eval_size
    longer, limit = math.ceil(1.5 * n), points_limit(settings)
    lengthened = limit is None or longer <= limit
    # eight passes over the tasks at the trained length and one at 1.5x (analysis/budget.py)
    tasks = tasks_within(
        eval_size, 8 * pairs.prompt_work(n) + (pairs.prompt_work(longer) if lengthened else 0), budget(pairs)
    )
    cut = report_cut("robustness", tasks, eval_size)
    batch = pairs.prompts().first(tasks)
    xs, ys, dims = batch.xs, batch.ys, float(batch.dims)
    corrupted = lambda pair: batch._replace(xs=pair[0], ys=pair[1])
    d = int(dims)
    key = jax.random.key(STRESS_SEED)
    predict = pairs.predictor(model, params, state)  # in blocks of prompts (src/batched.py)
    prediction = predict(batch)
    per_point = np.asarray(jnp.mean((prediction - ys) ** 2, axis=0) / dims)
    out = {f"clean_n{k}": float(per_point[k]) if k < n else None for k in sorted({max(1, d // 2), d, 2 * d})}
    out["clean_last"] = float(per_point[-1])
    for name, mode, p, sigma in (("label_noise", "label_noise", 0.25, 0.5), ("random_pairs", "random_pairs", 0.2, 1.0)):
        noisy = corrupt_pairs(
            jax.random.fold_in(key, len(name)), xs, ys, num_corrupted(p, n - 1), mode, sigma, context=n - 1
        )
        out[name] = _last_point_error(predict, corrupted(noisy), dims)
    for placement, pick in (("clean_first", "last"), ("noisy_first", "first")):  # SPEC §7's placements
        noisy = corrupt_pairs(
            jax.random.fold_in(key, 11),
            xs,
            ys,
            num_corrupted(0.25, n - 1),
            "label_noise",
            0.5,
            pick=pick,
            context=n - 1,
        )
        out[f"label_noise_{placement}"] = _last_point_error(predict, corrupted(noisy), dims)
    for ordering in ("random", "easy2hard"):
        out[f"order_{ordering}"] = _last_point_error(
            predict, _reorder(jax.random.fold_in(key, 3), batch, ordering), dims
        )
    far = pairs.prompts(alpha=2.0).first(tasks)
    out["ood_alpha2"] = _last_point_error(predict, far, float(far.dims))
    if lengthened:
        long = pairs.prompts(longer).first(tasks)
        out["length_1.5x"] = _last_point_error(pairs.predictor(model, params, state, longer), long, float(long.dims))
        out["length_points"] = longer
    else:
        out["length_1.5x"] = None
        out["length_reason"] = (
            f"{longer} points exceed the learned position table (n_positions={settings.model.max_tokens // 2})"
        )
    if cut:
        out.update(tasks=tasks, eval_tasks=eval_size, budget=cut)
    return out


BATTERY_SIZE, BATTERY_SEED = 1000, 11


def _grid(start: float, stop: float, step: float) -> list[float]:
    return [round(start + step * i, 6) for i in range(int(round((stop - start) / step)) + 1)]


def battery_grid(n: int, d: int) -> list[tuple[str, str, dict]]:
    """(label, shift, options) of every evaluation at n points of dimension d: limits_of_icl's
    notebook grids (query scales 0.1..4.9, flips 1..d−1, …) and Garg et al.'s shifts."""
    grid = [("standard", "scale_x", {"scale": 1.0})]
    grid += [(f"scaled_query={s:g}", "scaled_query", {"scale": s}) for s in _grid(0.1, 4.9, 0.2)]
    grid += [(f"opposite_quadrants={k}", "opposite_quadrants", {"num_flipped": k}) for k in range(1, d)]
    grid += [("opposite_quadrants=original", "opposite_quadrants", {"query_orthant": "random"})]
    grid += [(f"random_quadrants={k}", "random_quadrants", {"num_constrained": k}) for k in range(1, n, 2)]
    grid += [(f"orthogonal_query={k}", "orthogonal_query", {"num_orthogonal": k}) for k in range(1, min(n, d))]
    grid += [("orthogonal_subspaces", "orthogonal_subspaces", {}), ("overlapping_query", "overlapping_query", {})]
    grid += [(f"subspace={k}", "subspace", {"num_dim": k}) for k in range(d)]
    grid += [(f"skewed={e:g}", "skewed", {"exponent": e}) for e in _grid(0.1, 2.9, 0.2)]
    grid += [(f"scale_x={s:.3g}", "scale_x", {"scale": s}) for s in (1 / 3, 1 / 2, 2.0, 3.0)]
    grid += [(f"noisy_labels={s:g}", "noisy_labels", {"noise_std": s}) for s in _grid(0.1, 4.9, 0.2)]
    grid += [(f"affine={s:g}", "affine", {"bias_std": s}) for s in _grid(0.1, 4.9, 0.2)]
    grid += [(f"sparse={k}", "sparse", {"sparsity": k}) for k in range(1, d)]
    grid += [
        ("uniform_w", "uniform_w", {}),
        *[(f"scale_y={s:.3g}", "scale_y", {"scale": s}) for s in (1 / 3, 1 / 2, 2.0, 3.0)],
    ]
    return grid


def _last_errors(predict, prompt, dims: float) -> float:
    return float(jnp.mean((predict(prompt)[:, -1] - prompt.ys[:, -1]) ** 2) / dims)


def _query_errors(predict_query, prompt, dims: float) -> float:
    return float(jnp.mean((predict_query(prompt) - prompt.ys[:, -1]) ** 2) / dims)


BATTERY_BASELINES = ("least_squares", "averaging", "knn", "lasso")  # each where its entry applies


def battery(side: AnswersPairPrompts, restored: tuple, size: int = BATTERY_SIZE, labels=None) -> dict:
    """{label: {shift, options, task, model, <baseline>...}} (squared error / d at the last point,
    mean over `size` tasks) for every point of battery_grid (or those of `labels`), of the run
    whose read side is `side` (any system that answers pair prompts: src/read_side.py) and whose
    restored model is `restored`; the baselines of BATTERY_BASELINES that apply to the shifted
    prompts' task."""
    from src.registry import choice, registry

    base = side.pair_prompts().first(size)
    xs, ys, w, dims = base.xs, base.ys, base.w, float(base.dims)
    n, d = xs.shape[1], xs.shape[2]
    scale = side.label_scale()
    linear = bool(jnp.max(jnp.abs(ys - scale * jnp.einsum("bnd,bd->bn", xs, w))) < 1e-3)
    model_predict = side.query_predictor(restored, n, xs.shape[0])
    baselines = {name: registry("baseline").get(name) for name in BATTERY_BASELINES}
    rows = baseline_rows(n, d, xs.shape[0])  # in blocks of tasks (src/batched.py)
    compiled = {
        name: in_blocks(jax.jit(entry.build(entry.default_options())), rows) for name, entry in baselines.items()
    }
    out = {}
    for i, (label, name, options) in enumerate(battery_grid(n, d)):
        if labels is not None and label not in labels:
            continue
        key = jax.random.fold_in(jax.random.key(BATTERY_SEED), i)
        shift = registry("shift").get(name).build(choice("shift", name, **options).options)
        task = shift.task[0] if shift.task is not None else side.task_name()
        record = {"shift": name, "options": options, "task": task}
        if shift.task is not None:
            draw = registry("task").get(task).build(choice("task", task, **shift.task[1]).options, n_points=n, n_dims=d)
            shifted = draw(key, size, d, n)
        elif not linear:
            out[label] = {**record, "model": None, "reason": f"task {task!r} is not y = x·w"}
            continue
        else:
            shifted = shifted_prompts(shift, key, base, scale)
        record["model"] = _query_errors(model_predict, shifted, dims)
        for who, entry in baselines.items():
            if entry.is_applicable(task):
                record[who] = _last_errors(compiled[who], shifted, dims)
        out[label] = record
    return out


def run(run_dir: RunDir, settings=None) -> dict:
    """Write the stress tests; `settings`: the run's, when the caller has read them already."""
    if settings is None:
        settings, model, params, state = load_run(run_dir)
    else:
        model, params, state = pairs_of(settings).restore(run_dir)
    record = robustness(settings, model, params, state)
    run_dir.write_json(JSON, record)
    return record


register_analysis(
    "robustness",
    run,
    "noise, order, OOD and length stress tests (runs that predict pairs, regression tasks)",
    for_capability(PredictsPairs, when=regression_task),
    [JSON],
    files=[JSON, names.SHIFTS_JSON],
)  # shifts.json: with --battery


def run_battery(run_dir: RunDir, size: int = BATTERY_SIZE, labels=None, settings=None) -> dict:
    side = read_side(AnswersPairPrompts, settings or settings_with(run_dir, AnswersPairPrompts))
    record = battery(side, side.restore(run_dir), size, labels)
    run_dir.write_json(names.SHIFTS_JSON, record)
    return record


def _print_record(args, run_dir) -> None:
    # the stress tests read every point's prediction; the battery, the last point's only
    settings = settings_with(run_dir, AnswersPairPrompts if args.battery else PredictsPairs)  # read once
    if has(PredictsPairs, settings):
        for key, value in run(run_dir, settings).items():
            print(f"{key:16s} {value:.4f}" if isinstance(value, float) else f"{key:16s} {value}")
        print(f"-> {run_dir.file(JSON)}")
    if args.battery:
        for label, r in run_battery(run_dir, settings=settings).items():
            cells = " ".join(
                f"{k} {r[k]:.4f}"
                for k in ("model", "least_squares", "averaging", "knn", "lasso")
                if isinstance(r.get(k), float)
            )
            print(f"{label:32s} {cells or r.get('reason', '')}")
        print(f"-> {run_dir.file(names.SHIFTS_JSON)}")


def _battery_flag(parser) -> None:
    parser.add_argument(
        "--battery", action="store_true", help="also every evaluation shift with the baselines (analysis/shifts.json)"
    )
    full_flag(parser)


main = analysis_command("analysis.robustness", __doc__, _battery_flag, _print_record)


if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
