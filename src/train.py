"""Training: fresh tasks every step, whole chunks of steps compiled with `lax.scan`.

The hot path (sample tasks -> curriculum -> tokens -> loss -> Adam update) is one
jitted function that runs `log_every` steps; Python only runs between chunks, to
evaluate on the fixed eval set and log. The step key is `fold_in(train_key, step)`,
so results do not depend on how steps are chunked. Same settings => same metrics.

Shapes: B batch, N pairs, d input dim, T tokens, D width.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

from src.config import CurriculumConfig, Settings, TaskConfig, validate
from src.curricula import CurriculumOutput, apply_curriculum, is_exchangeable
from src.metrics import Reference, loss, make_scorer
from src.models.attention_only import Model, build_model
from src.models.layouts import make_tokens
from src.registry import registry
from src.tasks.regression import Tasks

# A training loss above this many times the first one is an explosion: the run stops as diverged.
EXPLODED = 1e6
# The reference predictor every attention-only run is scored against (registry "baseline").
REFERENCE = "gd_one_step"


def reference_baseline():
    return registry("baseline").get(REFERENCE).build(None)


def task_sampler(task: TaskConfig):
    """(key, batch_size, alpha=1) -> Tasks, from the task's registry entry."""
    return registry("task").get(task.name).build(task)


class EvalSet(NamedTuple):
    """The fixed evaluation tasks (drawn from `eval_seed`, never from `seed`) and GD on them."""
    clean_tasks: Tasks       # before the eval curriculum
    tasks: Tasks             # after noise, ordering and placement
    ordering_idx: np.ndarray  # [E, N] int32
    noise_mask: np.ndarray    # [E, N] bool (in the new order)
    gd_eta: float             # tuned on a second held-out set of the same distribution
    reference: Reference      # GD's predictions and sensitivities on `tasks`


@partial(jax.jit, static_argnames=("size", "task", "curriculum"))
def draw_tasks(key: jax.Array, size: int, task: TaskConfig, curriculum: CurriculumConfig,
               alpha: float = 1.0) -> tuple[Tasks, CurriculumOutput]:
    """`size` clean tasks from `key` and the same tasks after `curriculum`."""
    key_tasks, key_curriculum = jax.random.split(key)
    clean = task_sampler(task)(key_tasks, size, alpha)
    return clean, apply_curriculum(key_curriculum, clean, curriculum, task, alpha)


def make_eval_set(settings: Settings, alpha: float = 1.0, gd_eta: float | None = None) -> EvalSet:
    """Draw the eval set, apply the eval curriculum once, and tune GD's η (unless given)."""
    tr = settings.train
    clean, transformed = draw_tasks(jax.random.key(tr.eval_seed), tr.eval_size, settings.task,
                                    settings.eval_curriculum, alpha)
    if gd_eta is None:
        gd_eta = tune_gd_eta(settings)
    return EvalSet(clean, transformed.tasks, np.asarray(transformed.ordering_idx),
                   np.asarray(transformed.noise_mask), gd_eta,
                   reference_baseline().reference(transformed.tasks, gd_eta))


def tune_gd_eta(settings: Settings) -> float:
    """η of one GD step, tuned on held-out tasks from the eval distribution at α = 1."""
    tr = settings.train
    _, held_out = draw_tasks(jax.random.key(tr.eval_seed + 1), tr.eval_size, settings.task,
                             settings.eval_curriculum)
    eta, _ = reference_baseline().tune_eta(held_out.tasks)
    return eta


def make_evaluator(model: Model, settings: Settings) -> Callable[[Any, EvalSet], dict[str, float]]:
    """params, eval_set -> {eval_loss, gd_loss, align_cos, l2_pred_diff, model_diff} plus the
    scores of every registered probe that applies to `settings` (e.g. copy_*)."""
    scores = make_scorer(model)
    probes = [entry.build(None, model) for entry in registry("probe").applicable(settings)]

    def evaluate(params, eval_set: EvalSet) -> dict[str, float]:
        out = scores(params, eval_set.tasks, eval_set.reference)
        for probe in probes:
            out.update(probe(params, eval_set.tasks))
        return out

    return evaluate


def make_optimizer(settings: Settings) -> optax.GradientTransformation:
    tr = settings.train
    return optax.chain(optax.clip_by_global_norm(tr.grad_clip_norm),
                       optax.adam(tr.lr, b1=tr.adam_b1, b2=tr.adam_b2))


