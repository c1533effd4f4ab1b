"""The training-dynamics study (Zhang et al., ICML 2025): data, models against NumPy, the exact
ATTN_M / cubic-MLP equivalence, the rank-one staircase and the analysis (its command line:
tests/test_dynamics_command_line.py)."""

import jax
import numpy as np
import pytest

from analysis.dynamics import drops, plateaus, principal_levels
from src.loop import train as loop_train
from src.models.dynamics import mlp_params_from_restricted
from src.registry import choice, registry
from src.systems.dynamics import DynamicsSettings, DynamicsTrain, DynamicsTrainer, moments, quadratic_loss
from src.tasks.dynamics import DynamicsTaskConfig, input_eigenvalues, make_sets


def DynamicsTrainConfig(lr=None, **kw):  # the fields under their earlier names
    return DynamicsTrain(**kw, **({} if lr is None else {"learning_rate": lr}))


def train(settings, sets=None, init_params=None):
    """The trajectory of a run through the one loop: loss, singular_values, ... as attributes."""
    from types import SimpleNamespace

    trainer = DynamicsTrainer(settings.validate(), sets, init_params)
    with trainer.context():
        result = loop_train(trainer)
        return SimpleNamespace(**trainer.trajectory(result), diverged=result.diverged)


SMALL = DynamicsTaskConfig(in_dim=3, seq_len=8, trainset_size=200, testset_size=50, seed=1)


def model(name, **options):
    return registry("dynamics_model").get(name).build(choice("dynamics_model", name, **options).options)


def test_data_follows_the_seed_definition():
    assert np.allclose(input_eigenvalues(4, False), [0.1, 0.2, 0.3, 0.4])
    assert np.allclose(input_eigenvalues(4, True), 0.25)
    sets = make_sets(DynamicsTaskConfig(in_dim=4, trainset_size=4000, icl=0.5, testset_size=100))
    train_set = sets["train"]
    assert train_set.tokens.shape == (4000, 32, 5)
    assert np.all(train_set.tokens[:, -1, -1] == 0.0)  # the query's y is hidden
    x = train_set.tokens[:, :-1, :-1]
    w = np.linalg.lstsq(x[0], train_set.tokens[0, :-1, -1], rcond=None)[0]
    assert np.allclose(train_set.tokens[0, -1, :-1] @ w, train_set.targets[0])  # y_q = w·x_q
    per_sequence_w = np.stack([np.linalg.lstsq(x[p], train_set.tokens[p, :-1, -1], rcond=None)[0] for p in range(4000)])
    shared = per_sequence_w[2000:]
    assert np.allclose(shared, shared[0], atol=1e-8)  # 1 - icl share w*
    own = per_sequence_w[:2000]
    assert np.allclose(own.T @ own / 2000, np.eye(4), atol=1e-8)  # whitened
    cov = np.cov(x.reshape(-1, 4).T)
    assert np.allclose(np.diag(cov), [0.1, 0.2, 0.3, 0.4], atol=0.01)
    iwl = sets["test_iwl"]
    assert np.allclose(iwl.tokens[:, -1, :-1] @ shared[0], iwl.targets)


def _numpy_attention(values, maps, tokens):
    """ŷ_p = Σ_h v_hᵀ (Σ_t x̃_t x̃_tᵀ) W_h x̃_q with loops."""
    out = np.zeros(len(tokens))
    for p, seq in enumerate(tokens):
        gram = sum(np.outer(tok, tok) for tok in seq)
        out[p] = sum(v @ gram @ w @ seq[-1] for v, w in zip(values, maps))
    return out


