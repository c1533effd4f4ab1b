"""The matrix study (scripts/matrix.py, plots/matrix_report.py) and what it stands on: von Oswald
et al.'s inputs in the GPT-2 family's sampler (`data: von_oswald`), a pair batch in the paper's
form (the prompt's last point the query) scored against the paper's GD numbers, the GD alignment of any sequence model
(analysis/alignment.py) checked against per-prompt gradients, a study's settings file in the
workbench's own schema (src/jobs/study.read_settings) and its cells x seeds (src/jobs/declared.py), and
`--quick` end to end (make test_studies)."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scripts import matrix as study, matrix_config
from src.flags import UsageError
from src.jobs.declared import Cell, cell_runs
from src.jobs.study import read_settings
from src.registry import registry

ROOT = Path(__file__).resolve().parent.parent


def paper_sampler(n_points=11, n_dims=10):
    from src.tasks.garg import GargTaskOptions

    return (
        registry("task")
        .get("linear_regression")
        .build(GargTaskOptions(data="von_oswald"), n_points=n_points, n_dims=n_dims)
    )


def test_von_oswald_inputs_are_uniform_on_minus_half_to_half_with_labels_x_dot_w():
    batch = paper_sampler()(jax.random.key(0), 4096, 10, 11)
    xs = np.asarray(batch.xs)
    assert xs.min() >= -0.5 and xs.max() <= 0.5
    assert abs(xs.mean()) < 0.005 and abs(xs.var() - 1 / 12) < 0.002  # U(-1/2, 1/2): variance 1/12
    np.testing.assert_allclose(np.asarray(batch.ys), np.einsum("bnd,bd->bn", xs, np.asarray(batch.w)), atol=1e-5)


def test_the_paper_task_in_pair_form_gives_the_papers_one_step_gd_numbers():
    """SPEC §1: one GD step from 0, η tuned, loss ≈ 0.206 (the reference notebook 0.2047 on 10k tasks),
    η ≈ 6.06; predicting 0 ≈ 0.417. 10,000 tasks: within their sampling error."""
    from baselines.gd_step import tune_eta
    from src.gd_paper.metrics import loss

    tasks = paper_sampler()(jax.random.key(1), 10_000, 10, 11)
    assert tasks.context_x.shape == (10_000, 10, 10) and tasks.query_x.shape == (10_000, 10)
    eta, gd_loss = tune_eta(tasks)
    assert abs(gd_loss - 0.206) < 0.01 and abs(eta - 6.06) < 0.6
    assert abs(float(loss(jnp.zeros_like(tasks.query_y), tasks.query_y)) - 0.417) < 0.015


def test_training_data_von_oswald_is_a_choice_of_the_yaml_and_a_bad_one_is_named(tmp_path):
    from src.cli.gpt2 import read_config

    base = (ROOT / "configs" / "quick.yaml").read_text()
    good = tmp_path / "good.yaml"
    good.write_text(base.replace("data: gaussian", "data: von_oswald"))
    assert read_config(str(good))[0].task.options.data == "von_oswald"
    bad = tmp_path / "bad.yaml"
    bad.write_text(base.replace("data: gaussian", "data: laplace"))
    with pytest.raises(UsageError, match="training.data='laplace' is unknown; accepted: gaussian, uniform, von_oswald"):
        read_config(str(bad))


def tiny_settings(mixer="softmax_causal"):
    base = replace(read_settings("configs/matrix.yaml"))
    base = replace(base, train=replace(base.train, eval_size=24))
    return study.cell_settings(base, mixer)


@pytest.mark.parametrize("mixer", ["softmax_causal", "lstm"])
def test_query_sensitivity_is_each_prompts_own_gradient(mixer):
    from analysis.alignment import query_predictor
    from src.systems.gpt2 import init_model, make_model
    from src.systems.gpt2_prompts import eval_batch

    settings = tiny_settings(mixer)
    model = make_model(settings)
    params, state = init_model(settings, model)
    batch = eval_batch(settings)
    prediction, sensitivity = query_predictor(settings, model, params, state)(batch)
    assert prediction.shape == (24,) and sensitivity.shape == (24, 10)
    for i in (0, 13, 23):
        one = lambda xq: model.apply(params, state, batch.xs[i : i + 1].at[0, -1].set(xq), batch.ys[i : i + 1])[0, -1]
        np.testing.assert_allclose(float(prediction[i]), float(one(batch.xs[i, -1])), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            np.asarray(sensitivity[i]), np.asarray(jax.grad(one)(batch.xs[i, -1])), rtol=1e-4, atol=1e-6
        )


def test_pair_alignment_of_a_model_scores_it_against_gd_least_squares_and_zero():
    from analysis.alignment import pair_alignment
    from src.systems.gpt2 import init_model, make_model

    settings = tiny_settings()
    model = make_model(settings)
    params, state = init_model(settings, model)
    result = pair_alignment(settings, model, params, state, eta=6.0)
    assert result["eta"] == 6.0 and result["eta_source"] == "flag" and result["num_tasks"] == 24
    assert result["least_squares_loss"] < 1e-6  # N = d = 10 pairs: least squares interpolates
    assert 0 < result["gd_loss"] < result["zero_loss"]
    assert -1.0 <= result["align_cos"] <= 1.0 and result["l2_pred_diff"] > 0
    tuned = pair_alignment(settings, model, params, state)
    assert tuned["eta_source"] == "tuned" and 3 < tuned["eta"] < 10


def test_the_alignment_analysis_applies_to_the_paper_task_in_the_gpt2_family_only():
    entry = registry("analysis").get("alignment")
    settings = tiny_settings()
    assert entry.is_applicable(settings)
    gaussian = replace(settings, task=replace(settings.task, options=replace(settings.task.options, data="gaussian")))
    assert not entry.is_applicable(gaussian)


def test_read_settings_takes_the_run_schema_and_refuses_in_one_line(tmp_path):
    settings = read_settings("configs/matrix.yaml")
    assert settings.system == "gpt2" and settings.task.options.data == "von_oswald" and settings.model.n_dims == 10
    full = tmp_path / "full.json"
    full.write_text(json.dumps(settings.to_dict()))
    assert read_settings(str(full)).digest() == settings.digest()
    cases = {
        "missing.yaml": None,
        "list.yaml": "- 1\n",
        "nosystem.yaml": "model: {}\n",
        "badkey.yaml": "system: gpt2\nmodel: {}\ntask: linear_regression\ncurriculum: {}\ntrain: {stepz: 3}\n",
        "badyaml.yaml": "system: [\n",
        "bad.json": "{system: gpt2",
    }
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(UsageError) as err:
            read_settings(str(tmp_path / name))
        assert "\n" not in str(err.value) and (name in str(err.value))


def test_cells_times_seeds_are_one_run_each_named_and_seeded(tmp_path):
    settings = read_settings("configs/matrix.yaml")
    cells = [Cell("a", settings), Cell("b", replace(settings, train=replace(settings.train, steps=7)))]
    jobs = cell_runs(cells, (0, 2), tmp_path)
    assert [j.name for j in jobs] == ["a_seed0", "a_seed2", "b_seed0", "b_seed2"]
    assert [j.settings.train.seed for j in jobs] == [0, 2, 0, 2] and jobs[3].cost == 7.0
    assert all(j.state == "absent" and j.path == tmp_path / j.name for j in jobs)


def test_the_matrix_is_every_registered_sequence_mixer_and_names_a_bad_one(tmp_path):
    assert matrix_config.mixer_names(None) == registry("seq_mixer").names()
    with pytest.raises(UsageError, match="--mixers='softmax_causal,nope' is not accepted"):
        matrix_config.mixer_names("softmax_causal,nope")
    jobs = study.make_jobs(tmp_path, ["softmax_causal", "lstm", "mamba"], (0, 1, 2), quick=False)
    assert len(jobs) == 9
    by_name = {j.name: j.settings for j in jobs}
    assert by_name["lstm_seed1"].model.seq_mixer.name == "lstm" and not by_name["lstm_seed1"].model.residual
    assert by_name["mamba_seed2"].model.seq_mixer.name == "mamba" and by_name["mamba_seed2"].train.seed == 2
    assert {s.train.steps for s in by_name.values()} == {2500}
    assert all(s.task.options.data == "von_oswald" and s.curriculum.points.end == 11 for s in by_name.values())


def test_a_config_of_another_system_is_refused_in_one_line(tmp_path):
    from src.gd_paper.presets import preset

    other = tmp_path / "lsa.json"
    other.write_text(json.dumps(preset("lsa1").to_dict()))
    with pytest.raises(UsageError, match="system='lsa' is not accepted; accepted: gpt2"):
        study.make_jobs(tmp_path, ["softmax_causal"], (0,), False, config=str(other))


@pytest.mark.study
def test_quick_matrix_study_writes_its_report(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.matrix",
            "--quick",
            "--mixers",
            "softmax_causal,lstm",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "report" / "matrix_results.json").read_text())
    assert set(results["summary"]) == {"softmax_causal", "lstm"}
    for row in results["results"]:
        assert all(row[c] is not None for c in results["columns"]), row
        alignment = json.loads((Path(row["run"]) / "analysis" / "alignment.json").read_text())
        assert row["loss_vs_gd"] == alignment["model_loss"] / alignment["gd_loss"]
    text = (tmp_path / "report" / "MATRIX.md").read_text()
    assert "| softmax_causal |" in text and "| lstm |" in text
    assert (tmp_path / "report" / "figures" / "matrix" / "heatmap.png").stat().st_size > 10_000


def test_chunked_mixers_get_chunks_balanced_to_the_prompt_and_compute_the_same_map():
    """22 tokens: chunks of 11 (not 16, padded to 32) and Mamba-2's of 22 (not 64); the chunk is a
    mixer option recorded in the run's settings, and a chunked mixer's forward pass with the
    balanced chunk equals its own default chunk's to float32 rounding."""
    import haiku as hk

    assert [study.balanced_chunk(t, c) for t, c in ((22, 16), (22, 64), (64, 16), (17, 16), (5, 16))] == [
        11,
        22,
        16,
        9,
        5,
    ]
    base = read_settings(study.CONFIG)
    chunks = {
        m: study.cell_settings(base, m).model.seq_mixer.options.chunk
        for m in ("gated_linear_attn", "delta_net", "gated_delta_net", "rwkv7", "mamba2")
    }
    assert chunks == {"gated_linear_attn": 11, "delta_net": 11, "gated_delta_net": 11, "rwkv7": 11, "mamba2": 22}
    x = jax.random.normal(jax.random.key(0), (3, 22, 64))
    for mixer, chunk in chunks.items():
        entry = registry("seq_mixer").get(mixer)
        outputs = []
        for options in (entry.default_options(), replace(entry.default_options(), chunk=chunk)):
            net = hk.transform(lambda u, o=options: entry.build(o, width=64, num_heads=4, name="m")(u))
            params = net.init(jax.random.key(1), x)
            outputs.append(np.asarray(net.apply(params, None, x)))
        np.testing.assert_allclose(outputs[1], outputs[0], rtol=2e-4, atol=2e-5, err_msg=mixer)


