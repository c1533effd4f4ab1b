"""Training of the sequence-model family (`gpt2`) on Garg et al.'s regression tasks: fresh
tasks every step, drawn on device from fold_in(key, step), whole log intervals in one jitted
`lax.scan`, the curriculum a pure function of the step.

Loss: mean squared error over every scored prediction point (Garg's training loss; twice the
paper's ½·MSE convention of the von Oswald runs — this family's `loss` means plain MSE).
Reported error: squared error per point divided by the current dimension d (the zero
predictor scores 1 on N(0, I) tasks), on a fixed eval set (eval_seed) at the curriculum's end.

Checkpoints (params, optimiser state, step) are flat .npz files; a run resumed from one
gives the same numbers as an uninterrupted run (the data depend on the step only).
Shapes: B batch, n points, d dims.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from src.models.backbone import GPT2Config
from src.registry import Choice, choice, registry
from src.tasks.garg import Curriculum, RegressionBatch, Schedule

EVAL_SEED = 20230
EXPLODED = 1e6


@dataclass(frozen=True)
class SeqTrainConfig:
    batch_size: int = 64
    learning_rate: float = 1e-3
    train_steps: int = 6000
    log_every: int = 250
    save_every_steps: int = 1000
    keep_every_steps: int = 0          # 0 = keep only the latest checkpoint
    eval_size: int = 1000
    seed: int = 0
    eval_seed: int = EVAL_SEED
    grad_clip_norm: float = 10.0


@dataclass(frozen=True)
class SeqSettings:
    model: GPT2Config = field(default_factory=GPT2Config)
    task: Choice = field(default_factory=lambda: choice("task", "linear_regression"))
    curriculum: Curriculum = field(default_factory=Curriculum)
    train: SeqTrainConfig = field(default_factory=SeqTrainConfig)
    system: str = "gpt2"
    schema_version: int = 2

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(raw: dict) -> "SeqSettings":
        model = dict(raw["model"])
        model["mixer"] = Choice.from_dict("seq_mixer", model["mixer"])
        if "position" in model:   # runs made before position encodings were a choice: learned
            model["position"] = Choice.from_dict("position", model["position"])
        cur = raw["curriculum"]
        return SeqSettings(model=GPT2Config(**model), task=Choice.from_dict("task", raw["task"]),
                           curriculum=Curriculum(Schedule(**cur["dims"]), Schedule(**cur["points"])),
                           train=SeqTrainConfig(**raw["train"]))


def sampler(settings: SeqSettings, n_points: int | None = None):
    c = settings.curriculum
    return registry("task").get(settings.task.name).build(
        settings.task.options, n_points=n_points or c.points.end, n_dims=c.dims.end)


def eval_batch(settings: SeqSettings, n_points: int | None = None, alpha: float = 1.0) -> RegressionBatch:
    """The fixed eval tasks at the curriculum's end (more points for a length test)."""
    c = settings.curriculum
    points = n_points or c.points.end
    return jax.jit(lambda key: sampler(settings, points)(key, settings.train.eval_size,
                                                          c.dims.end, points, alpha))(
        jax.random.key(settings.train.eval_seed))


POINT_ERRORS = {   # a task's `labels` -> (its per-point error [B, n], what it measures)
    "real": (lambda prediction, batch: (prediction - batch.ys) ** 2 / batch.dims,
             "squared error / d"),
    "sign": (lambda prediction, batch: (jnp.sign(prediction) != batch.ys).astype(jnp.float32),
             "error rate (1 − accuracy of sign ŷ)"),
}


def task_labels(settings: "SeqSettings") -> str:
    """'real' (regression: squared error / d) or 'sign' (boolean: accuracy of sign ŷ)."""
    return registry("task").get(settings.task.name).options.labels


def point_errors(prediction, batch: RegressionBatch, labels: str = "real") -> jax.Array:
    """The task's error at every point of every task: [B, n] (see POINT_ERRORS)."""
    return POINT_ERRORS[labels][0](prediction, batch)


def normalised_errors(prediction, batch: RegressionBatch, labels: str = "real") -> jax.Array:
    """The task's error per point, mean over tasks: [n] (regression: squared error / d)."""
    if labels == "real":   # kept in this operation order: the gpt2 runs' numbers do not move
        return jnp.mean((prediction - batch.ys) ** 2, axis=0) / batch.dims
    return jnp.mean(point_errors(prediction, batch, labels), axis=0)


def weighted_mse(prediction, batch: RegressionBatch) -> jax.Array:
    return jnp.sum(batch.weights * (prediction - batch.ys) ** 2) / jnp.maximum(jnp.sum(batch.weights), 1)


def make_model(settings: SeqSettings):
    return registry("family").get("gpt2").build(settings.model)


def init_state(settings: SeqSettings, model, optimizer):
    c = settings.curriculum
    example = sampler(settings)(jax.random.key(0), 1, c.dims.end, c.points.end)
    params, state = model.init(jax.random.key(settings.train.seed), example.xs, example.ys)
    return params, state, optimizer.init(params)


