"""analysis.probes (Akyürek et al.'s residual-stream probes): the targets against their definitions,
the ridge probe against NumPy's least squares and exact on a planted linear code, the MLP probe on a
planted non-linear one, the hidden states read by interception against the model's own read-out,
and the analysis end to end on a tiny gpt2 run with its refusals."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jax
import numpy as np
import pytest

from analysis import probes
from src.models.residual import residual_stream
from src.pipeline import execute
from src.read_side import ExposesHiddenStates, has, read_side, systems_with
from src.rundir import names
from conftest import small, tiny_gpt2

ROOT = Path(__file__).resolve().parents[1]
FLAGS = dict(runner="test", argv=[], progress=False, analyses=())


def test_targets_against_their_definitions():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(6, 8, 3)), rng.normal(size=(6, 3))
    y = np.einsum("end,ed->en", x, w)
    t = probes.targets_of(x, y, w)
    np.testing.assert_allclose(t["w_ols"], w, atol=1e-10)  # noiseless, N >= d: OLS is w
    np.testing.assert_allclose(t["xty"][2], x[2].T @ y[2])
    short = probes.targets_of(x[:, :2], y[:, :2], w)["w_ols"]  # N < d: the minimum-norm solution
    np.testing.assert_allclose(short[1], np.linalg.lstsq(x[1, :2], y[1, :2], rcond=None)[0], atol=1e-10)


def test_ridge_against_numpy_and_exact_on_a_planted_linear_code():
    rng = np.random.default_rng(1)
    h = rng.normal(size=(400, 12))
    a, b = rng.normal(size=(12, 3)), rng.normal(size=3)
    fitted_a, fitted_b = probes.ridge_fit(h, h @ a + b, 0.0)
    np.testing.assert_allclose(fitted_a, a, atol=1e-10)
    np.testing.assert_allclose(fitted_b, b, atol=1e-10)
    noisy = h @ a + rng.normal(size=(400, 3))
    design = np.hstack([h, np.ones((400, 1))])
    reference = np.linalg.lstsq(design, noisy, rcond=None)[0]
    np.testing.assert_allclose(probes.ridge_fit(h, noisy, 0.0)[0], reference[:-1], atol=1e-10)
    code = np.tanh(h[:, :4]) @ rng.normal(size=(4, 12))  # states that are a linear code of the target
    target = h[:, :3]
    exact = probes.ridge_probe(h[:300], target[:300], h[300:], target[300:])
    assert exact["r2"] == pytest.approx(1.0, abs=1e-6)
    unrelated = probes.ridge_probe(code[:300], rng.normal(size=(300, 3)), code[300:], rng.normal(size=(100, 3)))
    assert unrelated["r2"] < 0.1
    assert probes.r_squared(target, target) == 1.0 and np.isnan(probes.r_squared(np.ones((3, 2)), np.ones((3, 2))))


def test_the_mlp_probe_decodes_a_non_linear_code_that_ridge_cannot():
    rng = np.random.default_rng(2)
    t = rng.normal(size=(1200, 2))
    h = np.hstack([t**2, np.abs(t), rng.normal(size=(1200, 4))])  # t encoded only through even functions
    target = t**2 - 1.0
    linear = probes.ridge_probe(h[:900], np.abs(t[:900]) * t[:900], h[900:], np.abs(t[900:]) * t[900:])
    assert linear["r2"] < 0.2  # an odd function of t: not linearly decodable from even features
    predicted = probes.mlp_probes(h[None, :900], target[None, :900], h[None, 900:], 64, 0)[0]
    assert probes.r_squared(predicted, target[900:]) > 0.95


@pytest.fixture(scope="module")
def gpt2_runs(tmp_path_factory):
    settings = tiny_gpt2(3, 7, 2)
    root = tmp_path_factory.mktemp("probes")
    trained = execute(settings, root / "gpt2", **FLAGS).run
    fixed = replace(settings, train=replace(settings.train, num_tasks=1)).validate()
    return trained, execute(fixed, root / "gpt2_fixed_w", **FLAGS).run


def test_hidden_states_end_in_the_models_own_prediction():
    """At the model's initial parameters (no run needed): the last layer's state, through the final
    norm and the read-out by hand, is the model's own prediction at the query."""
    settings = tiny_gpt2(3, 7, 2)
    assert systems_with(ExposesHiddenStates) == ("gpt2", "lm", "lsa") and has(ExposesHiddenStates, settings)
    side = read_side(ExposesHiddenStates, settings)
    model, params, state = side.untrained()
    prompt = side.fresh_prompts(jax.random.key(5), 9)
    hidden = side.hidden_states((model, params, state), prompt)
    assert hidden.shape == (3, 9, 16) and hidden.dtype == np.float64
    root = settings.model.preset
    norm = params[f"{root}/norm_final"]
    h = hidden[-1]
    normed = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    normed = normed * np.asarray(norm["scale"]) + np.asarray(norm["offset"])
    read = params[f"{root}/read_out"]
    by_hand = normed @ np.asarray(read["w"])[:, 0] + np.asarray(read.get("b", np.zeros(1)))[0]
    own = np.asarray(model.apply(params, state, prompt.xs, prompt.ys))[:, -1]
    np.testing.assert_allclose(by_hand, own, rtol=1e-4, atol=1e-5)
    assert not np.allclose(hidden[1], hidden[2])  # each layer moves the stream