def test_the_matrix_runs_make_the_analyses_its_report_reads(tmp_path):
    """Every job of the matrix asks its run for the report's analyses (--analyses), no more."""
    jobs = study.make_jobs(tmp_path, ["softmax_causal", "mamba2"], [0], quick=True)
    assert all(job.analyses == study.ANALYSES for job in jobs)
    command = jobs[0].command(overwrite=False)
    assert command[command.index("--analyses") + 1] == "alignment,icl_curve,robustness,loss_figure"


@pytest.mark.parametrize("mixer", ["gated_linear_attn", "delta_net", "gated_delta_net", "rwkv7", "mamba2"])
def test_a_chunk_out_of_range_is_refused_in_one_line(mixer):
    entry = registry("seq_mixer").get(mixer)
    for bad in (0, 4097, True, 2.0):
        with pytest.raises(ValueError, match=rf"^chunk={bad!r} is not accepted; accepted: an integer in \[1, 4096\]$"):
            replace(entry.default_options(), chunk=bad).check()
    replace(entry.default_options(), chunk=4096).check()


# The study's own `matrix:` mapping (chosen rows at another step count and a set of learning rates)


def test_the_settling_config_is_the_matrix_settings_with_the_study_mapping():
    """configs/matrix_settling.yaml holds configs/matrix.yaml's settings unchanged (only its `matrix:`
    mapping differs), and configs/matrix.yaml has no such mapping: `make matrix` plans as it did."""
    base, protocol = matrix_config.read_config("configs/matrix_settling.yaml")
    assert base.digest() == read_settings(study.CONFIG).digest()
    assert protocol.steps == 10_000 and protocol.learning_rates == (0.002, 0.0005) and protocol.seeds == (0,)
    assert protocol.mixers[:2] == ("linear_attention", "linear_attention:feature_map=identity:output_norm=none")
    assert matrix_config.read_config(study.CONFIG)[1] == matrix_config.Protocol()
    assert not matrix_config.Protocol().varies