def make_optimizer(settings: SeqSettings):
    tr = settings.train
    return optax.chain(optax.clip_by_global_norm(tr.grad_clip_norm), optax.adam(tr.learning_rate))


def make_chunk(settings: SeqSettings, model, optimizer):
    """chunk(params, state, opt_state, first_step, num_steps) -> (params, opt_state, losses, points, dims)."""
    tr, c = settings.train, settings.curriculum
    sample = sampler(settings)
    train_key = jax.random.fold_in(jax.random.key(tr.seed), 1)

    def one_step(carry, step):
        params, opt_state, state = carry
        dims, points = c.dims.at(step), c.points.at(step)
        batch = sample(jax.random.fold_in(train_key, step), tr.batch_size, dims, points)
        loss, grads = jax.value_and_grad(
            lambda p: weighted_mse(model.apply(p, state, batch.xs, batch.ys), batch))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, state), (loss, points, dims)

    def chunk(params, state, opt_state, first_step, num_steps):
        (params, opt_state, _), (losses, points, dims) = jax.lax.scan(
            one_step, (params, opt_state, state), first_step + jnp.arange(num_steps))
        return params, opt_state, losses, points, dims
    return jax.jit(chunk, static_argnums=4)


def tree_to_npz(prefix: str, tree) -> dict[str, np.ndarray]:
    leaves = jax.tree_util.tree_leaves(tree)
    return {f"{prefix}/{i:04d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}


def tree_from_npz(prefix: str, like, arrays: dict) -> Any:
    treedef = jax.tree_util.tree_structure(like)
    count = treedef.num_leaves
    leaves = [jnp.asarray(arrays[f"{prefix}/{i:04d}"]) for i in range(count)]
    return jax.tree_util.tree_unflatten(treedef, leaves)


def train(settings: SeqSettings, *, start=None, on_log: Callable[[dict], None] | None = None,
          on_checkpoint: Callable[[int, Any, Any, list], None] | None = None) -> dict:
    """Train from `start` = (step, params, opt_state) or from scratch; returns
    {params, state, step, history, seconds, diverged, training_log}."""
    tr = settings.train
    model = make_model(settings)
    optimizer = make_optimizer(settings)
    params, state, opt_state = init_state(settings, model, optimizer)
    step = 0
    if start is not None:
        step, params, opt_state = start
    chunk = make_chunk(settings, model, optimizer)
    evaluation = eval_batch(settings)
    predict = jax.jit(model.apply)
    labels = task_labels(settings)
    history, log_rows, diverged = [], [], None
    begin = time.perf_counter()
    while step < tr.train_steps:
        n = min(tr.log_every - step % tr.log_every, tr.save_every_steps - step % tr.save_every_steps,
                tr.train_steps - step)
        new_params, new_opt, losses, points, dims = chunk(params, state, opt_state, step, n)
        losses = np.asarray(losses)
        if not np.all(np.isfinite(losses)) or losses.max() > EXPLODED:
            diverged = f"loss not finite or above {EXPLODED:g} in steps {step + 1}..{step + n}; kept the parameters of step {step}"
            break
        log_rows += [{"step": step + i + 1, "loss": float(losses[i]), "n_points": int(points[i]),
                      "n_dims": int(dims[i])} for i in range(n)]
        params, opt_state, step = new_params, new_opt, step + n
        if step % tr.log_every == 0 or step == tr.train_steps:
            errors = normalised_errors(predict(params, state, evaluation.xs, evaluation.ys), evaluation,
                                       labels)
            row = {"step": step, "train_loss": float(np.mean(losses)),
                   "eval_loss": float(weighted_mse(predict(params, state, evaluation.xs, evaluation.ys),
                                                   evaluation)),
                   "eval_error_last": float(errors[-1]), "eval_error_mean": float(jnp.mean(errors)),
                   "elapsed_s": round(time.perf_counter() - begin, 3)}
            history.append(row)
            if on_log:
                on_log(row)
        if on_checkpoint and (step % tr.save_every_steps == 0 or step == tr.train_steps):
            on_checkpoint(step, params, opt_state, log_rows)
    return {"params": params, "state": state, "step": step, "history": history,
            "seconds": time.perf_counter() - begin, "diverged": diverged, "training_log": log_rows,
            "model": model}


def ms_per_step(settings: SeqSettings, repeats: int = 3, chunk_steps: int = 50) -> float:
    """Median ms per training step (after compilation) at the settings' size."""
    model, optimizer = make_model(settings), make_optimizer(settings)
    params, state, opt_state = init_state(settings, model, optimizer)
    chunk = make_chunk(settings, model, optimizer)
    out = chunk(params, state, opt_state, 0, chunk_steps)
    jax.block_until_ready(out[2])
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(chunk(params, state, opt_state, chunk_steps * (r + 1), chunk_steps)[2])
        times.append(time.perf_counter() - t0)
    return 1000 * float(np.median(times)) / chunk_steps


