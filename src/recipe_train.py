"""Training for seed 001's recipe (family `lm`): a task from the registry, AdamW with linear
warm-up then cosine decay, gradient clipping, whole log intervals in one compiled lax.scan with
the data drawn on device.

Task kinds, by the task options' `labels` (a table, no task names here):
  token  (mqar, disjoint_sets)  cross-entropy of the next token at the scored positions;
         accuracy = exact match of the argmax token there
  sign   (boolean classes)      squared error on the ±1 labels at every point; accuracy of sign ŷ
         at every prediction point
  real   (regression)           squared error; reported error = squared error / d
The pair kinds' per-point scores are seq_train.POINT_ERRORS, the gpt2 family's.

Glossary: B batch, T tokens, V vocabulary, n points, d dims.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from src.models.lm import LMConfig
from src.registry import Choice, choice, registry
from src.seq_train import point_errors

EXPLODED = 1e6


@dataclass(frozen=True)
class RecipeTrain:
    batch_size: int = 64
    train_steps: int = 1500
    learning_rate: float = 3e-3       # the seed: 1e-3 at batch 256; we train at batch 64
    weight_decay: float = 0.1
    warmup_fraction: float = 0.03
    grad_clip: float = 3.0
    log_every: int = 100
    eval_size: int = 512
    seed: int = 0
    eval_seed: int = 20231


@dataclass(frozen=True)
class PairShape:
    """The x/y-pair tasks' sequence: n points of dimension d."""
    n_points: int = 40
    n_dims: int = 10


@dataclass(frozen=True)
class RecipeSettings:
    task: Choice = field(default_factory=lambda: choice("task", "mqar", vocab_size=512))
    model: LMConfig = field(default_factory=lambda: LMConfig(width=64, n_head=4, vocab_size=512))
    train: RecipeTrain = field(default_factory=RecipeTrain)
    pairs: PairShape = field(default_factory=PairShape)
    system: str = "recipe"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(raw: dict) -> "RecipeSettings":
        model = dict(raw["model"])
        model["seq_mixer"] = Choice.from_dict("seq_mixer", model["seq_mixer"])
        model["state_mixer"] = Choice.from_dict("state_mixer", model["state_mixer"])
        return RecipeSettings(task=Choice.from_dict("task", raw["task"]), model=LMConfig(**model),
                              train=RecipeTrain(**raw["train"]), pairs=PairShape(**raw["pairs"]))


def labels_of(settings: RecipeSettings) -> str:
    return registry("task").get(settings.task.name).options.labels


# -- the task kinds -------------------------------------------------------------------------------

class Scored(NamedTuple):
    loss: jax.Array          # [] the training objective
    correct: jax.Array       # [B, P] 1 where the prediction is right (0 where not scored)
    counted: jax.Array       # [B, P] 1 where scored


def _token_sampler(settings):
    draw = registry("task").get(settings.task.name).build(settings.task.options)
    return lambda key, batch: draw(key, batch)


def _token_score(model, params, batch) -> Scored:
    logits = model.apply(params, batch.inputs)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, batch.targets)
    weight = batch.scored.astype(jnp.float32)
    loss = jnp.sum(nll * weight) / jnp.maximum(jnp.sum(weight), 1.0)
    correct = (jnp.argmax(logits, -1) == batch.targets).astype(jnp.float32) * weight
    return Scored(loss, correct, weight)


def _pair_sampler(settings):
    shape = settings.pairs
    draw = registry("task").get(settings.task.name).build(settings.task.options, n_points=shape.n_points,
                                                          n_dims=shape.n_dims)
    return lambda key, batch: draw(key, batch, shape.n_dims, shape.n_points)


def _sign_score(model, params, batch) -> Scored:
    prediction = model.apply(params, batch.xs, batch.ys)
    correct = 1.0 - point_errors(prediction, batch, "sign")                  # sign ŷ == y
    return Scored(jnp.mean((prediction - batch.ys) ** 2), correct, jnp.ones_like(batch.ys))


def _real_score(model, params, batch) -> Scored:
    prediction = model.apply(params, batch.xs, batch.ys)
    error = point_errors(prediction, batch, "real")                          # squared error / d
    return Scored(jnp.mean((prediction - batch.ys) ** 2), error, jnp.ones_like(batch.ys))


class TaskKind(NamedTuple):
    inputs: str                                  # the LM's input kind
    sampler: Callable                            # settings -> (key, batch) -> batch
    score: Callable                              # (model, params, batch) -> Scored
    example_inputs: Callable                     # batch -> model inputs (for init)
    metric: str                                  # what Scored.correct averages to


KINDS = {
    "token": TaskKind("tokens", _token_sampler, _token_score, lambda b: (b.inputs,), "accuracy"),
    "sign": TaskKind("pairs", _pair_sampler, _sign_score, lambda b: (b.xs, b.ys), "accuracy"),
    "real": TaskKind("pairs", _pair_sampler, _real_score, lambda b: (b.xs, b.ys), "error"),
}


def kind_of(settings: RecipeSettings) -> TaskKind:
    return KINDS[labels_of(settings)]


def model_config(settings: RecipeSettings) -> LMConfig:
    """The LM config with its input kind (and d) taken from the task."""
    kind = kind_of(settings)
    return dataclasses.replace(settings.model, inputs=kind.inputs, n_dims=settings.pairs.n_dims)


def make_model(settings: RecipeSettings):
    return registry("family").get("lm").build(model_config(settings))


def make_optimizer(settings: RecipeSettings):
    tr = settings.train
    warmup = max(1, int(tr.warmup_fraction * tr.train_steps))
    schedule = optax.warmup_cosine_decay_schedule(0.0, tr.learning_rate, warmup, max(tr.train_steps, warmup + 1))
    return optax.chain(optax.clip_by_global_norm(tr.grad_clip),
                       optax.adamw(schedule, weight_decay=tr.weight_decay))