def test_cells_at_other_steps_and_rates_are_named_for_them(tmp_path):
    protocol = matrix_config.Protocol(steps=40, learning_rates=(0.002, 0.0005))
    mixers = ["linear_attention:feature_map=identity:output_norm=none", "delta_net", "delta_net:chunk=4"]
    jobs = study.make_jobs(tmp_path, mixers, (0,), quick=False, protocol=protocol)
    got = {j.name: (j.settings.train.steps, j.settings.train.learning_rate) for j in jobs}
    assert got == {
        "linear_attention_feature_map-identity_output_norm-none_steps40_lr0.002_seed0": (40, 0.002),
        "linear_attention_feature_map-identity_output_norm-none_steps40_lr0.0005_seed0": (40, 0.0005),
        "delta_net_steps40_lr0.002_seed0": (40, 0.002),
        "delta_net_steps40_lr0.0005_seed0": (40, 0.0005),
        "delta_net_chunk-4_steps40_lr0.002_seed0": (40, 0.002),
        "delta_net_chunk-4_steps40_lr0.0005_seed0": (40, 0.0005),
    }
    options = {j.name: j.settings.model.seq_mixer.options for j in jobs}
    assert options["delta_net_steps40_lr0.002_seed0"].chunk == 11  # balanced, as in the matrix
    assert options["delta_net_chunk-4_steps40_lr0.002_seed0"].chunk == 4  # as typed
    assert options[jobs[0].name].output_norm == "none" and options[jobs[0].name].feature_map == "identity"
    plain = study.make_jobs(tmp_path, ["delta_net"], (0,), quick=False)  # no mapping: the matrix's own run
    assert [j.name for j in plain] == ["delta_net_seed0"] and plain[0].settings.train.steps == 2500