@pytest.mark.parametrize("dims, points", [(3, 7), (4, 3)])
def test_the_y_mean_read_is_the_mean_of_the_stream_over_the_y_tokens_from_the_dth_pair(dims, points):
    """read "y_mean": the full residual stream [L + 1, B, T, D] averaged by hand over the y tokens
    (odd positions) of the context pairs d .. n - 1 (1-based; all of them when fewer than d precede
    the query: 4 dimensions, 2 context pairs)."""
    settings = tiny_gpt2(dims, points, 2)
    side = read_side(ExposesHiddenStates, settings)
    model, params, state = side.untrained()
    prompt = side.fresh_prompts(jax.random.key(2), 5)
    pooled = side.hidden_states((model, params, state), prompt, "y_mean")
    stream = np.asarray(residual_stream(settings.model, params, state, prompt.xs, prompt.ys), np.float64)
    pairs = range(dims - 1, points - 1) if points - 1 >= dims else range(points - 1)
    by_hand = np.mean([stream[:, :, 2 * i + 1] for i in pairs], axis=0)
    assert pooled.shape == by_hand.shape == (3, 5, 16)
    np.testing.assert_allclose(pooled, by_hand, rtol=1e-5, atol=1e-6)
    assert not np.allclose(pooled, side.hidden_states((model, params, state), prompt))  # not the query's


def test_the_last_y_read_is_the_stream_at_the_last_context_pairs_y_token():
    """read "last_y": the full residual stream at token 2(n − 1) − 1, the last context pair's y (the
    last position of Akyürek et al.'s prompts); the query after it changes nothing there (causal)."""
    settings = tiny_gpt2(3, 6, 2)
    side = read_side(ExposesHiddenStates, settings)
    model, params, state = side.untrained()
    prompt = side.fresh_prompts(jax.random.key(3), 5)
    last_y = side.hidden_states((model, params, state), prompt, "last_y")
    stream = np.asarray(residual_stream(settings.model, params, state, prompt.xs, prompt.ys), np.float64)
    assert last_y.shape == (3, 5, 16)
    np.testing.assert_allclose(last_y, stream[:, :, 2 * 5 - 1], rtol=1e-5, atol=1e-6)
    moved = prompt._replace(xs=prompt.xs.at[:, -1].add(1.0), ys=prompt.ys.at[:, -1].add(1.0))  # another query
    np.testing.assert_allclose(side.hidden_states((model, params, state), moved, "last_y"), last_y, atol=1e-6)
    assert not np.allclose(last_y, side.hidden_states((model, params, state), prompt))  # not the query's


@pytest.mark.parametrize("name, num_layers", [("lsa1", None), ("lsa_rec", 3)])
def test_von_oswalds_query_token_holds_x_q_and_minus_the_gd_prediction(name, num_layers):
    """The paper's construction (one LSA layer = one GD step) read at the query token: [x_q, 0]
    before the layer, [x_q, −ŷ] after each, ŷ the k-step GD prediction computed in NumPy."""
    from baselines.gd_step import gd_params

    settings = small(name, num_layers)
    side = read_side(ExposesHiddenStates, settings)
    assert side.reads == ("query",)
    model, _ = side.untrained()
    eta = 1.5
    prompt = side.fresh_prompts(jax.random.key(4), 300)
    hidden = side.hidden_states((model, gd_params(settings.task, settings.model, eta)), prompt)
    layers, d = settings.model.num_layers, settings.task.d
    assert hidden.shape == (layers + 1, 300, d + 1) and hidden.dtype == np.float64
    x, y = np.asarray(prompt.context_x, np.float64), np.asarray(prompt.context_y, np.float64)
    query = np.asarray(prompt.query_x, np.float64)
    np.testing.assert_allclose(hidden[0], np.concatenate([query, np.zeros((300, 1))], axis=1))
    w = np.zeros_like(query)
    for k in range(layers):
        w = w - eta * np.einsum("bn,bnd->bd", np.einsum("bnd,bd->bn", x, w) - y, x) / x.shape[1]
        np.testing.assert_allclose(hidden[k + 1, :, :d], query, atol=1e-5)
        np.testing.assert_allclose(hidden[k + 1, :, d], -np.einsum("bd,bd->b", w, query), atol=1e-4)
    assert np.mean(np.abs(hidden[-1, :, d])) > 0.1  # GD moved


