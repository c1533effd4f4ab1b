"""The training-dynamics study (seed 003): data, models against NumPy, the exact
ATTN_M / cubic-MLP equivalence, the rank-one staircase, the runner and the analysis."""
import json

import jax
import numpy as np
import pytest

from analysis.dynamics import drops, plateaus, principal_levels
from src import rundir as names
from src.cli.linattn import main as linattn_main
from src.loop import train as loop_train
from src.systems.dynamics import DynamicsSettings, DynamicsTrain, DynamicsTrainer, moments, quadratic_loss


def DynamicsTrainConfig(lr=None, **kw):        # the fields under their earlier names
    return DynamicsTrain(**kw, **({} if lr is None else {"learning_rate": lr}))


def train(settings, sets=None, init_params=None):
    """The trajectory of a run through the one loop: loss, singular_values, ... as attributes."""
    from types import SimpleNamespace
    trainer = DynamicsTrainer(settings.validate(), sets, init_params)
    with trainer.context():
        result = loop_train(trainer)
        return SimpleNamespace(**trainer.trajectory(result), diverged=result.diverged)
from src.models.linattn import mlp_params_from_restricted
from src.registry import choice, registry
from src.rundir import RunDir
from src.tasks.linattn import DynamicsTaskConfig, input_eigenvalues, make_sets

SMALL = DynamicsTaskConfig(in_dim=3, seq_len=8, trainset_size=200, testset_size=50, seed=1)


def model(name, **options):
    return registry("dynamics_model").get(name).build(choice("dynamics_model", name, **options).options)


def test_data_follows_the_seed_definition():
    assert np.allclose(input_eigenvalues(4, False), [0.1, 0.2, 0.3, 0.4])
    assert np.allclose(input_eigenvalues(4, True), 0.25)
    sets = make_sets(DynamicsTaskConfig(in_dim=4, trainset_size=4000, icl=0.5, testset_size=100))
    train_set = sets["train"]
    assert train_set.tokens.shape == (4000, 32, 5)
    assert np.all(train_set.tokens[:, -1, -1] == 0.0)                 # the query's y is hidden
    x = train_set.tokens[:, :-1, :-1]
    w = np.linalg.lstsq(x[0], train_set.tokens[0, :-1, -1], rcond=None)[0]
    assert np.allclose(train_set.tokens[0, -1, :-1] @ w, train_set.targets[0])   # y_q = w·x_q
    per_sequence_w = np.stack([np.linalg.lstsq(x[p], train_set.tokens[p, :-1, -1], rcond=None)[0]
                               for p in range(4000)])
    shared = per_sequence_w[2000:]
    assert np.allclose(shared, shared[0], atol=1e-8)                    # 1 - icl share w*
    own = per_sequence_w[:2000]
    assert np.allclose(own.T @ own / 2000, np.eye(4), atol=1e-8)        # whitened
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
    np.testing.assert_allclose(merged.predict(p, tokens, False),
                               _numpy_attention(np.asarray(p["value"]), np.asarray(p["kq"]), data.tokens),
                               rtol=1e-4, atol=1e-4)
    separate = model("attn_separate", heads=2, rank=2)
    q = separate.init(key, 3, 0.5)
    maps = np.einsum("hri,hrj->hij", q["key"], q["query"])
    np.testing.assert_allclose(separate.predict(q, tokens, False),
                               _numpy_attention(np.asarray(q["value"]), maps, data.tokens),
                               rtol=1e-4, atol=1e-4)
    for m, params in ((merged, p), (separate, q), (model("cubic_mlp", heads=2), None)):
        params = params or m.init(key, 3, 0.5)
        direct = float(np.mean((np.asarray(m.predict(params, tokens, False)) - data.targets) ** 2))
        moment = float(quadratic_loss(m.coefficients(params),
                                      moments(lambda t: m.features(t, False), data, np.float32)))
        assert abs(moment - direct) <= 1e-4 * direct


def test_restricted_attention_is_the_cubic_mlp_exactly():
    """Same function, mapped parameters, same optimiser: the same trajectory (float64)."""
    data = make_sets(SMALL)
    attn, mlp = model("attn_merged", heads=2, restricted=True), model("cubic_mlp", heads=2)
    init = attn.init(jax.random.key(3), 3, 0.1)
    tokens = jax.numpy.asarray(data["train"].tokens)
    np.testing.assert_allclose(attn.predict(init, tokens, False),
                               mlp.predict(mlp_params_from_restricted(init), tokens, False),
                               rtol=1e-4, atol=1e-7)
    cfg = DynamicsTrainConfig(epochs=2500, lr=0.01, init=0.1, log_every=250, float64=True)
    a = train(DynamicsSettings(SMALL, choice("dynamics_model", "attn_merged", heads=2, restricted=True), cfg),
              data, init)
    m = train(DynamicsSettings(SMALL, choice("dynamics_model", "cubic_mlp", heads=2), cfg), data,
              mlp_params_from_restricted(init))
    assert len(a.loss) == len(m.loss) == 2500
    assert np.max(np.abs(a.loss - m.loss) / np.abs(m.loss)) <= 1e-6
    assert m.loss[-1] < 0.5 * m.loss[0]                                 # it did learn something


