"""Garg et al.'s (2022) remaining baselines, the learners fit afresh on every prefix of a prompt
(registry "baseline"), as predictions at every point like baselines/regression.py: ŷ_i is the
prediction at x_i of a learner fit on the pairs j < i only.

  decision_tree  a CART regression tree (Garg's sklearn DecisionTreeRegressor(max_depth=4), and
                 max_depth=None as max_depth 0), written in NumPy: each node takes the (feature,
                 threshold) with the smallest summed squared error of its two children, thresholds
                 at midpoints between consecutive distinct values, leaves predict their mean label
  xgboost        XGBoost's XGBRegressor() at its defaults (through xgboost.train: the same booster
                 without scikit-learn, checked equal once by hand); an optional extra, never a
                 requirement: `pip install xgboost-cpu==3.2.0` (the predictor raises a one-line
                 RuntimeError saying so when the package does not import)
  two_layer_nn   Garg's GDModel of the relu_2nn_regression task: a fresh network
                 Linear(d, 100) -> ReLU -> Linear(100, 1) per prefix (PyTorch's nn.Linear
                 initialisation), trained by Adam (lr 5e-3) for 100 steps on the mean squared
                 error of a minibatch of min(i, 100) prefix pairs, in JAX (vmap over prompts and
                 prefixes, the steps one lax.scan)

Every function maps prompts (src/tasks/pairs.py: xs [B, n, d], ys [B, n]) -> ŷ [B, n] (ŷ_0 = 0: no
examples yet).

Checked once by hand beside the originals' libraries (scikit-learn 1.7.2, xgboost-cpu 3.2.0, d 4,
up to 15 pairs): xgboost equals XGBRegressor() bit for bit on 33 prefixes; a depth-1 tree equals
sklearn's DecisionTreeRegressor on every one of 202 prefixes whose best split is unique, and
differs only where several splits tie (78 of 280, mostly prefixes of 2 to 4 pairs).

Where these differ from Garg's code:
- decision_tree breaks ties (splits whose error reductions agree within 1e-9 of the node's
  squared error, e.g. the same partition reached through two features) by the lowest feature
  index, then the lowest threshold; sklearn breaks them by a random permutation of the features.
  The tree is grown only along the path of the query, which gives the full tree's prediction.
- two_layer_nn trains each prompt's network on its own loss (Garg's ParallelNetworks share one
  Adam over the batch's mean loss, which scales every gradient by 1/B: the same steps up to Adam's
  eps). The initialisation and the minibatches depend on (seed, prefix, step) only, not on the
  prompt's row, so a prompt's prediction depends on its own pairs and the seed alone (blocks of
  rows, src/batched.py, give the same numbers); Garg draws both afresh from torch's global RNG,
  the minibatches shared by the batch's prompts as here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from baselines.regression import BASELINES, _all_regression
from src.optim import Optimizer, gradient_step, make_optimizer
from src.settings import require_int, require_number
from src.tasks.pairs import PairPrompt

XGBOOST_VERSION = "3.2.0"  # the xgboost-cpu release recommended (current on PyPI when written)
XGBOOST_ROUNDS = 100  # XGBRegressor's default n_estimators
TIE = 1e-9  # error reductions within TIE x the node's squared error are equal


# ---------------------------------------------------------------------------------------------
# decision_tree


def best_split(x: np.ndarray, y: np.ndarray) -> tuple[int, float] | None:
    """(feature, threshold) of the split of x [m, d], y [m] that reduces the squared error most
    (ties: lowest feature, then lowest threshold), or None when no split reduces it (all x
    equal, all y equal). Vectorised: per feature, cumulative sums of the labels sorted by it."""
    m = len(y)
    if m < 2 or np.all(y == y[0]):
        return None
    order = np.argsort(x, axis=0, kind="stable")  # [m, d]
    sorted_x = np.take_along_axis(x, order, axis=0)
    centred = y - y.mean()
    left = np.cumsum(centred[order], axis=0)[:-1]  # [m-1, d]: the k smallest
    k = np.arange(1, m, dtype=np.float64)[:, None]
    # the reduction SSE(node) - SSE(left) - SSE(right) with labels summing to 0: L² m / (k (m-k))
    gain = np.where(sorted_x[1:] > sorted_x[:-1], left**2 * m / (k * (m - k)), -np.inf)
    best = gain.max()
    tolerance = TIE * float(centred @ centred)
    if not best > tolerance:
        return None
    ties = (gain >= best - tolerance).T  # [d, m-1], feature-major
    feature, position = np.unravel_index(np.argmax(ties), ties.shape)
    threshold = (sorted_x[position, feature] + sorted_x[position + 1, feature]) / 2
    return int(feature), float(threshold)


def tree_prediction(x: np.ndarray, y: np.ndarray, query: np.ndarray, max_depth: int) -> float:
    """The prediction at `query` [d] of the regression tree fit on x [m, d], y [m] (max_depth 0:
    unlimited; x_f <= threshold goes left). Only the nodes on the query's path are grown: the
    other branches do not change its leaf."""
    depth = 0
    while len(y) >= 2 and (max_depth == 0 or depth < max_depth):
        split = best_split(x, y)
        if split is None:
            break
        feature, threshold = split
        side = (x[:, feature] <= threshold) == (query[feature] <= threshold)
        x, y, depth = x[side], y[side], depth + 1
    return float(y.mean())


def decision_tree(prompt: PairPrompt, max_depth: int = 4) -> np.ndarray:
    """[B, n]: each point's prediction by the tree fit on the pairs before it (float64 fits)."""
    x, y = np.asarray(prompt.xs, np.float64), np.asarray(prompt.ys, np.float64)
    out = np.zeros(y.shape, np.float32)
    for b in range(x.shape[0]):
        for i in range(1, x.shape[1]):
            out[b, i] = tree_prediction(x[b, :i], y[b, :i], x[b, i], max_depth)
    return out