def eval_batch(settings: RecipeSettings):
    sample = kind_of(settings).sampler(settings)
    return jax.jit(lambda key: sample(key, settings.train.eval_size))(jax.random.key(settings.train.eval_seed))


def init_params(settings: RecipeSettings, model):
    kind = kind_of(settings)
    example = kind.sampler(settings)(jax.random.key(0), 1)
    return model.init(jax.random.key(settings.train.seed), *kind.example_inputs(example))


def make_chunk(settings: RecipeSettings, model, optimizer):
    """chunk(params, opt_state, first_step, num_steps) -> (params, opt_state, losses [num_steps])."""
    kind = kind_of(settings)
    sample = kind.sampler(settings)
    train_key = jax.random.fold_in(jax.random.key(settings.train.seed), 1)

    def one_step(carry, step):
        params, opt_state = carry
        batch = sample(jax.random.fold_in(train_key, step), settings.train.batch_size)
        loss, grads = jax.value_and_grad(lambda p: kind.score(model, p, batch).loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    def chunk(params, opt_state, first_step, num_steps):
        (params, opt_state), losses = jax.lax.scan(one_step, (params, opt_state),
                                                   first_step + jnp.arange(num_steps))
        return params, opt_state, losses
    return jax.jit(chunk, static_argnums=3)


def evaluate(settings: RecipeSettings, model, params, batch) -> dict:
    """{loss, accuracy (over scored positions), accuracy_by_position [P] (NaN where never scored)};
    for regression "accuracy" holds the squared error / d (the kind's `metric`)."""
    scored = jax.jit(lambda p, b: kind_of(settings).score(model, p, b))(params, batch)
    correct, counted = np.asarray(scored.correct, np.float64), np.asarray(scored.counted, np.float64)
    per_position = correct.sum(0) / np.where(counted.sum(0) > 0, counted.sum(0), np.nan)
    return {"loss": float(scored.loss), "accuracy": float(correct.sum() / max(counted.sum(), 1.0)),
            "accuracy_by_position": per_position}


def train(settings: RecipeSettings, on_log: Callable[[dict], None] | None = None) -> dict:
    """{params, model, step, history, seconds, diverged}; stops at the first non-finite or
    exploded loss and keeps the parameters of the last good log interval."""
    tr = settings.train
    model, optimizer = make_model(settings), make_optimizer(settings)
    params = init_params(settings, model)
    opt_state = optimizer.init(params)
    chunk = make_chunk(settings, model, optimizer)
    evaluation = eval_batch(settings)
    history, step, diverged, by_position = [], 0, None, np.array([])
    begin = time.perf_counter()
    while step < tr.train_steps:
        n = min(tr.log_every, tr.train_steps - step)
        new_params, new_opt, losses = chunk(params, opt_state, step, n)
        losses = np.asarray(losses)
        if not np.all(np.isfinite(losses)) or losses.max() > EXPLODED:
            diverged = (f"loss not finite or above {EXPLODED:g} in steps {step + 1}..{step + n}; kept the "
                        f"parameters of step {step}")
            break
        params, opt_state, step = new_params, new_opt, step + n
        result = evaluate(settings, model, params, evaluation)
        row = {"step": step, "train_loss": float(losses.mean()), "eval_loss": result["loss"],
               f"eval_{kind_of(settings).metric}": result["accuracy"],
               "elapsed_s": round(time.perf_counter() - begin, 3)}
        history.append(row)
        by_position = result["accuracy_by_position"]
        if on_log:
            on_log(row)
    return {"params": params, "model": model, "step": step, "history": history,
            "seconds": time.perf_counter() - begin, "diverged": diverged, "evaluation": evaluation,
            "final_accuracy_by_position": by_position}


def ms_per_step(settings: RecipeSettings, steps: int = 20, repeats: int = 3) -> float:
    """Median ms per training step after compilation (make bench)."""
    model, optimizer = make_model(settings), make_optimizer(settings)
    params = init_params(settings, model)
    opt_state = optimizer.init(params)
    chunk = make_chunk(settings, model, optimizer)
    jax.block_until_ready(chunk(params, opt_state, 0, steps)[2])
    times = []
    for r in range(repeats):
        begin = time.perf_counter()
        jax.block_until_ready(chunk(params, opt_state, steps * (r + 1), steps)[2])
        times.append(time.perf_counter() - begin)
    return 1000.0 * float(np.median(times)) / steps


def decoded_examples(settings: RecipeSettings, model, params, batch, count: int = 3) -> list[dict]:
    """A few eval sequences as lists: inputs, targets, which positions are scored, predictions."""
    kind = kind_of(settings)
    inputs = kind.example_inputs(batch)
    output = np.asarray(jax.jit(model.apply)(params, *(a[:count] for a in inputs)))
    examples = []
    for i in range(count):
        if kind.inputs == "tokens":
            scored = np.asarray(batch.scored[i])
            examples.append({"inputs": np.asarray(batch.inputs[i]).tolist(),
                             "targets": np.asarray(batch.targets[i]).tolist(),
                             "scored_positions": np.flatnonzero(scored).tolist(),
                             "predicted_at_scored": output[i].argmax(-1)[scored].tolist()})
        else:
            examples.append({"xs": np.asarray(batch.xs[i]).round(4).tolist(),
                             "ys": np.asarray(batch.ys[i]).round(4).tolist(),
                             "scored_positions": list(range(int(batch.ys.shape[1]))),
                             "predictions": output[i].round(4).tolist()})
    return examples



