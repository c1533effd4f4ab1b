"""The length study's pieces beyond the encodings: boolean tasks in the gpt2 family (batches, the
accuracy metric), the attention read-out (causal, normalised, leaves predictions alone), the
recency profile, the duplication and serial-position prompts, and the quick study end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from analysis.prompt_tests import duplication_indices, serial_indices
from analysis.recency import attention_weights, recency_profile
from src.models.sequence_presets import gpt2
from src.registry import registry
from src.systems.gpt2 import GPT2Settings, init_model, make_model
from src.systems.gpt2_prompts import eval_batch
from src.tasks.objectives import OBJECTIVES
from src.tasks.garg import Curriculum, Schedule
from src.tasks.pairs import PairPrompt

ROOT = Path(__file__).resolve().parent.parent


def test_boolean_tasks_give_gpt2_batches_with_pm1_labels_and_their_support():
    from src.tasks.boolean import BooleanOptions

    draw = registry("task").get("sparse_parity").build(BooleanOptions(k=2), n_points=9, n_dims=6)
    batch = jax.jit(lambda key: draw(key, 32, 6, 7))(jax.random.key(3))
    assert batch.xs.shape == (32, 9, 6) and set(np.unique(batch.xs)) == {-1.0, 1.0}
    assert set(np.unique(batch.ys)) <= {-1.0, 1.0}
    assert np.all(np.asarray(batch.w).sum(-1) == 2)  # exactly k coordinates
    support = np.asarray(batch.w) > 0
    want = np.prod(np.where(support[:, None, :], np.asarray(batch.xs), 1.0), -1)
    assert np.array_equal(want, np.asarray(batch.ys))  # y = product over the support
    assert np.array_equal(np.asarray(batch.weights[0]), [1.0] * 7 + [0.0] * 2)
    assert float(batch.dims) == 6.0


def test_sign_error_is_the_misclassification_rate_and_real_error_is_squared_over_d():
    ys = jnp.array([[1.0, -1.0, 1.0, -1.0]])
    batch = PairPrompt(jnp.zeros((1, 4, 2)), ys, jnp.ones((1, 4)), jnp.zeros((1, 2)), jnp.asarray(2.0))
    prediction = jnp.array([[0.3, 0.2, -0.1, -5.0]])
    sign, regression = (OBJECTIVES.get(name).build(None) for name in ("sign", "regression"))
    assert np.array_equal(np.asarray(sign.point_errors(prediction, batch)), [[0, 1, 1, 0]])
    assert np.allclose(
        np.asarray(regression.point_errors(prediction, batch)), (np.asarray(prediction) - np.asarray(ys)) ** 2 / 2
    )


def test_recency_profile_of_uniform_and_of_last_key_attention():
    t = 10
    uniform = np.full((2, 3, 4, t, t), 1.0 / t)
    profile, tail = recency_profile(uniform, bins=5)
    assert np.allclose(profile, 1.0) and np.allclose(tail, 0.2)
    last = np.zeros((1, 2, 1, t, t))
    last[..., -1] = 1.0
    profile, tail = recency_profile(last, bins=5)
    assert np.allclose(tail, 1.0)
    assert np.allclose(profile[0], [0, 0, 0, 0, 5.0])  # one key of two in the bin, T = 10


def test_recorded_attention_is_causal_normalised_and_leaves_predictions_unchanged():
    settings = GPT2Settings(
        model=gpt2(n_dims=3, n_embd=16, n_head=2, n_layer=2, n_positions=6),
        curriculum=Curriculum(Schedule(3, 3), Schedule(6, 6)),
    ).validate()
    model = make_model(settings)
    params, state = init_model(settings, model)
    batch = eval_batch(settings)
    weights = attention_weights(settings, params, state, batch.xs[:8], batch.ys[:8])
    assert weights.shape == (2, 8, 2, 12, 12)
    assert np.allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(np.ones((12, 12)), k=1)[None, None, None] * weights == 0)
    again = model.apply(params, state, batch.xs[:8], batch.ys[:8])  # nothing recorded outside
    assert np.allclose(
        np.asarray(again), np.asarray(jax.jit(model.apply)(params, state, batch.xs[:8], batch.ys[:8])), atol=1e-5
    )


def test_recency_applies_exactly_where_the_mixer_forms_softmax_weights():
    """The length study runs analysis.recency only where `applies` says; it must say so exactly
    for the mixers that record softmax weights (recency reads them from the mixer's state)."""
    import haiku as hk
    from analysis.recency import applies
    from src.models.mixers.attention import recording_attention
    from src.registry import choice

    x = jnp.ones((1, 4, 8))
    for mixer in registry("seq_mixer").names():
        entry = registry("seq_mixer").get(mixer)
        forward = hk.transform_with_state(
            lambda h: entry.build(entry.default_options(), width=8, num_heads=2, name="seq_mixer")(h)
        )
        with recording_attention():
            params, state = forward.init(jax.random.key(0), x)
            _, state = forward.apply(params, state, None, x)
        settings = GPT2Settings(
            model=gpt2(n_dims=3, n_embd=8, n_head=2, n_layer=1, n_positions=4, mixer=choice("seq_mixer", mixer))
        )
        assert applies(settings) == ("attention_weights" in state.get("seq_mixer", {})), mixer


def test_recency_refuses_a_mixer_with_state_but_no_softmax_weights_in_one_line():
    """favor keeps Haiku state (its random features) but forms no softmax weights."""
    from analysis.common import AnalysisError
    from src.registry import choice

    settings = GPT2Settings(
        model=gpt2(
            n_dims=3,
            n_embd=8,
            n_head=2,
            n_layer=1,
            n_positions=4,
            mixer=choice("seq_mixer", "favor"),
            position=choice("position", "nope"),
        ),
        curriculum=Curriculum(Schedule(3, 3), Schedule(4, 4)),
    ).validate()
    params, state = init_model(settings, make_model(settings))
    batch = eval_batch(settings)
    with pytest.raises(AnalysisError, match="forms no softmax weights"):
        attention_weights(settings, params, state, batch.xs[:2], batch.ys[:2])


def test_duplication_and_serial_position_prompts():
    assert duplication_indices(3, 2).tolist() == [0, 1, 2, 2, 2, 3]
    assert serial_indices(2, 8, "start").tolist() == [1, 2, 0, 0, 0, 0, 0, 3]
    assert serial_indices(2, 8, "middle").tolist() == [0, 0, 1, 2, 0, 0, 0, 3]
    assert serial_indices(2, 8, "end").tolist() == [0, 0, 0, 0, 0, 1, 2, 3]
    with pytest.raises(ValueError):
        serial_indices(5, 5, "start")


@pytest.mark.study
def test_quick_lengthgen_study_writes_its_report(tmp_path):
    """Two encodings and the Mamba row on the boolean task (the full --quick study: make
    lengthgen_quick). 60 steps train nothing: every claim says so."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.lengthgen",
            "--quick",
            "--positions",
            "learned,alibi,mamba",
            "--tasks",
            "conjunction",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=400,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "report" / "lengthgen_results.json").read_text())
    by_encoding = {}
    for row in results["results"]:
        by_encoding.setdefault(row["encoding"], []).append(row["n_examples"])
    assert max(by_encoding["learned"]) == 20  # its table: 21 points, then it stops
    assert max(by_encoding["alibi"]) == 8 * 21 - 1  # to 8x the trained length
    summary = results["summary"]["conjunction"]
    assert summary["learned"]["within_2x"] == [0, 0] and summary["learned"]["evaluated_8x"] == 0
    assert summary["alibi"]["evaluated_8x"] == 1 and summary["alibi"]["untrained_seeds"] == [0]
    assert summary["alibi"]["within_2x"] == [0, 0]  # no claim on an untrained model
    assert summary["mamba"]["evaluated_8x"] == 1 and not summary["mamba"]["recency_read"]
    report = (tmp_path / "report" / "LENGTHGEN.md").read_text()
    assert "| alibi |" in report and "| learned |" in report and "| mamba |" in report
    assert "not trained enough to judge" in report and "n/a (no softmax weights)" in report
    for name in ("ood_length.png", "avg_attention_score.png", "lost_in_mid.png", "baseline_all_dup.png"):
        assert (tmp_path / "report" / "figures" / "lengthgen" / name).stat().st_size > 1000
    run = tmp_path / "runs" / "conjunction_alibi_seed0" / "analysis"
    for name in (
        "ood_length.png",
        "avg_attention_score.png",
        "lost_in_mid.png",
        "duplication.png",
        "baseline_all_dup.png",
    ):
        assert (run / name).exists()
    alibi = json.loads((run / "length_gen.json").read_text())
    assert alibi["trained_enough"] is False and alibi["verdict"].startswith("not trained enough to judge")
    assert alibi["multiples"]["2"]["within_2x"] is None
    mamba = tmp_path / "runs" / "conjunction_mamba_seed0"
    assert json.loads((mamba / "config.json").read_text())["settings"]["model"]["preset"] == "mamba"
    assert not (mamba / "analysis" / "recency.json").exists() and (mamba / "analysis" / "baseline_all_dup.png").exists()
    assert alibi["stopped_at"] is None and alibi["multiples"]["8"]["n_examples"] == 8 * 21 - 1
    # the reference (the same tasks cut to L points) is the long pass's point L - 1 (causal); the
    # two passes' float rounding may flip the sign of a near-zero prediction: one task is 1/400
    assert alibi["in_distribution_error"] == pytest.approx(alibi["long_pass_error_at_trained_length"], abs=0.006)
    learned = json.loads((tmp_path / "runs" / "conjunction_learned_seed0" / "analysis" / "length_gen.json").read_text())
    assert learned["stopped_at"] == 21 and "cannot index past" in learned["reason"]