def make_train_chunk(settings: Settings, model: Model, optimizer: optax.GradientTransformation):
    """Returns chunk(params, opt_state, train_key, first_step, num_steps) ->
    (params, opt_state, losses [num_steps]); `num_steps` is static."""
    task, batch_size, curriculum = settings.task, settings.train.batch_size, settings.train_curriculum

    sample = task_sampler(task)

    def loss_fn(params, tokens, targets):
        return loss(model.apply(params, tokens).prediction, targets)

    def one_step(carry, step):
        params, opt_state, train_key = carry
        key_data, key_curriculum = jax.random.split(jax.random.fold_in(train_key, step))
        tasks = sample(key_data, batch_size)
        if not is_exchangeable(curriculum):  # a random shuffle of i.i.d. pairs changes nothing
            tasks = apply_curriculum(key_curriculum, tasks, curriculum, task).tasks
        tokens = make_tokens(tasks, model.config)
        value, grads = jax.value_and_grad(loss_fn)(params, tokens, tasks.query_y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, train_key), value

    def chunk(params, opt_state, train_key, first_step, num_steps):
        steps = first_step + jnp.arange(num_steps)
        (params, opt_state, _), losses = jax.lax.scan(one_step, (params, opt_state, train_key), steps)
        return params, opt_state, losses

    return jax.jit(chunk, static_argnums=4)


@dataclass
class TrainResult:
    params: Any                       # last good parameters
    history: list[dict[str, float]]   # one row per log point
    eval_set: EvalSet
    steps_done: int
    train_seconds: float
    diverged: str | None = None       # message when training stopped on a non-finite value
    final: dict[str, float] = field(default_factory=dict)


def params_finite(params) -> bool:
    return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(params))


def train(settings: Settings, *, on_log: Callable[[dict], None] | None = None,
          progress: bool = True, eval_set: EvalSet | None = None) -> TrainResult:
    """Train `settings.model` from scratch; evaluate every `log_every` steps and at the end.

    `on_log(row)` is called with every metrics row as soon as it exists. On a
    non-finite loss or parameter the run stops and keeps the parameters of the
    last finished chunk.
    """
    validate(settings)
    tr = settings.train
    model = build_model(settings.task, settings.model)
    eval_set = eval_set or make_eval_set(settings)
    evaluate = make_evaluator(model, settings)
    optimizer = make_optimizer(settings)
    chunk = make_train_chunk(settings, model, optimizer)

    key_init, train_key = jax.random.split(jax.random.key(tr.seed))
    params = model.init(key_init)
    opt_state = optimizer.init(params)

    history: list[dict[str, float]] = []
    scores: dict[str, float] = {}  # evaluation of the current `params`
    diverged = None
    start = time.perf_counter()
    step, first_loss = 0, None
    bar = tqdm(total=tr.steps, desc=settings.model.name, unit="step", disable=not progress,
               leave=False, dynamic_ncols=True)
    while step < tr.steps:
        n = min(tr.log_every, tr.steps - step)
        new_params, new_opt_state, losses = chunk(params, opt_state, train_key, step, n)
        losses = np.asarray(losses)
        first_loss = float(losses[0]) if first_loss is None else first_loss
        exploded = np.isfinite(losses) & (losses > EXPLODED * max(abs(first_loss), 1e-12))
        if not np.all(np.isfinite(losses)) or exploded.any() or not params_finite(new_params):
            bad_steps = ~np.isfinite(losses) | exploded
            bad = int(np.argmax(bad_steps)) if bad_steps.any() else n - 1
            what = "exploded (above %g x the first loss)" % EXPLODED if exploded.any() else "non-finite"
            diverged = (f"training loss {what} at step {step + bad + 1}; stopped and kept the "
                        f"parameters from step {step}")
            break
        params, opt_state = new_params, new_opt_state
        step += n
        scores = evaluate(params, eval_set)
        row = {"step": step, "train_loss": float(np.mean(losses)), **scores,
               "elapsed_s": round(time.perf_counter() - start, 3)}
        history.append(row)
        if on_log is not None:
            on_log(row)
        bar.update(n)
        bar.set_postfix(eval_loss=f"{row['eval_loss']:.4f}", gd=f"{row['gd_loss']:.4f}")
    bar.close()
    train_seconds = time.perf_counter() - start
    if diverged and not history:  # stopped in the first chunk: score the initial parameters
        scores = evaluate(params, eval_set)
    return TrainResult(params, history, eval_set, step, train_seconds, diverged, scores)
