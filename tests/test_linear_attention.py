"""scripts/linear_attention.py (make linear_attention): the runs it makes and the comparisons its
report draws, on made-up results (the study itself: make linear_attention)."""

from __future__ import annotations

from pathlib import Path

from scripts import linear_attention as study


def test_the_study_makes_every_variant_and_the_gd_papers_models():
    jobs = study.make_jobs(Path("runs/none"), (0, 1, 2), quick=False)
    assert len(jobs) == 3 * (len(study.VARIANTS) + len(study.GD_PAPER)) and len({j.name for j in jobs}) == len(jobs)
    mixers = {j.name: j.settings.model.seq_mixer for j in jobs if getattr(j, "mechanism", None)}
    assert mixers["linear_sum_lr0.001_seed0"].options.scale == "sum"
    assert mixers["linear_mean_lr0.0001_seed2"].options.scale == "mean"
    lr = {j.name: j.settings.train.learning_rate for j in jobs}
    assert lr["linear_sum_lr0.0001_seed1"] == 1e-4 and lr["rebased_lr0.001_seed0"] == 1e-3
    steps = {j.name: j.settings.train.steps for j in jobs}
    assert (
        steps["linear_sum_lr0.001_seed0"] == 6000 and steps["twolayer_seed0"] == 10_000 and steps["lsa1_seed0"] == 5000
    )
    models = {j.name: j.settings.model.mixers for j in jobs if getattr(j, "label", None)}
    assert models["twolayer_seed0"] == ("softmax", "linear")
    assert models["twolayer_linear_copy_seed0"] == ("linear", "linear")


def test_each_variant_is_set_against_one_gd_step():
    curve = lambda last: {
        "model": [1.0] * 10 + [last],
        "gd_step": [1.0] * 10 + [0.5],
        "least_squares": [1.0] * 5 + [0.0] * 6,
    }
    lines = study.against_gd({"learns": {"curve_mean": curve(0.25)}, "stalls": {"curve_mean": curve(0.95)}})
    text = "\n".join(lines)
    assert "scores 0.500 at n = 10" in text
    assert "| learns | 0.250 | 0.50× | yes |" in text and "| stalls | 0.950 | 1.90× | no |" in text