@dataclass(frozen=True)
class TreeOptions:
    max_depth: int = 4  # Garg's 4; 0: unlimited (sklearn's max_depth=None)

    def check(self) -> None:
        require_int("max_depth", self.max_depth, 0)


# ---------------------------------------------------------------------------------------------
# xgboost


def _xgboost():
    """The xgboost module, or a one-line RuntimeError saying how to install it."""
    try:
        import xgboost
    except ImportError:
        raise RuntimeError(
            f"the xgboost baseline needs the xgboost package: pip install xgboost-cpu=={XGBOOST_VERSION}"
        ) from None
    return xgboost


def xgboost_predictions(prompt: PairPrompt, n_jobs: int = 0) -> np.ndarray:
    """[B, n]: each point's prediction by gradient-boosted trees at XGBRegressor()'s defaults
    (squared error, 100 rounds, every other parameter the booster's default) fit on the pairs
    before it, through XGBoost's own training API (XGBRegressor would also need scikit-learn)."""
    xgb = _xgboost()
    params = {"objective": "reg:squarederror", **({"nthread": n_jobs} if n_jobs else {})}
    x, y = np.asarray(prompt.xs, np.float32), np.asarray(prompt.ys, np.float32)
    out = np.zeros(y.shape, np.float32)
    for b in range(x.shape[0]):
        for i in range(1, x.shape[1]):
            booster = xgb.train(params, xgb.DMatrix(x[b, :i], label=y[b, :i]), num_boost_round=XGBOOST_ROUNDS)
            out[b, i] = booster.predict(xgb.DMatrix(x[b, i : i + 1]))[0]
    return out


@dataclass(frozen=True)
class XGBoostOptions:
    n_jobs: int = 0  # threads per fit; 0: XGBoost's default (all cores)

    def check(self) -> None:
        require_int("n_jobs", self.n_jobs, 0)


# ---------------------------------------------------------------------------------------------
# two_layer_nn


