"""Training for the training-dynamics study (seed 003): settings, the loss, and a compiled
scan over epochs that records the loss at every epoch.

Loss: mean squared error of the query prediction, L = (1/P) Σ_p (ŷ_p − y_p)² (the seed's
nn.MSELoss; no ½ — this family's `loss` means this everywhere in its run directories).

Every model is ŷ = F t(θ) (src/models/linattn.py), so the full-batch loss is the quadratic
L(θ) = t Gᵀ t − 2 bᵀ t + c with the moments G = FᵀF/P, b = Fᵀy/P, c = yᵀy/P of the fixed
set, computed once. An epoch of full-batch GD (or Adam) then costs O(F²) whatever P is,
and `lax.scan` runs whole log intervals; minibatch SGD uses the features directly. The loss
and the test losses are recorded at the parameters before each epoch's update (as the seed).

Shapes: P sequences, F features, E epochs, K log points, H heads, D input dimension.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from src.bounds import check_memory, check_sizes
from src.registry import Choice, UnknownChoice, registry
from src.tasks.linattn import DynamicsTaskConfig, SequenceSet, make_sets

OPTIMIZERS = {"gd": optax.sgd, "sgd": optax.sgd, "adam": optax.adam}
EXPLODED = 1e6          # a loss this many times the initial one counts as diverged
MOMENT_CHUNK = 4096     # sequences per chunk when accumulating the moments


@dataclass(frozen=True)
class DynamicsTrainConfig:
    epochs: int = 6001
    lr: float = 1e-3
    optimizer: str = "gd"       # gd (full batch) | sgd (minibatches of batch_size) | adam
    batch_size: int = 0         # 0 = full batch (gd, adam); >= 1 for sgd
    init: float = 1e-6          # initial parameters ~ init · N(0, 1)
    seed: int = 0               # initialisation (and SGD shuffling)
    log_every: int = 10         # epochs between records of W_KQ's singular values
    normalize: bool = False     # divide X Xᵀ (and z) by N, as the paper's formulas; the seed's code does not
    float64: bool = False       # train in float64 (exactness checks)


@dataclass(frozen=True)
class DynamicsSettings:
    task: DynamicsTaskConfig = field(default_factory=DynamicsTaskConfig)
    model: Choice = field(default_factory=lambda: Choice("attn_merged"))   # registry dynamics_model
    train: DynamicsTrainConfig = field(default_factory=DynamicsTrainConfig)
    system: str = "linattn"
    schema_version: int = 2

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(raw: dict) -> "DynamicsSettings":
        return DynamicsSettings(task=DynamicsTaskConfig(**raw["task"]),
                                model=Choice.from_dict("dynamics_model", raw["model"]),
                                train=DynamicsTrainConfig(**raw["train"]))


def validate(s: DynamicsSettings) -> None:
    """ValueError (one line: the setting, the value, what is accepted) on the first bad one."""
    t, tr, opts = s.task, s.train, s.model.options

    def need(ok: bool, message: str) -> None:
        if not ok:
            raise ValueError(message)
    try:
        registry("dynamics_model").get(s.model.name)
    except UnknownChoice as err:
        raise ValueError(str(err)) from None
    for name, value, low in (("in_dim", t.in_dim, 1), ("seq_len", t.seq_len, 2),
                             ("trainset_size", t.trainset_size, 1), ("testset_size", t.testset_size, 0),
                             ("heads", getattr(opts, "heads", 1), 1), ("epochs", tr.epochs, 1),
                             ("log_every", tr.log_every, 1), ("batch_size", tr.batch_size, 0)):
        need(isinstance(value, int) and not isinstance(value, bool) and value >= low,
             f"{name}={value!r} is out of range; accepted: an integer >= {low}")
    # the shared integer ranges and a memory estimate (src/bounds.py; ValueError)
    check_sizes(d__in_dim=t.in_dim, points__seq_len=t.seq_len, eval_size__trainset_size=t.trainset_size,
                heads=getattr(opts, "heads", 1), steps__epochs=tr.epochs, seed=tr.seed)
    if t.testset_size:
        check_sizes(eval_size__testset_size=t.testset_size)
    # the sequences are held as [n, in_dim + 1, seq_len] floats (train and test) plus moments
    check_memory(8 * (t.trainset_size + t.testset_size) * (t.in_dim + 1) * t.seq_len
                 + 8 * (t.in_dim + 1) ** 4, "this run")
    rank = getattr(opts, "rank", 1)
    need(isinstance(rank, int) and 1 <= rank <= t.in_dim,
         f"rank={rank!r} is out of range; accepted: an integer in [1, in_dim={t.in_dim}]")
    need(isinstance(t.icl, (int, float)) and 0.0 <= t.icl <= 1.0,
         f"icl={t.icl!r} is out of range; accepted: a number in [0, 1]")
    for name, value in (("lr", tr.lr), ("init", tr.init)):
        need(isinstance(value, (int, float)) and math.isfinite(value) and value > 0,
             f"{name}={value!r} is out of range; accepted: a finite number > 0")
    need(tr.optimizer in OPTIMIZERS,
         f"optimizer={tr.optimizer!r} is unknown; accepted: {', '.join(OPTIMIZERS)}")
    full = tr.optimizer != "sgd"
    need(full == (tr.batch_size == 0),
         f"batch_size={tr.batch_size} does not fit optimizer={tr.optimizer!r}; accepted: 0 "
         "(full batch) for gd and adam, 1..trainset_size for sgd")
    need(tr.batch_size <= t.trainset_size,
         f"batch_size={tr.batch_size} is out of range; accepted: at most trainset_size={t.trainset_size}")
    need(0 <= t.seed < 2 ** 32 and 0 <= tr.seed < 2 ** 32,
         "seed is out of range; accepted: an integer in [0, 2^32 - 1]")


class Moments(NamedTuple):
    gram: jax.Array    # G = FᵀF/P [F, F]
    cross: jax.Array   # b = Fᵀy/P [F]
    energy: jax.Array  # c = yᵀy/P []


def moments(features: Callable[[jax.Array], jax.Array], data: SequenceSet, dtype) -> Moments:
    """The loss moments of a set, accumulated over chunks of sequences."""
    size = len(data.targets)
    featurize = jax.jit(features)
    gram = cross = 0.0
    for start in range(0, size, MOMENT_CHUNK):
        f = featurize(jnp.asarray(data.tokens[start:start + MOMENT_CHUNK], dtype))
        y = jnp.asarray(data.targets[start:start + MOMENT_CHUNK], dtype)
        gram = gram + f.T @ f
        cross = cross + f.T @ y
    return Moments(gram / size, cross / size, jnp.asarray(np.mean(data.targets ** 2), dtype))


def quadratic_loss(t: jax.Array, m: Moments) -> jax.Array:
    """(1/P) Σ (F t − y)² from the moments."""
    return t @ m.gram @ t - 2.0 * m.cross @ t + m.energy


class Trajectory(NamedTuple):
    params: dict                  # last good parameters
    loss: np.ndarray              # [E'] training loss at every finished epoch
    test: dict[str, np.ndarray]   # name -> [E'] test losses
    log_epochs: np.ndarray        # [K] epochs of the records below
    singular_values: np.ndarray   # [K, H, n] of every head's W_KQ (W_Kᵀ W_Q; hidden B_h for the MLP)
    gamma_diag: np.ndarray        # [K, H, D] per head the diagonal of v_h,y W_h,xx (principal components)
    seconds: float
    diverged: str | None


def train(settings: DynamicsSettings, sets: dict[str, SequenceSet] | None = None,
          init_params: dict | None = None,
          on_chunk: Callable[[int, float], None] | None = None) -> Trajectory:
    """Train from `init_params` (default: the settings' initialisation) and record the dynamics."""
    if settings.train.float64:
        with jax.enable_x64(True):
            return _train(settings, sets, init_params, on_chunk, jnp.float64)
    return _train(settings, sets, init_params, on_chunk, jnp.float32)


def _train(settings, sets, init_params, on_chunk, dtype) -> Trajectory:
    tr, task = settings.train, settings.task
    model = registry("dynamics_model").get(settings.model.name).build(settings.model.options)
    sets = sets if sets is not None else make_sets(task)
    featurize = lambda tokens: model.features(tokens, tr.normalize)
    train_m = moments(featurize, sets["train"], dtype)
    tests = {name: moments(featurize, data, dtype) for name, data in sets.items() if name != "train"}
    params = init_params or model.init(jax.random.key(tr.seed), task.in_dim, tr.init)
    params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), params)
    optimizer = OPTIMIZERS[tr.optimizer](tr.lr)
    features = (featurize(jnp.asarray(sets["train"].tokens, dtype)) if tr.batch_size else None)
    targets = jnp.asarray(sets["train"].targets, dtype)

    def full_loss(p):
        return quadratic_loss(model.coefficients(p), train_m)

    def epoch(carry, index):
        p, state = carry
        value, grads = jax.value_and_grad(full_loss)(p)
        test_values = {n: quadratic_loss(model.coefficients(p), m) for n, m in tests.items()}
        if tr.batch_size:   # minibatch SGD: one pass over a fresh permutation
            order = jax.random.permutation(jax.random.fold_in(jax.random.key(tr.seed), index),
                                           targets.shape[0])
            batches = order[: targets.shape[0] // tr.batch_size * tr.batch_size].reshape(
                -1, tr.batch_size)

            def step(inner, rows):
                q, s = inner
                g = jax.grad(lambda r: jnp.mean((features[rows] @ model.coefficients(r)
                                                 - targets[rows]) ** 2))(q)
                u, s = optimizer.update(g, s, q)
                return (optax.apply_updates(q, u), s), None
            (p, state), _ = jax.lax.scan(step, (p, state), batches)
        else:
            updates, state = optimizer.update(grads, state, p)
            p = optax.apply_updates(p, updates)
        return (p, state), (value, test_values)

    def record(p):
        kq = model.kq(p)
        return jnp.linalg.svd(kq, compute_uv=False), jnp.diagonal(model.gamma(p), axis1=1, axis2=2)

    @partial(jax.jit, static_argnums=3)
    def interval(p, state, first, count):
        """`count` epochs from epoch `first`, then the record at the end."""
        (p, state), (values, test_values) = jax.lax.scan(
            epoch, (p, state), first + jnp.arange(count))
        return p, state, values, test_values, record(p)

    state = optimizer.init(params)
    losses, test_losses = [], {name: [] for name in tests}
    log_epochs, svs, gammas = [0], [], []
    sv0, g0 = jax.jit(record)(params)
    svs.append(np.asarray(sv0))
    gammas.append(np.asarray(g0))
    diverged, start, done = None, time.perf_counter(), 0
    initial = None
    while done < tr.epochs:
        take = min(tr.log_every, tr.epochs - done)
        new_p, new_state, values, test_values, (sv, g) = interval(params, state, done, take)
        values = np.asarray(values)
        initial = float(values[0]) if initial is None else initial
        bad = ~np.isfinite(values[:take]) | (values[:take] > EXPLODED * max(initial, 1e-30))
        if bad.any() or not all(bool(jnp.all(jnp.isfinite(a))) for a in jax.tree_util.tree_leaves(new_p)):
            first_bad = int(np.argmax(bad)) if bad.any() else take - 1
            losses.extend(values[:first_bad].tolist())
            diverged = (f"loss {'not finite' if not np.isfinite(values[first_bad]) else 'exploded'} "
                        f"at epoch {done + first_bad}; stopped and kept the parameters of epoch {done}")
            break
        losses.extend(values.tolist())
        for name in tests:
            test_losses[name].extend(np.asarray(test_values[name]).tolist())
        params, state, done = new_p, new_state, done + take
        if take == tr.log_every:
            log_epochs.append(done)
            svs.append(np.asarray(sv))
            gammas.append(np.asarray(g))
        if on_chunk is not None:
            on_chunk(done, float(values[take - 1]))
    return Trajectory(jax.tree_util.tree_map(np.asarray, params), np.asarray(losses),
                      {n: np.asarray(v) for n, v in test_losses.items()}, np.asarray(log_epochs),
                      np.stack(svs), np.stack(gammas), time.perf_counter() - start, diverged)