def test_models_match_numpy_and_the_moment_form():
    data = make_sets(SMALL)["train"]
    tokens = jax.numpy.asarray(data.tokens)
    key = jax.random.key(0)
    merged = model("attn_merged", heads=3)
    p = merged.init(key, 3, 0.5)
    np.testing.assert_allclose(
        merged.predict(p, tokens, False),
        _numpy_attention(np.asarray(p["value"]), np.asarray(p["kq"]), data.tokens),
        rtol=1e-4,
        atol=1e-4,
    )
    separate = model("attn_separate", heads=2, rank=2)
    q = separate.init(key, 3, 0.5)
    maps = np.einsum("hri,hrj->hij", q["key"], q["query"])
    np.testing.assert_allclose(
        separate.predict(q, tokens, False),
        _numpy_attention(np.asarray(q["value"]), maps, data.tokens),
        rtol=1e-4,
        atol=1e-4,
    )
    for m, params in ((merged, p), (separate, q), (model("cubic_mlp", heads=2), None)):
        params = params or m.init(key, 3, 0.5)
        direct = float(np.mean((np.asarray(m.predict(params, tokens, False)) - data.targets) ** 2))
        moment = float(
            quadratic_loss(m.coefficients(params), moments(lambda t: m.features(t, False), data, np.float32))
        )
        assert abs(moment - direct) <= 1e-4 * direct


def test_restricted_attention_is_the_cubic_mlp_exactly():
    """Same function, mapped parameters, same optimiser: the same trajectory (float64)."""
    data = make_sets(SMALL)
    attn, mlp = model("attn_merged", heads=2, restricted=True), model("cubic_mlp", heads=2)
    init = attn.init(jax.random.key(3), 3, 0.1)
    tokens = jax.numpy.asarray(data["train"].tokens)
    np.testing.assert_allclose(
        attn.predict(init, tokens, False),
        mlp.predict(mlp_params_from_restricted(init), tokens, False),
        rtol=1e-4,
        atol=1e-7,
    )
    cfg = DynamicsTrainConfig(epochs=2500, lr=0.01, init=0.1, log_every=250, float64=True)
    a = train(
        DynamicsSettings(SMALL, choice("dynamics_model", "attn_merged", heads=2, restricted=True), cfg), data, init
    )
    m = train(
        DynamicsSettings(SMALL, choice("dynamics_model", "cubic_mlp", heads=2), cfg),
        data,
        mlp_params_from_restricted(init),
    )
    assert len(a.loss) == len(m.loss) == 2500
    assert np.max(np.abs(a.loss - m.loss) / np.abs(m.loss)) <= 1e-6
    assert m.loss[-1] < 0.5 * m.loss[0]  # it did learn something


def test_rank_one_separate_heads_learn_one_component_at_a_time():
    task = DynamicsTaskConfig(in_dim=4, seq_len=32, trainset_size=1000)
    settings = DynamicsSettings(
        task,
        choice("dynamics_model", "attn_separate", heads=5, rank=1),
        DynamicsTrainConfig(epochs=6001, lr=0.02, init=1e-2, log_every=100, init_convention="uniform"),
    )  # 5-11x larger: quicker
    result = train(settings)
    found = plateaus(result.loss)
    theory = principal_levels(make_sets(task)["train"], task)
    assert len(drops(result.loss, found)) == 4 and len(found) == 5
    for plateau, level in zip(found, theory):
        assert abs(plateau["level"] - level) <= 0.03


def test_plateau_rule_on_a_synthetic_staircase():
    loss = np.concatenate(
        [np.full(300, 1.0), np.linspace(1.0, 0.5, 20), np.full(400, 0.5), np.linspace(0.5, 0.2, 10), np.full(300, 0.2)]
    )
    found = plateaus(loss)
    assert [round(p["level"], 3) for p in found] == [1.0, 0.5, 0.2]
    # first epochs below sqrt(1 · 0.5) = 0.707 (ramp index 12) and sqrt(0.5 · 0.2) = 0.316 (index 6)
    assert [d["epoch"] for d in drops(loss, found)] == [300 + 12, 720 + 6]


def test_same_settings_same_trajectory_bit_for_bit():
    settings = DynamicsSettings(
        SMALL,
        choice("dynamics_model", "attn_separate", heads=2, rank=1),
        DynamicsTrainConfig(epochs=300, lr=0.05, init=0.05, log_every=50),
    )
    a, b = train(settings), train(settings)
    assert np.array_equal(a.loss, b.loss) and np.array_equal(a.singular_values, b.singular_values)
    sgd = DynamicsSettings(
        SMALL,
        settings.model,
        DynamicsTrainConfig(epochs=50, lr=0.05, init=0.05, optimizer="sgd", batch_size=32, log_every=25),
    )
    assert np.array_equal(train(sgd).loss, train(sgd).loss)