@pytest.mark.parametrize(
    "block, says",
    [
        ("matrix: 3", "matrix=3 is not accepted; accepted: a mapping of any of mixers, seeds, steps, learning_rates"),
        ("matrix: {stepz: 3}", "matrix.stepz is unknown; accepted: mixers, seeds, steps, learning_rates"),
        ("matrix: {steps: 0}", "matrix.steps=0 is not accepted; accepted: an integer >= 1"),
        ("matrix: {steps: true}", "matrix.steps=True is not accepted"),
        ("matrix: {learning_rates: []}", "matrix.learning_rates=[] is not accepted; accepted: a non-empty list"),
        ("matrix: {learning_rates: [0.002, 0.002]}", "none twice"),
        ("matrix: {learning_rates: [-1]}", "accepted: a non-empty list of numbers in (0, 1]"),
        ("matrix: {learning_rates: 0.002}", "matrix.learning_rates=0.002 is not accepted"),
        ("matrix: {seeds: [0, x]}", "matrix.seeds=[0, 'x'] is not accepted"),
        ("matrix: {mixers: [nope]}", "matrix.mixers='nope' is not accepted"),
        ("matrix: {mixers: ['linear_attention:feature_map=cosine']}", "feature_map='cosine' is unknown"),
    ],
)
def test_a_bad_study_mapping_is_refused_in_one_line_with_exit_2(tmp_path, block, says, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text((ROOT / study.CONFIG).read_text() + block + "\n")
    with pytest.raises(UsageError) as err:
        matrix_config.read_config(str(config))
    assert says in str(err.value) and "\n" not in str(err.value) and "bad.yaml" in str(err.value)
    assert (
        study.main(["--config", str(config), "--runs-dir", str(tmp_path / "r"), "--report-dir", str(tmp_path / "p")])
        == 2
    )
    assert says in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_a_mixer_with_options_is_a_matrix_row_and_a_bad_option_is_named():
    assert matrix_config.mixer_names("softmax_causal,linear_attention:output_norm=none") == [
        "softmax_causal",
        "linear_attention:output_norm=none",
    ]
    with pytest.raises(UsageError, match="output_norm='ln' is unknown; accepted: rms, none"):
        matrix_config.mixer_names("linear_attention:output_norm=ln")
    assert study.cell_settings(read_settings(study.CONFIG), "mamba2").model.seq_mixer.options.chunk == 22


def test_a_config_with_other_steps_or_rates_has_its_own_runs_and_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_DRY_RUN", "1")
    monkeypatch.chdir(ROOT)
    assert study.main(["--config", "configs/matrix_settling.yaml"]) == 0
    said = capsys.readouterr().out
    assert "make 10 runs in runs/matrix_settling" in said and "report into report/matrix_settling" in said
    assert (
        study.main(
            [
                "--config",
                "configs/matrix_settling.yaml",
                "--mixers",
                "mamba",
                "--seeds",
                "0,1",
                "--runs-dir",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    assert f"make 4 runs in {tmp_path / 'r'}" in capsys.readouterr().out


def _fake_job(cell, seed, rate, model_loss, gd_loss=0.2):
    from types import SimpleNamespace

    run = SimpleNamespace(
        load_json=lambda name: {"model_loss": model_loss, "gd_loss": gd_loss, "zero_loss": 0.42, "align_cos": 0.5}
    )
    settings = SimpleNamespace(train=SimpleNamespace(learning_rate=rate, steps=100))
    return SimpleNamespace(cell=cell, seed=seed, run=run, settings=settings)


def test_the_best_rate_of_each_mixer_and_the_winner():
    jobs = [
        _fake_job("a_lr0.002", 0, 0.002, 0.30),
        _fake_job("a_lr0.002", 1, 0.002, 0.32),
        _fake_job("a_lr0.0005", 0, 0.0005, 0.22),
        _fake_job("a_lr0.0005", 1, 0.0005, 0.20),
        _fake_job("b_lr0.002", 0, 0.002, 0.18),
        _fake_job("b_lr0.002", 1, 0.002, 0.20),
        _fake_job("b_lr0.0005", 0, 0.0005, 0.40),
        _fake_job("b_lr0.0005", 1, 0.0005, 0.40),
    ]
    summary = study.rate_summary(jobs, {"a_lr0.002": "a", "a_lr0.0005": "a", "b_lr0.002": "b", "b_lr0.0005": "b"})
    assert summary["mixers"]["a"]["best_rate"] == 0.0005 and summary["mixers"]["b"]["best_rate"] == 0.002
    assert summary["mixers"]["a"]["best_loss_vs_gd"] == pytest.approx(1.05)
    assert summary["ranking"] == ["b", "a"] and summary["winner"] == "b"
    assert summary["mixers"]["b"]["rates"]["0.0005"]["loss_vs_gd"]["mean"] == pytest.approx(2.0)
    lines = study.rate_lines(summary)
    assert lines[-1] == "  won: b (loss / GD 0.950)" and "best lr 0.0005 (loss / GD 1.050)" in lines[0]


def test_a_hybrid_stack_is_a_matrix_row_layer_by_layer():
    """`softmax_causal+linear`: softmax attention in layer 0, linear attention in layer 1 (the
    question of which layer linear attention fails in); chunks balanced per layer; a preset refused."""
    base = read_settings(study.CONFIG)
    model = study.cell_settings(base, "softmax_causal+linear").model
    assert [c.name for c in model.layer_mixers()] == ["softmax_causal", "linear"]
    model = study.cell_settings(base, "gated_linear_attn+linear_attention:output_norm=none").model
    assert model.layer_mixer(0).options.chunk == 11 and model.layer_mixer(1).options.output_norm == "none"
    assert matrix_config.mixer_names("softmax_causal+linear,linear") == ["softmax_causal+linear", "linear"]
    with pytest.raises(UsageError, match="'nope'|is not accepted"):
        matrix_config.mixer_names("softmax_causal+nope")
    with pytest.raises(UsageError, match="lstm has a stack of its own"):
        study.cell_settings(base, "lstm+linear")
    with pytest.raises(UsageError, match="output_norm='x' is unknown"):
        matrix_config.mixer_names("softmax_causal+linear_attention:output_norm=x")
