"""Post-run analyses: attention statistics (AUROC), GD alignment, OOD scaling, quick figures.

One tiny noisy lsa1 run with --save_attention is trained once per session (its
analyses run at the end of training, via src.pipeline.run_analyses); tests that
damage a run work on a copy.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis import alignment, attention_stats, ood_eval
from analysis.attention_stats import attention_statistics, auroc, average_ranks, pair_scores
from plots import attention_quick
from src import rundir as names
from src.gd_paper.models.layouts import InterleavedOptions, build_interleaved

INTERLEAVED = build_interleaved(InterleavedOptions(pe_size=10))

ROOT = Path(__file__).resolve().parent.parent
TINY = [
    "--steps",
    "60",
    "--log_every",
    "30",
    "--batch_size",
    "256",
    "--eval_size",
    "500",
    "--save_attention",
    "--noise_mode",
    "label_noise",
    "--noise_p",
    "0.3",
    "--quiet",
]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A finished tiny run directory (training + every analysis), shared read-only."""
    from src.cli.lsa import main

    out = tmp_path_factory.mktemp("analysis") / "tiny"
    code = main("lsa1", "tiny", [*TINY, "--out", str(out)])
    assert code == 0
    return out


@pytest.fixture
def run_copy(tiny_run, tmp_path):
    """A private copy of the tiny run that a test may damage."""
    copy = tmp_path / tiny_run.name  # same name: figure titles show it
    shutil.copytree(tiny_run, copy)
    return copy


# ---------------------------------------------------------------------------
# AUROC


def _brute_auroc(scores, labels):
    pos, neg = scores[labels], scores[~labels]
    diff = pos[:, None] - neg[None, :]
    return (np.sum(diff > 0) + 0.5 * np.sum(diff == 0)) / (pos.size * neg.size)


@pytest.mark.parametrize("seed", range(5))
def test_auroc_equals_pairwise_count_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = 300
    labels = rng.random(n) < 0.3
    scores = np.round(rng.normal(size=n) + 0.7 * labels, 1)  # rounding makes many ties
    assert len(np.unique(scores)) < n
    result = auroc(scores, labels)
    assert result.reason is None
    assert result.value == pytest.approx(_brute_auroc(scores, labels), abs=1e-12)


def test_auroc_edge_cases():
    labels = np.array([True] * 4 + [False] * 6)
    assert auroc(np.r_[np.full(4, 2.0), np.full(6, 1.0)], labels).value == 1.0
    assert auroc(np.r_[np.full(4, 1.0), np.full(6, 2.0)], labels).value == 0.0
    assert auroc(np.full(10, 0.3), labels).value == 0.5
    for empty in (np.zeros(10, bool), np.ones(10, bool)):
        result = auroc(np.arange(10.0), empty)
        assert result.value is None and isinstance(result.reason, str) and "empty" in result.reason


def test_average_ranks_share_ties():
    np.testing.assert_array_equal(average_ranks(np.array([3.0, 1.0, 3.0, 2.0, 3.0])), [4.0, 1.0, 4.0, 2.0, 4.0])


def test_pair_scores_interleaved_average_the_two_tokens():
    row = np.array([[1.0, -3.0, 0.5, 0.5]])  # pairs (x1, y1), (x2, y2)
    np.testing.assert_allclose(pair_scores(row, 2, 2), [[2.0, 0.5]])
    np.testing.assert_allclose(pair_scores(row, 4, 1), [[1.0, 3.0, 0.5, 0.5]])
    with pytest.raises(ValueError):
        pair_scores(row, 3, 1)


def test_attention_statistics_synthetic_interleaved():
    rng = np.random.default_rng(0)
    tasks, n = 50, 5
    mask = np.zeros((tasks, n), bool)
    mask[:, :2] = True
    first = rng.random((tasks, 2 * n + 1, 2 * n))  # earlier layer: every token queries
    last = rng.random((tasks, 1, 2 * n))
    last[:, 0, :4] *= 0.01  # corrupted pairs barely attended
    stats = attention_statistics({(0, 0): first, (1, 0): last}, mask, 2)
    assert stats["num_tasks"] == tasks and [e["layer"] for e in stats["layers"]] == [0, 1]
    top = stats["layers"][1]
    assert top["clean"]["count"] == 3 * tasks and top["corrupted"]["count"] == 2 * tasks
    assert top["auroc"] == 1.0 and top["auroc_reason"] is None
    clean = attention_statistics({(0, 0): last}, np.zeros((tasks, n), bool), 2)
    entry = clean["layers"][0]
    assert entry["auroc"] is None and "corrupted" in entry["auroc_reason"]
    assert entry["corrupted"] == {"mean": None, "std": None, "count": 0}