def test_an_lsa_run_is_probed_at_its_query_and_refuses_the_y_mean_read(tmp_path):
    settings = small("lsa1", steps=20, batch_size=64, log_every=10, eval_size=64)
    run = execute(settings, tmp_path / "lsa1", **FLAGS).run
    out = probes.run(run, prompts=200, mlp_hidden=0)
    assert out["layers"] == 1 and out["mixer"] == "lsa1 (linear)" and out["dims"] == settings.task.d
    assert all(len(r2) == 2 for r2 in out["probes"]["trained"]["ridge"].values())
    done = subprocess.run(
        [sys.executable, "-m", "analysis.probes", "--run", str(run.path), "--read", "y_mean"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--read y_mean" in done.stderr and "accepted: query" in done.stderr


def test_the_analysis_on_a_run_and_its_refusals(gpt2_runs, tmp_path):
    trained, fixed = gpt2_runs
    out = probes.run(trained, prompts=200, control_run=fixed, mlp_hidden=8)
    assert set(out["probes"]) == {"trained", "untrained", "fixed_w"} and out["fixed_w_run"]["pool_size"] == 1
    for fits in out["probes"].values():
        assert set(fits["ridge"]) == set(fits["mlp"]) == set(probes.TARGETS)
        assert all(len(r2) == 3 for r2 in fits["ridge"].values())
    assert trained.exists(names.PROBES_JSON) and trained.file(names.PROBES_PNG).stat().st_size > 1000
    pooled = probes.run(trained, prompts=200, mlp_hidden=0, read="y_mean")
    assert pooled["read"] == "y_mean" and set(pooled["probes"]) == {"trained", "untrained"}
    assert trained.exists(names.PROBES_Y_MEAN_JSON) and trained.load_json(names.PROBES_JSON)["read"] == "query"
    again = probes.run(trained, prompts=200, control_run=fixed, mlp_hidden=8)
    assert again["probes"] == out["probes"]  # deterministic

    def command(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "analysis.probes", *flags], cwd=ROOT, capture_output=True, text=True, timeout=300
        )

    for flags, word in (
        (("--run", str(trained.path), "--prompts", "3"), "--prompts"),
        (("--run", str(trained.path), "--mlp-hidden", "-1"), "--mlp-hidden"),
        (("--run", str(trained.path), "--read", "keys"), "--read"),
        (("--run", str(trained.path), "--control-run", str(tmp_path)), "--control-run"),
        (("--run", str(tmp_path / "nothing")), "nothing"),
    ):
        done = command(*flags)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and word in done.stderr, flags


@pytest.mark.study
def test_the_circuits_study_quick_form_writes_its_report(tmp_path):
    """scripts.circuits --quick: every run, every analysis and the report with its Beside-the-paper rows."""
    args = [sys.executable, "-m", "scripts.circuits", "--quick", "--jobs", "2", "--runs-dir", str(tmp_path / "runs")]
    done = subprocess.run(
        [*args, "--report-dir", str(tmp_path / "report")], cwd=ROOT, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    import json

    text = (tmp_path / "report" / "CIRCUITS.md").read_text()
    for heading in ("## Induction heads", "## Residual-stream probes", "## Algorithm selection", "## Beside the paper"):
        assert heading in text
    results = json.loads((tmp_path / "report" / "circuits_results.json").read_text())
    assert set(results["checks"]["induction"]) == {"induction_L1", "induction_L2", "mqar_L1", "mqar_L2"}
    assert "| MQAR | L2 (2 layers) |" in text and "figures/circuits/induction_mqar_L2.png" in results["figures"]
    assert results["checks"]["probes"]["controls"].keys() == {"untrained", "fixed_w"}
    reads = results["checks"]["probes"]["reads"]
    assert set(reads) == {"query", "last_y", "y_mean"} and results["checks"]["probes"]["read"] in reads
    for read in ("last_y", "y_mean"):
        assert results[f"probes_{read}"]["read"] == read and f"figures/circuits/probes_{read}.png" in results["figures"]
    assert "mean over the y tokens from the d-th pair on" in text
    assert set(results["checks"]["selection"]["model_over_bayes"]) == {"0.1", "0.5"}
    assert set(results["probes_lsa"]) == {"lsa1", "twolayer"} and "### von Oswald et al.'s two models" in text
    for model in ("lsa1", "twolayer"):
        assert set(results["probes_lsa"][model]["probes"]) == {"trained", "untrained", "fixed_w"}
        assert results["probes_lsa"][model]["fixed_w_run"]["pool_size"] == 1
        assert f"figures/circuits/probes_{model}.png" in results["figures"]
    for figure in results["figures"]:
        assert (tmp_path / "report" / figure).stat().st_size > 1000
