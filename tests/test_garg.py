"""limits_of_icl's system: Garg et al.'s tasks and curriculum, the baselines against closed forms
and brute force, the YAML runner (bad keys, test_run) and icl_curve (its SIGKILL + --resume is in
tests/test_resume.py)."""

import json
from pathlib import Path

import jax
import numpy as np
import pytest

from baselines.regression import averaging, knn, least_squares
from src.cli.gpt2 import main as train_main
from src.registry import choice, registry
from src.tasks.garg import Schedule

ROOT = Path(__file__).resolve().parent.parent


def sample(name, b=4, n=11, d=5, dims=5, points=11, **options):
    c = choice("task", name, **options)
    return registry("task").get(name).build(c.options, n_points=n, n_dims=d)(jax.random.key(0), b, dims, points)


def test_tasks_and_curriculum_masks():
    batch = sample("linear_regression", dims=3, points=7)
    assert batch.xs.shape == (4, 11, 5) and float(np.abs(batch.xs[..., 3:]).max()) == 0.0
    assert np.array_equal(np.asarray(batch.weights[0]), [1] * 7 + [0] * 4)
    np.testing.assert_allclose(batch.ys, np.einsum("bnd,bd->bn", batch.xs, batch.w), rtol=1e-5, atol=1e-6)
    sparse = sample("sparse_linear_regression", b=200, sparsity=3)
    assert np.all(np.count_nonzero(np.asarray(sparse.w), axis=1) == 3)
    quad = sample("quadratic_regression")
    np.testing.assert_allclose(quad.ys, np.einsum("bnd,bd->bn", quad.xs**2, quad.w) / np.sqrt(3), rtol=1e-5, atol=1e-5)
    schedule = Schedule(5, 20, 1, 2000)
    assert [int(schedule.at(s)) for s in (0, 1999, 2000, 40000)] == [5, 5, 6, 20]


def test_least_squares_error_is_max_d_minus_n_over_d():
    batch = sample("linear_regression", b=10_000, n=11, d=5)
    err = np.mean((np.asarray(least_squares(batch)) - np.asarray(batch.ys)) ** 2, 0) / 5
    for n in range(11):
        if n >= 5:
            assert err[n] <= 1e-4, (n, err[n])
        else:
            assert abs(err[n] - (1 - n / 5)) <= 0.03, (n, err[n])


def test_averaging_and_knn_match_brute_force():
    batch = sample("linear_regression", b=3, n=8, d=4, dims=4, points=8)
    xs, ys = np.asarray(batch.xs, np.float64), np.asarray(batch.ys, np.float64)
    avg, near = np.asarray(averaging(batch)), np.asarray(knn(batch, 3))
    for b in range(3):
        for i in range(8):
            want = 0.0 if i == 0 else xs[b, i] @ np.mean(ys[b, :i, None] * xs[b, :i], axis=0)
            assert abs(avg[b, i] - want) <= 1e-4
            order = np.argsort(np.sum((xs[b, :i] - xs[b, i]) ** 2, axis=1))[:3]
            want = np.mean(ys[b, order]) if i else 0.0
            assert abs(near[b, i] - want) <= 1e-5


def write_config(tmp_path, **changes):
    import yaml

    raw = yaml.safe_load((ROOT / "configs" / "quick.yaml").read_text())
    raw["out_dir"] = str(tmp_path / "run")
    for key, value in changes.items():
        node = raw
        *parents, last = key.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    "change, words",
    [
        ({"model.attention_type": "flash"}, "model.attention_type='flash' is unknown"),
        ({"training.task": "xor_of_everything"}, "training.task='xor_of_everything' is unknown"),
        ({"training.task": "parity", "training.curriculum.dims.start": 3}, "takes a fixed dimension"),
        ({"training.task": "sparse_parity", "training.task_kwargs.k": 9}, "k=9 is out of range for d=5"),
        ({"model.family": "llama"}, "model.family='llama' is unknown"),
        ({"model.n_layer": 0}, "model.n_layer=0"),
        ({"training.batch_size": -1}, "training.batch_size=-1"),
        ({"training.curriculum.points.end": 9, "training.curriculum.points.start": 11}, "end"),
        ({"model.n_positions": 5}, "model.n_positions=5 is not accepted"),
        ({"model.colour": "red"}, "model.colour: unknown key"),
        ({"training.learning_rate": "fast"}, "learning_rate"),
    ],
)
def test_bad_config_exits_2_with_one_line(tmp_path, capsys, change, words):
    config = write_config(tmp_path, **change)
    try:
        code = train_main(["--config", str(config)])
    except SystemExit as exit_:
        code = exit_.code
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and words in lines[0], lines
    assert not (tmp_path / "run").exists()


