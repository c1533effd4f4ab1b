"""scripts/originals_beside_ours (the original limits_of_icl code beside our mechanisms study),
without torch: the exported prompts are the study's eval set (its recorded least-squares and
averaging rows come back from them), the verdict rule, the harness's schedule against ours, the
protocol the harness is given, and one-line refusals of bad paths."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from scripts import originals_beside_ours as obo
from scripts import originals_beside_ours_prompts as obo_prompts
from scripts import originals_beside_ours_runs as obo_runs

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "prompts.npz"
    obo_prompts.export_prompts(path)
    with np.load(path) as data:
        return data["xs"], data["ys"]


def test_exported_prompts_give_the_recorded_least_squares_row(exported):
    xs, ys = exported
    assert xs.shape == (2000, 11, 5) and ys.shape == (2000, 11) and xs.dtype == np.float32
    results = json.loads(obo.RESULTS.read_text())
    rows = obo_prompts.baseline_rows(xs, ys)
    for mechanism in ("softmax_causal", "favor"):
        recorded = obo_prompts.recorded_rows(results, mechanism)
        for name in ("least_squares", "averaging"):
            # from n = d least squares interpolates: its error is float32 rounding, 1e-13 to 3e-9 by
            # the CPU (2.8e-9 at n = 5 on an AMD family 26, 5.4e-10 where the row was recorded)
            np.testing.assert_allclose(
                rows[name][None, :].repeat(len(recorded[name]), 0), recorded[name], rtol=1e-5, atol=1e-8
            )
    assert obo_prompts.check_prompts(xs, ys, results, ["softmax_causal", "favor"])["favor"]["least_squares"] < 1e-5


def test_other_prompts_are_refused(exported):
    xs, ys = exported
    results = json.loads(obo.RESULTS.read_text())
    with pytest.raises(RuntimeError, match="not the recorded eval set"):
        obo_prompts.check_prompts(xs[:1000], ys[:1000], results, ["softmax_causal"])


def test_verdict_rule_on_hand_made_numbers():
    # spreads 0.02 (ours) and 0.01 (original); means 0.04 and 0.05: gap 0.01 < 0.02
    v = obo.verdict([0.03, 0.04, 0.05], [0.045, 0.05, 0.055])
    assert v["verdict"] == "agrees" and v["larger_spread"] == pytest.approx(0.02)
    assert v["mean_difference"] == pytest.approx(0.01)
    # gap 0.06, larger spread 0.02: disagrees by 3 spreads
    v = obo.verdict([0.03, 0.04, 0.05], [0.095, 0.10, 0.105])
    assert v["verdict"] == "disagrees" and v["difference_in_spreads"] == pytest.approx(3.0)
    assert "3.00 times" in v["text"]
    # a gap equal to the spread is not "less than": disagrees
    assert obo.verdict([0.0, 0.5], [0.5, 1.0])["verdict"] == "disagrees"
    s = obo.spread_summary([0.03, 0.04, 0.05])
    assert (s["mean"], s["min"], s["max"]) == pytest.approx((0.04, 0.03, 0.05))
    assert s["std"] == pytest.approx(0.01) and s["spread"] == pytest.approx(0.02)


def _harness():
    spec = importlib.util.spec_from_file_location("limits_of_icl_train", obo_runs.HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no torch at import: it is imported inside main()
    return module


def test_harness_schedule_is_ours():
    from src.optim import WARMUP_DECAYS

    factor = _harness().linear_warmup_decay(7000, 0.03)
    ours = WARMUP_DECAYS["linear"](2e-3, 0.03, 7000)
    steps = np.arange(7000)
    np.testing.assert_allclose([2e-3 * factor(int(s)) for s in steps], np.asarray(ours(steps)), rtol=1e-5, atol=1e-9)
    assert factor(0) == 0 and factor(210) == 1 and factor(6999) > 0


def test_harness_gets_the_study_protocol():
    settings = obo_prompts.mechanisms_settings()
    argv = obo_runs.harness_argv("py", Path("/checkout"), settings, "favor", 2, Path("p.npz"))
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert flags == {
        "--attention": "favor",
        "--attention-kwargs": '{"rf_dim": 64}',
        "--seed": "2",
        "--prompts": "p.npz",
        "--steps": "7000",
        "--lr": "0.002",
        "--warmup-fraction": "0.03",
        "--grad-clip": "10.0",
        "--batch": "64",
        "--width": "64",
        "--layers": "3",
        "--heads": "4",
        "--dims": "5",
        "--points": "11",
        "--n-positions": "17",
        "--threads": "1",
    }
    softmax = obo_runs.harness_argv("py", Path("/checkout"), settings, "softmax_causal", 0, Path("p.npz"))
    assert softmax[softmax.index("--attention-kwargs") + 1] == "{}"


def _exit_code(argv) -> int:
    try:
        return obo.main(argv)
    except SystemExit as stop:  # argparse's own refusals
        return stop.code


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--torch-python", sys.executable, "--limits-of-icl", "/nonexistent"], "--limits-of-icl"),
        (["--torch-python", "/nonexistent/python", "--limits-of-icl", "."], "--limits-of-icl"),
        (["--limits-of-icl", "."], "--torch-python"),
        (["--torch-python", sys.executable, "--limits-of-icl", ".", "--jobs", "3"], "--jobs"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(argv, word, capsys):
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and word in err


def test_bad_torch_python_mechanism_and_seed(tmp_path, capsys):
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    (checkout / "src" / "wrapper_model.py").write_text("")
    for argv, word in (
        (["--torch-python", str(tmp_path / "none")], "--torch-python"),
        (["--torch-python", sys.executable, "--mechanisms", "rela"], "--mechanisms='rela'"),
        (["--torch-python", sys.executable, "--seeds", "7"], "no recorded seed 7"),
    ):
        assert _exit_code([*argv, "--limits-of-icl", str(checkout)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and word in err, err