def _draws(m, key, in_dim, scale):
    return m.init(key, in_dim, scale, "uniform")


def test_original_init_scales_each_layer_and_zeroes_what_the_original_zeroes():
    """attnS: std init/√(entries of the torch layer): W_K, W_Q of Linear(D+1 -> H·R) and W_V of
    Linear(D+1 -> H·(D+1)); W_K's y column and the value's x entries 0. attnM and the MLP: std
    init, attnM's W_KQ[key y, query x] and value x entries 0. The same draws as `uniform`."""
    key, d, h, r, scale = jax.random.key(4), 4, 5, 1, 1e-2
    separate = model("attn_separate", heads=h, rank=r)
    plain, orig = _draws(separate, key, d, scale), separate.init(key, d, scale)
    for name, entries in (("key", h * r * (d + 1)), ("query", h * r * (d + 1)), ("value", h * (d + 1) ** 2)):
        expected = np.asarray(plain[name]) / np.sqrt(entries)
        if name == "key":
            expected[..., -1] = 0.0
        if name == "value":
            expected[:, :-1] = 0.0
        np.testing.assert_allclose(np.asarray(orig[name]), expected, rtol=1e-6)
    assert np.sqrt(h * r * (d + 1)) == 5 and np.sqrt(h * (d + 1) ** 2) == np.sqrt(125)  # 0.01/5, 0.01/√125
    paper = separate.init(key, d, scale, "paper")  # the code of the paper's time: per-head layers
    key_paper = np.asarray(plain["key"]) / np.sqrt(r * (d + 1))
    key_paper[..., -1] = 0.0
    value_paper = np.asarray(plain["value"]).copy()
    value_paper[:, :-1] = 0.0
    np.testing.assert_allclose(np.asarray(paper["key"]), key_paper, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(paper["value"]), value_paper, rtol=1e-6)
    merged = model("attn_merged", heads=3)
    plain, orig = _draws(merged, key, d, scale), merged.init(key, d, scale)
    kq, value = np.asarray(plain["kq"]).copy(), np.asarray(plain["value"]).copy()
    kq[:, -1, :-1], value[:, :-1] = 0.0, 0.0
    assert np.array_equal(orig["kq"], kq) and np.array_equal(orig["value"], value)
    mlp = model("cubic_mlp", heads=3)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(mlp.init(key, d, scale)), jax.tree.leaves(_draws(mlp, key, d, scale)))
    )
    big = model("attn_separate", heads=64, rank=4).init(jax.random.key(0), 8, 1.0)  # the std itself
    query = np.asarray(big["query"])
    assert abs(query.std() * np.sqrt(query.size) - 1.0) < 0.02


def test_a_record_without_init_convention_was_trained_uniform():
    settings = DynamicsSettings(SMALL, choice("dynamics_model", "attn_merged"), DynamicsTrain())
    raw = settings.to_dict()
    assert DynamicsSettings.from_dict(raw).train.init_convention == "original"
    del raw["train"]["init_convention"]
    assert DynamicsSettings.from_dict(raw).train.init_convention == "uniform"
    assert "init_convention" not in raw["train"]  # the caller's mapping untouched


def test_drops_count_a_run_that_ends_or_starts_falling():
    ends = np.concatenate([np.full(3000, 0.82), 0.82 * np.exp(-np.linspace(0, 2, 1000))])
    found = plateaus(ends)
    falls = drops(ends, found)
    assert len(found) == 1 and len(falls) == 1 and falls[0]["to_plateau"] is None
    assert falls[0]["to_level"] == pytest.approx(ends[-1])
    starts = np.concatenate([0.3 + 0.7 * np.exp(-np.arange(200) / 20), np.full(2000, 0.3)])
    falls = drops(starts, plateaus(starts))
    assert len(falls) == 1 and falls[0]["from_plateau"] is None and falls[0]["to_plateau"] == 0
    assert drops(np.full(500, 0.7), plateaus(np.full(500, 0.7))) == []