def test_yaml_that_is_not_a_mapping(tmp_path, capsys):
    path = tmp_path / "list.yaml"
    path.write_text("- just\n- a list\n")
    assert train_main(["--config", str(path)]) == 2
    assert "not a mapping" in capsys.readouterr().err


def test_test_run_trains_every_step_without_checkpoints_and_quick_caps(tmp_path):
    """The original's test_run only stops saving state.pt / model_<i>.pt; ours, quick, cuts the run."""
    from src.cli.gpt2 import read_config

    original, _ = read_config(
        str(write_config(tmp_path, **{"quick": False, "test_run": True, "training.train_steps": 3000}))
    )
    assert original.train.steps == 3000 and original.train.checkpoint_every == 3000
    assert original.train.keep_every == 0
    quick, _ = read_config(str(write_config(tmp_path, **{"quick": True, "training.train_steps": 3000})))
    assert quick.train.steps == 100 and quick.train.eval_size == 200
    dummy, out = read_config(str(ROOT / "configs" / "dummy.yaml"))  # the original's file, as it is
    m = dummy.model
    assert (m.n_layer, m.width, m.n_head, m.n_dims, m.max_tokens, dummy.train.steps) == (12, 256, 8, 20, 82, 5000)
    assert str(out) == "runs/nanogpt_dummy"
    assert dummy.loss_figure_marks() == [2000, 4000]


def test_uniform_and_affine_regression_against_their_definitions():
    uniform = sample("uniform_linear_regression", b=4000)
    w = np.asarray(uniform.w)
    assert np.abs(w).max() <= np.sqrt(3) + 1e-6 and abs(w.var() - 1.0) < 0.05  # U(-√3, √3): variance 1
    np.testing.assert_allclose(uniform.ys, np.einsum("bnd,bd->bn", uniform.xs, uniform.w), rtol=1e-5, atol=1e-5)
    affine = sample("affine_regression", b=4000, bias_std=2.0)
    bias = np.asarray(affine.ys) - np.einsum("bnd,bd->bn", affine.xs, affine.w)
    assert np.abs(bias - bias[:, :1]).max() < 1e-4  # one b per task
    assert abs(bias[:, 0].std() - 2.0) < 0.1


def test_relu_2nn_and_decision_tree_against_numpy():
    from src.tasks.garg_functions import relu_2nn, tree_predict

    rng = np.random.default_rng(0)
    xs, w1, w2 = rng.normal(size=(3, 7, 5)), rng.normal(size=(3, 5, 100)), rng.normal(size=(3, 100))
    expected = np.sqrt(2 / 100) * np.einsum("bnh,bh->bn", np.maximum(xs @ w1, 0), w2)
    np.testing.assert_allclose(relu_2nn(xs, w1, w2, 1.0), expected, rtol=1e-4, atol=1e-5)
    coords, values = rng.integers(0, 5, size=(3, 31)), rng.normal(size=(3, 31))
    loop = np.zeros((3, 7))
    for b in range(3):
        for i in range(7):
            node = 0
            for _ in range(4):
                node = 2 * node + 1 + int(xs[b, i, coords[b, node]] > 0)
            loop[b, i] = values[b, node]
    np.testing.assert_allclose(tree_predict(xs, coords, values, 4), loop, rtol=1e-6)
    # the scaling: E y² = d for the network on N(0, I) inputs; tree leaves are N(0, 1)
    relu = sample("relu_2nn_regression", b=2000)
    assert abs(float(np.mean(np.asarray(relu.ys) ** 2)) - 5.0) < 0.4
    tree = sample("decision_tree", b=4000)
    assert abs(float(np.var(np.asarray(tree.ys))) - 1.0) < 0.1 and not np.any(np.asarray(tree.w))


