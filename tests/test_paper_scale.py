"""configs/paper/* and `python -m scripts.paper_scale`: the configs hold the papers' own sizes, every
one makes valid runs at full size, the estimate refuses in one line (exit 2, nothing written) when
it exceeds the device's free memory, and (study-marked) every config trains end to end at a tiny
size through its study."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import src.bounds as bounds
from scripts import mixers, paper_scale
from scripts.mixers_grid import read_grid
from src.cli.gpt2 import read_config

TIB = 2**40


@pytest.fixture
def roomy(monkeypatch):
    """A machine with 1 TiB free: the configs are checked, not this machine."""
    monkeypatch.setattr(bounds, "available_bytes", lambda: TIB)


def test_the_mechanisms_config_holds_garg_and_limits_of_icl_sizes():
    settings, _ = read_config("configs/paper/mechanisms.yaml")
    m, c, tr = settings.model, settings.curriculum, settings.train
    assert (m.n_layer, m.width, m.n_head, m.n_dims) == (12, 256, 8, 20)
    assert (c.dims.start, c.dims.end, c.dims.inc, c.dims.interval) == (5, 20, 1, 2000)
    assert (c.points.start, c.points.end, c.points.inc, c.points.interval) == (11, 41, 2, 2000)
    assert (tr.steps, tr.learning_rate, tr.batch_size) == (100_001, 1e-4, 64)
    assert m.max_tokens >= 2 * math.ceil(1.5 * 41)  # the study's 1.5x length test fits the table


def test_the_lengthgen_config_holds_lin_et_al_standard_model_and_training_arguments():
    settings, _ = read_config("configs/paper/lengthgen.yaml")
    m, c, tr = settings.model, settings.curriculum, settings.train
    assert (m.preset, m.n_layer, m.width, m.n_head, m.biases) == ("llama", 16, 256, 8, False)
    assert (c.dims.end, c.points.start, c.points.end) == (20, 11, 51)
    assert (tr.steps, tr.learning_rate, tr.warmup_fraction, tr.grad_clip, tr.batch_size) == (
        50_000,
        3e-4,
        0.03,
        1.0,
        64,
    )


def test_the_mixers_config_is_zoology_figure_2():
    grid = read_grid("configs/paper/mixers.yaml")
    assert grid.vocab_size == 8192 and grid.heads == 1 and not grid.boolean
    assert [(c.seq_len, c.kappa, c.batch_size) for c in grid.cells] == [(64, 4, 512), (128, 8, 512), (256, 16, 256)]
    assert grid.widths == (64, 128, 256, 512)
    np.testing.assert_allclose(grid.learning_rates, np.logspace(-4, -2, 4), rtol=1e-4)
    # 64 epochs of 100,000 examples
    assert [c.steps for c in grid.cells] == [64 * 100_000 // c.batch_size for c in grid.cells]


@pytest.mark.parametrize("study, runs", [("mechanisms", 21), ("lengthgen", 27), ("mixers", 192)])
def test_every_paper_config_makes_valid_runs_at_full_size(study, runs, tmp_path, roomy):
    spec = paper_scale.STUDIES[study]
    jobs = spec.jobs(tmp_path / "runs", None, False, spec.config)
    assert len(jobs) == runs and len({j.name for j in jobs}) == runs
    assert all(j.state == "absent" for j in jobs)


def test_the_default_mixers_grid_still_makes_the_shipped_study():
    jobs = mixers.make_jobs(Path("runs/none"), mixers.STUDY_MIXERS, [0], False)
    assert {j.name for j in jobs} == {f"mqar_k{k}_{m}_w64_seed0" for k in (4, 8, 16) for m in mixers.STUDY_MIXERS}
    assert {
        (
            j.settings.task.options.vocab_size,
            j.settings.task.options.seq_len,
            j.settings.train.steps,
            j.settings.train.batch_size,
            j.settings.train.learning_rate,
        )
        for j in jobs
    } == {(256, 64, 1500, 64, 0.003)}
    widths = mixers.make_jobs(
        Path("runs/none"), mixers.SEQ_MIXERS, [0], False, read_grid("configs/mixers_widths.yaml")
    )  # the study before it
    assert {j.name for j in widths if j.task == "mqar"} == {
        f"mqar_k{k}_{m}_w{w}_seed0" for k in (4, 8) for m in mixers.SEQ_MIXERS for w in (16, 32, 64)
    }
    assert {j.steps for j in widths if j.task == "mqar"} == {3000} and len(widths) == 24 + 8


def test_a_bad_grid_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "grid.yaml"
    for text, words in (
        ("widths: []", "widths=[]"),
        ("cells: [{seq_len: 64}]", "cells[0]"),
        ("learning_rates: [-1]", "learning_rates[0]=-1"),
        ("width: [64]", "'width' is unknown"),
    ):
        bad.write_text(text)
        with pytest.raises(mixers.UsageError, match=words.replace("[", r"\[").replace("]", r"\]")):
            read_grid(str(bad))


def test_the_estimate_refuses_when_it_exceeds_free_memory(tmp_path, monkeypatch, capsys, roomy):
    monkeypatch.setattr(paper_scale, "device_free_bytes", lambda: (2**30, "a 1 GiB test device"))
    monkeypatch.setattr(paper_scale, "probe", lambda *a: pytest.fail("probed a run that cannot fit"))
    runs = tmp_path / "runs"
    assert paper_scale.main(["--study", "mechanisms", "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs about" in err and "1.0 GiB free" in err and "--jobs" in err
    assert not runs.exists()


def test_parallel_runs_count_against_free_memory(tmp_path, monkeypatch, capsys, roomy):
    spec = paper_scale.STUDIES["mixers"]
    one = max(paper_scale.run_bytes(j.settings) for j in spec.jobs(tmp_path, None, False, spec.config))
    monkeypatch.setattr(paper_scale, "device_free_bytes", lambda: (int(1.5 * one / bounds.HEADROOM), "a test device"))
    monkeypatch.setattr(paper_scale, "probe", lambda *a: (1.0, one))
    assert paper_scale.main(["--study", "mixers", "--estimate", "--runs-dir", str(tmp_path / "r")]) == 0
    assert "about" in capsys.readouterr().out
    assert paper_scale.main(["--study", "mixers", "--estimate", "--jobs", "2", "--runs-dir", str(tmp_path / "r")]) == 2
    assert "x 2 in parallel" in capsys.readouterr().err


def test_the_time_estimate_scales_every_run_from_the_probe(tmp_path, monkeypatch, capsys, roomy):
    monkeypatch.setattr(paper_scale, "device_free_bytes", lambda: (TIB, "a test device"))
    monkeypatch.setattr(paper_scale, "probe", lambda settings, steps: (100.0, 2**30))  # 0.1 s a step
    assert (
        paper_scale.main(
            ["--study", "mechanisms", "--only", "softmax_causal", "--estimate", "--runs-dir", str(tmp_path / "r")]
        )
        == 0
    )
    # 3 seeds x 100,001 steps x 0.1 s, one at a time: 8.3 h (every run as heavy as the probe)
    assert "about 8.3 h" in capsys.readouterr().out


def test_bad_flags_are_one_line(capsys):
    assert paper_scale.main(["--study", "mechanisms", "--only", "nope", "--estimate"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(SystemExit) as exit_:
        paper_scale.main(["--study", "bogus"])
    assert exit_.value.code == 2


def test_work_and_memory_grow_with_the_model(tmp_path, roomy):
    spec = paper_scale.STUDIES["mixers"]
    jobs = {(j.width, j.pairs): j for j in spec.jobs(tmp_path, ["attention"], False, spec.config)}
    small, wide, long = jobs[(64, 4)].settings, jobs[(512, 4)].settings, jobs[(64, 16)].settings
    assert paper_scale.step_work(wide) > 8 * paper_scale.step_work(small)
    assert paper_scale.run_bytes(long) > paper_scale.run_bytes(small)


def test_training_bytes_closed_form():
    # one layer, one head, T = 2, D = 1: per layer 1*4 + 8*2*1 = 20 floats
    got = bounds.training_bytes(batch_size=3, eval_size=5, tokens=2, width=1, layers=1, heads=1)
    assert got == 4 * (2 * 3 * 1 * 20 + 5 * 20 * 2 + 16)
    kept = bounds.training_bytes(batch_size=3, eval_size=5, tokens=2, width=1, layers=4, heads=1, keep_attention=True)
    assert kept == 4 * (2 * 3 * 4 * 20 + 5 * 20 * 5 + 64)


@pytest.mark.study
@pytest.mark.parametrize("study", sorted(paper_scale.STUDIES))
def test_every_paper_config_trains_at_a_tiny_size(study, tmp_path, capsys):
    runs = tmp_path / study
    assert paper_scale.main(["--study", study, "--tiny", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "ms/step measured here" in out and "training time" in out
    trained = [p for p in runs.iterdir() if (p / "metrics_summary.json").exists()]
    assert len(trained) >= 2
    results = next((runs / "report").glob("*_results.json"))
    assert json.loads(results.read_text())["quick"] is True