def init_network(key, d: int, hidden: int) -> dict:
    """PyTorch's nn.Linear initialisation of Linear(d, hidden), Linear(hidden, 1): weights and
    biases U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    k1, k2, k3, k4 = jax.random.split(key, 4)
    first, second = 1 / np.sqrt(d), 1 / np.sqrt(hidden)
    uniform = lambda k, shape, bound: jax.random.uniform(k, shape, jnp.float32, -bound, bound)
    return {
        "w1": uniform(k1, (d, hidden), first),
        "b1": uniform(k2, (hidden,), first),
        "w2": uniform(k3, (hidden,), second),
        "b2": uniform(k4, (), second),
    }


def network(params: dict, x):
    """x [..., d] -> [...]: Linear -> ReLU -> Linear."""
    return jax.nn.relu(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def prefix_key(seed, i):
    """The key of prefix i: its network's initialisation is drawn from fold_in(key, 0), its
    minibatch at step t from fold_in(fold_in(key, 1), t)."""
    return jax.random.fold_in(jax.random.key(seed), i)


def minibatch_mask(key, i, n: int, batch_size: int):
    """[n] float: the first min(i, batch_size) of a random permutation of the pairs j < i."""
    scores = jnp.where(jnp.arange(n) < i, jax.random.uniform(key, (n,)), jnp.inf)
    rank = jnp.argsort(jnp.argsort(scores))
    return (rank < jnp.minimum(i, batch_size)).astype(jnp.float32)


@partial(jax.jit, static_argnames=("hidden", "steps"))
def _two_layer_nn(xs, ys, seed, learning_rate, batch_size, *, hidden, steps):
    n, d = xs.shape[1], xs.shape[2]
    optimizer = make_optimizer(Optimizer("adam", learning_rate), steps)

    def loss(params, x, y, mask):
        return jnp.sum(mask * (network(params, x) - y) ** 2) / jnp.maximum(mask.sum(), 1.0)

    step_on = gradient_step(loss, optimizer)

    def fit_and_predict(key, i, x, y):
        """One prompt x [n, d], y [n] at prefix i: train from the prefix's init, predict x_i."""
        params = init_network(jax.random.fold_in(key, 0), d, hidden)
        batches = jax.random.fold_in(key, 1)

        def step(carry, t):
            params, state = carry
            mask = minibatch_mask(jax.random.fold_in(batches, t), i, n, batch_size)
            params, state, _ = step_on(params, state, x, y, mask)
            return (params, state), None

        (params, _), _ = jax.lax.scan(step, (params, optimizer.init(params)), jnp.arange(steps))
        return jnp.where(i > 0, network(params, x[i]), 0.0)

    prefixes = jnp.arange(n)
    keys = jax.vmap(lambda i: prefix_key(seed, i))(prefixes)
    per_prompt = jax.vmap(fit_and_predict, in_axes=(None, None, 0, 0))  # over the batch
    return jax.vmap(per_prompt, in_axes=(0, 0, None, None), out_axes=1)(keys, prefixes, xs, ys)


def two_layer_nn(
    prompt: PairPrompt,
    hidden: int = 100,
    steps: int = 100,
    learning_rate: float = 5e-3,
    batch_size: int = 100,
    seed: int = 0,
):
    """[B, n]: each point's prediction by a fresh 2-layer ReLU network trained on the pairs before it."""
    return _two_layer_nn(
        jnp.asarray(prompt.xs, jnp.float32),
        jnp.asarray(prompt.ys, jnp.float32),
        seed,
        jnp.float32(learning_rate),
        batch_size,
        hidden=hidden,
        steps=steps,
    )


@dataclass(frozen=True)
class NetworkOptions:
    hidden: int = 100  # Garg's hidden_size
    steps: int = 100  # Adam steps per prefix
    learning_rate: float = 5e-3
    batch_size: int = 100  # minibatch: min(i, batch_size) of the i prefix pairs
    seed: int = 0  # initialisations and minibatches

    def check(self) -> None:
        require_int("hidden", self.hidden, 1)
        require_int("steps", self.steps, 0)
        require_number("learning_rate", self.learning_rate, 0.0, open_low=True)
        require_int("batch_size", self.batch_size, 1)
        require_int("seed", self.seed, 0, 2**31 - 1)


BASELINES.register(
    "decision_tree",
    TreeOptions,
    applies=_all_regression,
    doc="CART regression tree per prefix (Garg's max_depth 4; 0: unlimited)",
)(lambda options: lambda prompt: decision_tree(prompt, options.max_depth))
BASELINES.register(
    "xgboost",
    XGBoostOptions,
    applies=_all_regression,
    doc=f"XGBRegressor() per prefix (optional: pip install xgboost-cpu=={XGBOOST_VERSION})",
)(lambda options: lambda prompt: xgboost_predictions(prompt, options.n_jobs))
BASELINES.register(
    "two_layer_nn",
    NetworkOptions,
    applies=_all_regression,
    doc="a fresh 2-layer ReLU network per prefix, Adam on a minibatch (Garg's GDModel)",
)(
    lambda options: (
        lambda prompt: two_layer_nn(
            prompt, options.hidden, options.steps, options.learning_rate, options.batch_size, options.seed
        )
    )
)