def test_training_pair_curriculum_corrupts_places_and_masks():
    from src.gd_paper.config import CurriculumConfig
    from src.gd_paper.curricula import with_pair_curriculum

    batch = sample("linear_regression", b=300, n=11, d=5)
    noisy = with_pair_curriculum(
        jax.random.key(1),
        batch,
        CurriculumConfig(
            ordering="easy2hard", noise_mode="label_noise", noise_p=0.25, noise_sigma=0.5, noise_placement="noisy_first"
        ),
    )
    xs, ys, weights = (np.asarray(a) for a in (noisy.xs, noisy.ys, noisy.weights))
    clean_y = np.einsum("bnd,bd->bn", xs, np.asarray(batch.w))
    corrupted = np.abs(ys - clean_y) > 1e-5
    assert np.all(corrupted[:, :3]) and not np.any(corrupted[:, 3:])  # round(0.25·10) = 3, placed first
    np.testing.assert_array_equal(weights, np.where(corrupted, 0.0, 1.0))  # they leave the loss
    np.testing.assert_array_equal(xs[:, -1], np.asarray(batch.xs)[:, -1])  # the last point untouched
    q = xs[:, -1]
    cos = np.abs(np.einsum("bnd,bd->bn", xs[:, 3:-1], q)) / (
        np.linalg.norm(xs[:, 3:-1], axis=-1) * np.linalg.norm(q, axis=-1)[:, None]
    )
    assert np.all(np.diff(1 - cos, axis=1) >= -1e-6)  # clean pairs easy -> hard
    # every context pair is still one of the batch's pairs (a permutation)
    assert np.allclose(np.sort(np.asarray(batch.xs)[:, :-1, 0], axis=1), np.sort(xs[:, :-1, 0], axis=1))


def test_a_config_sets_the_training_curriculum_and_a_growing_prompt_is_refused(tmp_path, capsys):
    from src.cli.gpt2 import read_config

    settings, _ = read_config(
        str(ROOT / "configs/quick.yaml"), ["training.noise_mode=random_pairs", "training.noise_p=0.2"]
    )
    assert (settings.train_curriculum.noise_mode, settings.train_curriculum.noise_p) == ("random_pairs", 0.2)
    assert (
        train_main(
            [
                "--config",
                str(ROOT / "configs/lengthgen.yaml"),
                "--set",
                "training.noise_mode=label_noise",
                "--set",
                "training.noise_p=0.2",
                "--out",
                str(tmp_path / "grow"),
            ]
        )
        == 2
    )
    assert "fixed number of points" in capsys.readouterr().err and not (tmp_path / "grow").exists()


def test_analyses_say_when_they_run_and_skip_analysis_leaves_them_out(tmp_path, capsys, monkeypatch):
    """After training, each analysis prints a line as it starts and as it ends (some take minutes
    at width 256); --skip_analysis writes none of their outputs."""
    monkeypatch.chdir(ROOT)
    tiny = [
        "--config",
        "configs/quick.yaml",
        "--set",
        "quick=false",
        "--set",
        "model.n_layer=1",
        "--set",
        "model.n_embd=16",
        "--set",
        "training.train_steps=10",
        "--set",
        "training.eval_size=20",
    ]
    assert train_main([*tiny, "--out", str(tmp_path / "with")]) == 0
    err = capsys.readouterr().err
    starts = [line for line in err.splitlines() if ": analysis " in line and " ..." in line]
    ends = [line for line in err.splitlines() if ": analysis " in line and " done in " in line]
    assert starts and len(starts) == len(ends), err
    assert train_main([*tiny, "--out", str(tmp_path / "without"), "--skip_analysis"]) == 0
    assert ": analysis " not in capsys.readouterr().err
    written = set(json.loads((tmp_path / "with" / "metrics_summary.json").read_text())["outputs"])
    skipped = set(json.loads((tmp_path / "without" / "metrics_summary.json").read_text())["outputs"])
    assert skipped < written and all((tmp_path / "without" / name).exists() for name in skipped)


def test_linear_classification_is_the_sign_of_a_linear_task_scored_by_sign():
    from src.cli.gpt2 import settings_from_config
    from src.tasks.objectives import objective_of

    entry = registry("task").get("linear_classification")
    batch = entry.build(entry.default_options(), n_points=11, n_dims=5)(jax.random.key(3), 16, 3, 11)
    ys = np.asarray(batch.ys)
    assert set(np.unique(ys)) == {-1.0, 1.0}
    assert np.array_equal(ys, np.sign(np.einsum("bnd,bd->bn", np.asarray(batch.xs), np.asarray(batch.w))))
    assert not np.asarray(batch.w)[:, 3:].any()  # the curriculum's inactive dimensions
    assert (
        objective_of("linear_classification").name == "sign"
        and not objective_of("linear_classification").continuous_labels
    )
    raw = {
        "model": {"family": "gpt2", "n_dims": 5, "n_embd": 16, "n_head": 2, "n_layer": 2, "n_positions": 11},
        "training": {
            "task": "linear_classification",
            "train_steps": 3,
            "num_tasks": 8,
            "curriculum": {
                "dims": {"start": 5, "end": 5, "inc": 1, "interval": 100},
                "points": {"start": 11, "end": 11, "inc": 2, "interval": 100},
            },
        },
    }
    settings = settings_from_config(raw)[0]
    assert settings.task.name == "linear_classification" and settings.train.num_tasks == 8
