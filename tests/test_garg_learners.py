"""Garg et al.'s prefix learners (baselines/garg_learners.py): the NumPy regression tree against an
exhaustive search written out plainly here, the 2-layer network's initialisation, fit, causality,
determinism and minibatch, and the xgboost entry's message when the package is missing."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from baselines.garg_learners import (
    NetworkOptions,
    TreeOptions,
    XGBoostOptions,
    decision_tree,
    init_network,
    prefix_key,
    two_layer_nn,
)
from src.registry import load_entries, registry
from src.tasks.pairs import pair_prompt


# ---------------------------------------------------------------------------------------------
# decision_tree against a brute force


def sse(y):
    return float(sum((v - sum(y) / len(y)) ** 2 for v in y))


def grow(x, y, depth, max_depth):
    """The whole tree, plainly: every feature, every midpoint; a strictly better split (beyond
    1e-9 of the node's error) replaces the best so far, so ties keep the first (feature, threshold)."""
    node_error = sse(y)
    if len(y) < 2 or (max_depth and depth >= max_depth) or node_error == 0:
        return ("leaf", sum(y) / len(y))
    best = None
    for f in range(len(x[0])):
        values = sorted(set(row[f] for row in x))
        for a, b in zip(values, values[1:]):
            t = (a + b) / 2
            left = [v for row, v in zip(x, y) if row[f] <= t]
            right = [v for row, v in zip(x, y) if row[f] > t]
            error = sse(left) + sse(right)
            if best is None or error < best[0] - 1e-9 * node_error:
                best = (error, f, t)
    if best is None or not best[0] < node_error - 1e-9 * node_error:
        return ("leaf", sum(y) / len(y))
    _, f, t = best
    below = [k for k, row in enumerate(x) if row[f] <= t]
    above = [k for k, row in enumerate(x) if row[f] > t]
    return (
        "split",
        f,
        t,
        grow([x[k] for k in below], [y[k] for k in below], depth + 1, max_depth),
        grow([x[k] for k in above], [y[k] for k in above], depth + 1, max_depth),
    )


def predict(tree, row):
    while tree[0] == "split":
        tree = tree[3] if row[tree[1]] <= tree[2] else tree[4]
    return tree[1]


def brute_force(xs, ys, max_depth):
    x, y = np.asarray(xs, np.float64).tolist(), np.asarray(ys, np.float64).tolist()
    out = np.zeros(np.shape(ys))
    for b in range(len(x)):
        for i in range(1, len(x[b])):
            out[b, i] = predict(grow(x[b][:i], y[b][:i], 0, max_depth), x[b][i])
    return out


@pytest.mark.parametrize("max_depth", [1, 2, 0])
def test_tree_equals_the_exhaustive_search(max_depth):
    rng = np.random.default_rng(max_depth)
    xs = rng.normal(size=(3, 14, 3)).astype(np.float32)
    xs[:, :, 2] = rng.integers(0, 3, size=(3, 14))  # repeated values: fewer thresholds, ties
    ys = rng.normal(size=(3, 14)).astype(np.float32)
    ys[0, 5:9] = 0.5  # repeated labels
    got = decision_tree(pair_prompt(xs, ys), max_depth)
    assert np.abs(got - brute_force(xs, ys, max_depth)).max() <= 1e-6
    assert np.all(got[:, 0] == 0)


def test_tree_recovers_a_depth_two_step_function_exactly():
    grid = np.array([(a, b) for a in range(5) for b in range(5)], np.float32)
    step = lambda x: np.where(x[:, 0] < 2, 0.0, np.where(x[:, 1] < 3, 1.0, 3.0))
    rng = np.random.default_rng(0)
    xs = np.concatenate([grid[rng.permutation(25)], grid[rng.permutation(25)]])[None]  # [1, 50, 2]
    ys = step(xs[0])[None].astype(np.float32)
    for depth in (2, 0):
        assert np.array_equal(decision_tree(pair_prompt(xs, ys), depth)[0, 25:], ys[0, 25:])
    assert not np.array_equal(decision_tree(pair_prompt(xs, ys), 1)[0, 25:], ys[0, 25:])  # one split cannot


def test_tree_uses_only_the_pairs_before_each_point():
    rng = np.random.default_rng(1)
    xs, ys = rng.normal(size=(2, 10, 2)), rng.normal(size=(2, 10))
    base = decision_tree(pair_prompt(xs, ys), 0)
    for i in (0, 3, 7):
        changed = ys.copy()
        changed[:, i:] = rng.normal(size=changed[:, i:].shape)
        assert np.array_equal(decision_tree(pair_prompt(xs, changed), 0)[:, : i + 1], base[:, : i + 1])


# ---------------------------------------------------------------------------------------------
# two_layer_nn


def linear_prompts(b=3, n=16, d=2, seed=0):
    xs = jax.random.normal(jax.random.key(seed), (b, n, d))
    return xs, xs @ jnp.array([1.0, -2.0])


def test_untrained_network_is_the_torch_initialisation():
    xs, ys = linear_prompts()
    got = np.asarray(two_layer_nn(pair_prompt(xs, ys), hidden=8, steps=0, seed=3))
    assert np.all(got[:, 0] == 0)
    i = 2
    p = {k: np.asarray(v, np.float64) for k, v in init_network(jax.random.fold_in(prefix_key(3, i), 0), 2, 8).items()}
    assert np.abs(p["w1"]).max() <= 1 / np.sqrt(2) and np.abs(p["b1"]).max() <= 1 / np.sqrt(2)
    assert np.abs(p["w2"]).max() <= 1 / np.sqrt(8) and abs(p["b2"]) <= 1 / np.sqrt(8)
    assert np.abs(p["w1"]).max() > 0.5 / np.sqrt(2)  # spread over the interval, not tiny
    x = np.asarray(xs, np.float64)[:, i]
    by_hand = np.maximum(x @ p["w1"] + p["b1"], 0) @ p["w2"] + p["b2"]
    assert np.abs(got[:, i] - by_hand).max() <= 1e-5


def test_network_learns_a_linear_function_causally_and_deterministically():
    xs, ys = linear_prompts()
    got = np.asarray(two_layer_nn(pair_prompt(xs, ys), hidden=32))
    late = slice(8, None)
    error = np.mean((got[:, late] - np.asarray(ys)[:, late]) ** 2)
    zero = np.mean(np.asarray(ys)[:, late] ** 2)
    assert error <= 0.1 * zero  # measured 0.013 x on these prompts
    assert np.array_equal(np.asarray(two_layer_nn(pair_prompt(xs, ys), hidden=32)), got)
    later = np.asarray(ys).copy()
    later[:, 9:] += 5.0
    moved = np.asarray(two_layer_nn(pair_prompt(xs, jnp.asarray(later)), hidden=32))
    assert np.array_equal(moved[:, :10], got[:, :10]) and not np.array_equal(moved[:, 10:], got[:, 10:])


def test_minibatch_is_min_of_prefix_and_batch_size():
    xs, ys = linear_prompts()
    full = np.asarray(two_layer_nn(pair_prompt(xs, ys), hidden=32))
    one = np.asarray(two_layer_nn(pair_prompt(xs, ys), hidden=32, batch_size=1))
    assert np.array_equal(one[:, :2], full[:, :2])  # prefixes of one pair: the same minibatch
    assert np.abs(one[:, 2:] - full[:, 2:]).min(axis=0).max() > 1e-3
    at_prefix = np.asarray(two_layer_nn(pair_prompt(xs, ys), hidden=32, batch_size=15))
    assert np.array_equal(at_prefix, full)  # every prefix has at most 15 pairs


# ---------------------------------------------------------------------------------------------
# the registry entries and xgboost


def test_xgboost_missing_raises_one_line_with_the_install_command(monkeypatch):
    import sys

    load_entries()
    monkeypatch.setitem(sys.modules, "xgboost", None)
    entry = registry("baseline").get("xgboost")
    predictor = entry.build(entry.default_options())
    with pytest.raises(RuntimeError, match="pip install xgboost-cpu==") as err:
        predictor(pair_prompt(np.zeros((1, 3, 2), np.float32), np.zeros((1, 3), np.float32)))
    assert "\n" not in str(err.value)


def test_entries_are_registered_with_checked_options():
    from src.settings import SettingsError

    load_entries()
    baselines = registry("baseline")
    assert {"decision_tree", "xgboost", "two_layer_nn"} <= set(baselines.names())
    for name in ("decision_tree", "xgboost", "two_layer_nn"):
        entry = baselines.get(name)
        assert entry.doc and entry.is_applicable("relu_2nn_regression")
        assert entry.is_applicable("decision_tree") and not entry.is_applicable("conjunction")
        entry.default_options().check()
    for bad in (
        TreeOptions(max_depth=-1),
        XGBoostOptions(n_jobs=-1),
        NetworkOptions(hidden=0),
        NetworkOptions(steps=-1),
        NetworkOptions(learning_rate=0.0),
        NetworkOptions(batch_size=0),
    ):
        with pytest.raises(SettingsError):
            bad.check()
    tree = baselines.get("decision_tree")
    xs, ys = linear_prompts(b=2, n=6)
    assert np.array_equal(
        tree.build(dataclasses.replace(tree.default_options(), max_depth=2))(pair_prompt(xs, ys)),
        decision_tree(pair_prompt(xs, ys), 2),
    )
