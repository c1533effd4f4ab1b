"""Evaluation within a memory budget (src/batched.py): blocks of prompts give the numbers of one
big batch, the block size follows the estimate, and an analysis that cannot fit is refused in one
line before any work."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

from src import bounds
from src.batched import block_rows, in_blocks

ROOT = Path(__file__).resolve().parent.parent
# runners.train on our quick config at a tiny size with ALiBi (no position table): 20 eval tasks of 11 points
TINY = [
    "--config",
    "configs/quick.yaml",
    "--set",
    "quick=false",
    "--set",
    "model.n_layer=1",
    "--set",
    "model.position=alibi",
    "--set",
    "model.n_embd=16",
    "--set",
    "training.train_steps=20",
    "--set",
    "training.eval_size=20",
    "--quiet",
]


# blocks against one batch: XLA picks its matrix kernels by the number of rows, so float32's last
# digits may differ (5.4e-7 at most measured here on this width-16 model)
RTOL, ATOL = 1e-5, 1e-6


def same(got, want) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=ATOL)


def test_block_rows_are_bounded_by_the_budget_one_and_the_total():
    assert block_rows(100, 1000, budget=1000) == 10
    assert block_rows(10**12, 1000, budget=1000) == 1  # never zero rows
    assert block_rows(1, 7, budget=1000) == 7  # one block when everything fits
    assert block_rows(100, 1000) == min(1000, bounds.EVAL_BLOCK_BYTES // 100)


def test_in_blocks_concatenates_pads_the_last_block_and_drops_the_padding():
    calls = []

    def predict(xs, ys):
        calls.append(xs.shape[0])
        return xs.sum(-1) + ys, xs[:, 0]

    xs = np.arange(7 * 3, dtype=np.float32).reshape(7, 3)
    ys = np.arange(7, dtype=np.float32)
    got = in_blocks(predict, 3)(xs, ys)
    want = predict(xs, ys)
    assert calls == [3, 3, 3, 7]  # one shape for every block, the last filled up
    for g, w in zip(got, want):
        assert np.array_equal(np.asarray(g), w)


def test_in_blocks_splits_a_pair_prompt_by_its_prompts_and_passes_its_dims_whole():
    from src.tasks.pairs import pair_prompt

    seen = []

    def predict(prompt):
        seen.append((prompt.xs.shape[0], prompt.w.shape[0], float(prompt.dims)))
        return prompt.xs.sum(-1) + prompt.ys

    xs = np.arange(5 * 4 * 2, dtype=np.float32).reshape(5, 4, 2)
    prompt = pair_prompt(xs, np.ones((5, 4), np.float32), np.zeros((5, 2), np.float32), dims=2)
    got = in_blocks(predict, 2)(prompt)
    assert seen[:3] == [(2, 2, 2.0)] * 3 and np.array_equal(np.asarray(got), xs.sum(-1) + 1)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from src.cli.gpt2 import main

    out = tmp_path_factory.mktemp("batched") / "run"
    import os

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main([*TINY, "--out", str(out), "--skip_analysis"]) == 0
    finally:
        os.chdir(here)
    return out


def test_the_model_and_the_baselines_in_blocks_give_the_numbers_of_one_batch(tiny_run):
    from analysis.icl_curve import load_run
    from src.registry import registry
    from src.rundir import RunDir
    from src.systems.gpt2_prompts import eval_batch

    settings, model, params, state = load_run(RunDir(tiny_run))
    batch = eval_batch(settings)
    whole = jax.jit(model.apply)(params, state, batch.xs, batch.ys)
    apply = jax.jit(model.apply)
    for rows in (1, 3, 8):
        blocked = in_blocks(lambda prompt: apply(params, state, prompt.xs, prompt.ys), rows)
        same(blocked(batch), whole)
        assert np.array_equal(blocked(batch), blocked(batch))  # deterministic
    assert np.array_equal(in_blocks(lambda p: apply(params, state, p.xs, p.ys), 20)(batch), whole)
    for name in ("least_squares", "averaging", "knn"):
        entry = registry("baseline").get(name)
        predict = entry.build(entry.default_options())
        same(in_blocks(predict, 6)(batch), predict(batch))


def test_evaluation_in_blocks_scores_as_one_batch(tiny_run, monkeypatch):
    """The trainer's eval scores and the ICL curve with a budget of a few prompts per block."""
    from analysis.icl_curve import curves, load_run
    from src.loop import TrainState
    from src.rundir import RunDir
    from src.systems.gpt2 import GPT2Trainer
    from src.systems.gpt2_prompts import eval_rows

    settings, model, params, state = load_run(RunDir(tiny_run))
    one = GPT2Trainer(settings)
    scores = one.evaluate(TrainState(params, None))
    table = curves(settings, model, params, state)
    monkeypatch.setattr(
        bounds, "EVAL_BLOCK_BYTES", 3 * bounds.forward_bytes(tokens=22, width=16, layers=1, heads=settings.model.n_head)
    )
    assert eval_rows(settings) == 3
    blocked = GPT2Trainer(settings)
    assert blocked._rows == 3
    got = blocked.evaluate(TrainState(params, None))
    assert got == pytest.approx(scores, rel=RTOL)
    for name, errors in curves(settings, model, params, state).items():
        same(errors, table[name])


def test_length_test_takes_fewer_tasks_and_refuses_what_cannot_fit_in_one_line(tiny_run, tmp_path, monkeypatch, capsys):
    import shutil
    from analysis.length_gen import main

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    assert main(["--run", str(run), "--factor", "2", "--eval_size", "5"]) == 0
    out = capsys.readouterr().out
    assert "evaluating 5 tasks at up to 22 points, a block at a time: about " in out
    summary = json.loads((run / "analysis" / "length_gen.json").read_text())
    assert summary["eval_tasks"] == 5 and summary["evaluated_points"] == 22
    written = (run / "analysis" / "length_gen.json").read_bytes()
    # 100 MiB free: enough to read the run, not for 20 tasks of 64 x 11 points
    monkeypatch.setattr(bounds, "available_bytes", lambda: 100 * 2**20)
    assert main(["--run", str(run), "--factor", "64"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "this length test needs about" in err[0] and "--eval_size" in err[0], err
    assert (run / "analysis" / "length_gen.json").read_bytes() == written  # nothing was done
