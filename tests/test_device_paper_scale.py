"""The paper cell's device command (scripts/device/paper_scale.py) without a device: its flags are
refused in one line, and the runs it plans fit the time it is given at the step times one H200
measured (report/measurements/gpu_2026-11-27)."""

import json
from pathlib import Path

import numpy as np
import pytest

from scripts.device import paper_scale as dps
from scripts.device import paper_cell_plan as plan
from src.flags import UsageError

MEASURED = Path("report/measurements/gpu_2026-11-27/paper_cell_bench.json")


@pytest.mark.parametrize(
    "argv, named",
    [
        (
            ["--table", "adam1e-3_b256_warm", "--mechanisms", "softmax_causal,flash"],
            "--mechanisms='softmax_causal,flash'",
        ),
        (["--mechanisms", "local"], "--mechanisms and --with-table"),
        (["--table", "adam1e-3_b256_warm", "--with-table", "README.md"], "--with-table='README.md'"),
        (["--table", "sgd"], "--table='sgd'"),
        (["--steps", "0"], "--steps=0"),
    ],
)
def test_bad_flags_are_refused_before_any_work(argv, named, tmp_path):
    """(guarded turns a UsageError into one line and exit 2, tests/test_cli.py)"""
    with pytest.raises(UsageError) as refused:
        dps.main(["--out", str(tmp_path / "out"), *argv])
    assert named in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_the_measured_fastest_setting_is_read_back():
    setting, ms64, ms256 = plan.fastest_setting(json.loads(MEASURED.read_text()))
    assert setting == "bfloat16_fused_flat" and 3.6 < ms64 < 3.7 and 10.2 < ms256 < 10.3


def test_planned_steps_fit_the_time_at_the_measured_sharing_cost(tmp_path):
    """4 runs at once (2 at batch 64, 2 at 256) in 380 s: on 2026-11-27's H200 the old plan (20700
    and 7400 steps) ran out of time; each run now fits with its compilation inside the time."""
    jobs = plan.sweep_jobs("bfloat16_fused_flat", 3.66, 10.25, 380.0, tmp_path)
    steps = {
        name: int(next(a for a in cmd if a.startswith("training.train_steps=")).split("=")[1]) for name, cmd in jobs
    }
    for name, n in steps.items():
        ms = 10.25 if "b256" in name else 3.66
        assert plan.COMPILE_S + plan.EVAL_S + n * ms * 4 * plan.SHARING_COST / 1000 < 380, (name, n)
    assert steps["adam1e-4_b64"] < 20700 and steps["adam1e-3_b256_warm"] < 7400


def test_the_table_trains_the_mechanisms_asked_for(tmp_path):
    jobs = plan.sweep_jobs(
        "bfloat16_fused_flat",
        3.66,
        10.25,
        400.0,
        tmp_path,
        table="adam1e-3_b256_warm",
        fixed_steps=7000,
        mechanisms=("favor", "rebased", "linear"),
    )
    assert [name for name, _ in jobs] == ["favor", "rebased", "linear"]
    for _, cmd in jobs:
        assert "training.train_steps=7000" in cmd and "training.batch_size=256" in cmd


def test_library_matrix_products_without_a_name_stack_are_not_the_optimizers():
    from scripts.bench.paper_cell import part_of

    assert part_of("XlaModule:", "nvjet_sm90_tss_128x64_64x8_1x2_h_bz_NTT") == "matrix products (no name stack)"
    assert (
        part_of("XlaModule:", "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nt_align1>")
        == "matrix products (no name stack)"
    )
    assert part_of("jit(chunk)/while/body/eval_jaxpr/add", "loop_add_fusion_123") == "optimizer update, clipping, loss"
    assert part_of("jit(chunk)/while/body/eval_jaxpr/jvp(gpt2)/block_0/seq_mixer/vmap()/exp", "fusion_1") == "attention"
    assert part_of("", "wrapped_transpose_3") == "layout copies (no name stack)"


@pytest.mark.parametrize("points, dims", [(12, 5), (4, 6)])
def test_the_last_points_least_squares_is_the_baselines_at_the_last_prefix(points, dims):
    """The evaluation's host-side least squares against baselines.regression.least_squares (pinv of
    every prefix), over- and under-determined (the minimum-norm solution)."""
    import jax
    from baselines.regression import least_squares
    from scripts.paper_mechanisms import last_least_squares
    from src.tasks.pairs import pair_prompt

    prompt = pair_prompt(
        jax.random.normal(jax.random.key(points), (7, points, dims)),
        jax.random.normal(jax.random.key(dims), (7, points)),
    )
    assert np.abs(last_least_squares(prompt) - np.asarray(least_squares(prompt))[:, -1]).max() <= 1e-4