def test_attention_quick_figure_renders_interleaved():
    rng = np.random.default_rng(1)
    figure = attention_quick.attention_figure(
        rng.normal(size=(3, 21, 20)), 0, 0, INTERLEAVED, 10, corrupted=np.arange(10) < 3
    )
    from plots.style import png_bytes

    assert png_bytes(figure)[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------
# Alignment


def test_gd_construction_is_aligned_with_gd(tiny_run):
    from baselines.gd_step import gd_params
    from src.rundir import RunDir
    from src.gd_paper.eval_set import make_eval_set
    from src.gd_paper.models.attention_only import build_model

    settings = RunDir(tiny_run).load_settings()  # reuses the session's compiled eval-set code
    model = build_model(settings.task, settings.model)
    eval_set = make_eval_set(settings, gd_eta=6.06)
    result = alignment.alignment_metrics(model, gd_params(settings.task, settings.model, 6.06), eval_set)
    assert result["align_cos"] >= 0.9999
    assert result["l2_pred_diff"] <= 1e-5
    assert result["model_loss"] == pytest.approx(result["gd_loss"], abs=1e-6)
    assert result["num_tasks"] == 500 and result["eta"] == 6.06


def test_alignment_cli_on_gd_params_in_a_run_directory(run_copy):
    from baselines.gd_step import gd_params
    from src.rundir import RunDir

    run = RunDir(run_copy)
    settings = run.load_settings()
    from src.params import flatten_params

    run.write_npz(names.PARAMS, flatten_params(gd_params(settings.task, settings.model, 4.0)))
    assert alignment.main(["--run", str(run_copy), "--eta", "4"]) == 0
    result = json.loads((run_copy / names.ALIGNMENT).read_text())
    assert result["eta"] == 4.0 and result["eta_source"] == "flag"
    assert result["align_cos"] >= 0.9999 and result["l2_pred_diff"] <= 1e-5
    assert set(result) == {
        "l2_pred_diff",
        "align_cos",
        "model_diff",
        "eta",
        "eta_source",
        "gd_loss",
        "model_loss",
        "num_tasks",
    }


def test_alignment_of_the_run_matches_its_summary(tiny_run):
    result = json.loads((tiny_run / names.ALIGNMENT).read_text())
    summary = json.loads((tiny_run / names.SUMMARY).read_text())
    assert result["eta_source"] == "tuned" and result["eta"] == summary["gd_eta"]
    assert result["num_tasks"] == 500
    for mine, theirs in (
        ("model_loss", "eval_loss"),
        ("gd_loss", "gd_loss"),
        ("align_cos", "align_cos"),
        ("l2_pred_diff", "l2_pred_diff"),
    ):
        assert result[mine] == pytest.approx(summary[theirs], abs=1e-6)


# ---------------------------------------------------------------------------
# OOD


def _read_csv(path):
    lines = Path(path).read_text().splitlines()
    return lines[0], [tuple(float(v) for v in line.split(",")) for line in lines[1:]]


def test_ood_at_alpha_one_is_the_final_eval_loss(tiny_run):
    header, rows = _read_csv(tiny_run / names.OOD)
    assert header == "alpha,tf_loss,gd_loss"
    assert [r[0] for r in rows] == list(ood_eval.DEFAULT_ALPHAS)
    summary = json.loads((tiny_run / names.SUMMARY).read_text())
    at_one = {r[0]: r for r in rows}[1.0]
    assert abs(at_one[1] - summary["eval_loss"]) <= 1e-6
    assert abs(at_one[2] - summary["gd_loss"]) <= 1e-6
    gd = [r[2] for r in rows]
    assert gd == sorted(gd)  # GD tuned at α = 1 degrades monotonically as inputs grow


# ---------------------------------------------------------------------------
# Attention statistics and quick figures on the run


def test_attention_stats_schema(tiny_run):
    stats = json.loads((tiny_run / names.ATTENTION_STATS).read_text())
    assert set(stats) == {"layers", "num_tasks", "score"}
    assert stats["num_tasks"] == 500 and isinstance(stats["score"], str)
    (entry,) = stats["layers"]
    assert set(entry) == {"layer", "head", "clean", "corrupted", "auroc", "auroc_reason"}
    assert entry["layer"] == 0 and entry["head"] == 0
    for cls, count in (("clean", 7 * 500), ("corrupted", 3 * 500)):  # round(0.3 * 10) = 3
        assert set(entry[cls]) == {"mean", "std", "count"} and entry[cls]["count"] == count
        assert entry[cls]["mean"] > 0 and entry[cls]["std"] >= 0
    assert 0.0 <= entry["auroc"] <= 1.0 and entry["auroc_reason"] is None
    assert (tiny_run / names.ATTENTION_STATS_PNG).read_bytes()[:4] == b"\x89PNG"
    assert (tiny_run / names.attention_figure(0, 0)).read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------
# Determinism: the CLI reproduces, byte for byte, what the runner wrote


def test_analyses_are_byte_identical_when_rerun(run_copy):
    outputs = [
        names.ALIGNMENT,
        names.OOD,
        names.ATTENTION_STATS,
        names.ATTENTION_STATS_PNG,
        names.attention_figure(0, 0),
    ]
    before = {name: (run_copy / name).read_bytes() for name in outputs}
    for module in (alignment, ood_eval, attention_stats, attention_quick):
        assert module.main(["--run", str(run_copy)]) == 0
    for name in outputs:
        assert (run_copy / name).read_bytes() == before[name], name


# ---------------------------------------------------------------------------
# Errors: one line naming the missing file and its producer, exit 2, no output


def _one_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("module", [alignment, ood_eval, attention_stats, attention_quick])
def test_not_a_run_directory(module, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert module.main(["--run", str(empty)]) == 2
    err = _one_line(capsys)
    assert "config.json" in err and "python -m runners." in err
    assert list(empty.iterdir()) == []
    assert module.main(["--run", str(tmp_path / "nowhere")]) == 2
    assert "python -m runners." in _one_line(capsys)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    "module,missing,outputs",
    [
        (alignment, names.PARAMS, [names.ALIGNMENT]),
        (ood_eval, names.SUMMARY, [names.OOD]),
        (attention_stats, names.attention_file(0, 0), [names.ATTENTION_STATS, names.ATTENTION_STATS_PNG]),
        (attention_quick, names.attention_file(0, 0), [names.attention_figure(0, 0)]),
    ],
)
def test_missing_input_file(module, missing, outputs, run_copy, capsys):
    (run_copy / missing).unlink()
    for output in outputs:
        (run_copy / output).unlink()
    assert module.main(["--run", str(run_copy)]) == 2
    err = _one_line(capsys)
    assert missing in err and "python -m " in err
    if missing.startswith(names.ATTN):
        assert "--save_attention" in err
    for output in outputs:
        assert not (run_copy / output).exists()
    assert [p for p in run_copy.rglob("*") if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize(
    "module,flags,bad",
    [
        (ood_eval, ["--alphas", "1", "0"], "0"),
        (ood_eval, ["--alphas", "nan"], "nan"),
        (ood_eval, ["--alphas", "-1"], "-1"),
        (alignment, ["--eta", "inf"], "inf"),
        (alignment, ["--eta", "0"], "0"),
    ],
)
def test_bad_flags_are_refused_before_any_work(module, flags, bad, run_copy, capsys):
    output = run_copy / (names.OOD if module is ood_eval else names.ALIGNMENT)
    output.unlink()
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--run", str(run_copy), *flags])
    assert exit_info.value.code == 2
    err = _one_line(capsys)
    assert flags[0] in err and bad in err and "finite number > 0" in err
    assert not output.exists()


def test_module_entry_point_exit_status(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "analysis.ood_eval", "--run", str(tmp_path / "x")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stdout == ""
    assert "python -m runners.run_concat_inputs_targets" in done.stderr