def test_rank_one_separate_heads_learn_one_component_at_a_time():
    task = DynamicsTaskConfig(in_dim=4, seq_len=32, trainset_size=1000)
    settings = DynamicsSettings(task, choice("dynamics_model", "attn_separate", heads=5, rank=1),
                                DynamicsTrainConfig(epochs=6001, lr=0.02, init=1e-2, log_every=100))
    result = train(settings)
    found = plateaus(result.loss)
    theory = principal_levels(make_sets(task)["train"], task)
    assert len(drops(result.loss, found)) == 4 and len(found) == 5
    for plateau, level in zip(found, theory):
        assert abs(plateau["level"] - level) <= 0.03


def test_plateau_rule_on_a_synthetic_staircase():
    loss = np.concatenate([np.full(300, 1.0), np.linspace(1.0, 0.5, 20), np.full(400, 0.5),
                           np.linspace(0.5, 0.2, 10), np.full(300, 0.2)])
    found = plateaus(loss)
    assert [round(p["level"], 3) for p in found] == [1.0, 0.5, 0.2]
    # first epochs below sqrt(1 · 0.5) = 0.707 (ramp index 12) and sqrt(0.5 · 0.2) = 0.316 (index 6)
    assert [d["epoch"] for d in drops(loss, found)] == [300 + 12, 720 + 6]


@pytest.mark.parametrize("flags, words", [
    (["--model", "attnS", "--rank", "5", "--in_dim", "4"], "rank"),
    (["--in_dim", "0"], "--in_dim"), (["--trainset_size", "-3"], "--trainset_size"),
    (["--epoch", "0"], "--epoch"), (["--icl", "1.5"], "--icl"), (["--icl", "-0.1"], "--icl"),
    (["--model", "mlp"], "--cubic_feat"), (["--lr", "0"], "--lr"), (["--init", "nan"], "--init"),
    (["--model", "attnX"], "--model"), (["--rank", "2"], "--rank"),
])
def test_bad_flags_exit_2_with_one_line(flags, words, tmp_path, capsys):
    out = tmp_path / "never"
    try:
        code = linattn_main([*flags, "--out", str(out)])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2 and not out.exists()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines


@pytest.mark.parametrize("argv", [
    ["--model", "attnM", "--head", "8", "--init", "1e-6", "--show"],
    ["--model", "mlp", "--cubic_feat", "--head", "8", "--init", "1e-6", "--show"],
    ["--model", "attnS", "--head", "5", "--init", "1e-2", "--epoch", "10001", "--lr", "0.02", "--show"],
    ["--model", "attnS", "--head", "9", "--KQ_dim", "1", "--in_dim", "8", "--seq_len", "32",
     "--init", "5e-3", "--trainset_size", "80000", "--epoch", "20001", "--lr", "0.02"],
    ["--model", "attnM", "--icl", "0.4", "--head", "8", "--testset", "5000", "--init", "1e-6",
     "--white_cov", "--lr", "0.0005", "--epoch", "4001"],
])
def test_the_seed_command_lines_run(argv, tmp_path):
    """The seed's README commands (sizes cut by trailing flags; argparse keeps the last)."""
    out = tmp_path / "run"
    small = ["--epoch", "60", "--trainset_size", "300", "--log_every", "20", "--quiet"]
    small += ["--testset", "40"] if "--testset" in argv else []
    assert linattn_main([*argv, *small, "--out", str(out)]) == 0
    run = RunDir(out)
    assert run.is_trained() and run.is_complete()
    summary = run.load_json(names.SUMMARY)
    assert summary["epochs"] == 60 and summary["status"] == "complete"
    with np.load(out / names.DYNAMICS, allow_pickle=False) as dyn:
        assert dyn["loss"].shape == (60,) and dyn["singular_values"].shape[0] == 4
        if "--testset" in argv:
            assert dyn["test_icl_loss"].shape == dyn["test_iwl_loss"].shape == (60,)
    assert ("--show" in argv) == (out / names.LOSS_PNG).exists()
    json.loads((out / names.DYNAMICS_JSON).read_text())


def test_same_settings_same_trajectory_bit_for_bit():
    settings = DynamicsSettings(SMALL, choice("dynamics_model", "attn_separate", heads=2, rank=1),
                                DynamicsTrainConfig(epochs=300, lr=0.05, init=0.05, log_every=50))
    a, b = train(settings), train(settings)
    assert np.array_equal(a.loss, b.loss) and np.array_equal(a.singular_values, b.singular_values)
    sgd = DynamicsSettings(SMALL, settings.model, DynamicsTrainConfig(
        epochs=50, lr=0.05, init=0.05, optimizer="sgd", batch_size=32, log_every=25))
    assert np.array_equal(train(sgd).loss, train(sgd).loss)
