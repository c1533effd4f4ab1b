"""A run directory read back by an analysis goes through its system's settings, validation and
bounds: a bad or hostile config.json, or parameters that mean nothing, end in one line naming
the key or the file (exit 2), never a hang, an "unexpected" error or a curve of NaN; params.npz
files written before the one sequence family still load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from analysis import alignment, icl_curve

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import runners.run_concat_inputs_targets as concat
    import runners.train as train

    base = tmp_path_factory.mktemp("read_back")
    assert (
        train.main(
            [
                "--config",
                str(ROOT / "configs/quick.yaml"),
                "--set",
                "training.train_steps=20",
                "--set",
                "training.log_every=10",
                "--set",
                "training.eval_size=50",
                "--out",
                str(base / "gpt2"),
                "--quiet",
            ]
        )
        == 0
    )
    assert (
        concat.main(
            [
                "--steps",
                "20",
                "--batch_size",
                "32",
                "--eval_size",
                "50",
                "--log_every",
                "10",
                "--out",
                str(base / "lsa"),
                "--quiet",
            ]
        )
        == 0
    )
    return base


def edited(runs, tmp_path, system, change) -> Path:
    run = tmp_path / system
    shutil.copytree(runs / system, run)
    config = json.loads((run / "config.json").read_text())
    change(config["settings"])
    (run / "config.json").write_text(json.dumps(config))
    return run


CASES = [  # (system, edit of config.json's settings, words the one line must hold)
    ("gpt2", lambda s: s["train"].update(eval_size=10**9), "train.eval_size=1000000000"),
    ("gpt2", lambda s: s["train"].update(eval_size=-5), "train.eval_size=-5"),
    ("gpt2", lambda s: s["model"].update(width="64"), "model.width='64'"),
    ("gpt2", lambda s: s["model"].update(seq_mixer={"name": "local", "options": {"window": -1}}), "window=-1"),
    ("gpt2", lambda s: s.update(system="gpt3"), "system 'gpt3'"),
    ("gpt2", lambda s: s["train"].update(bogus=1), "train.bogus"),
    ("lsa", lambda s: s["model"].update(family="gpt3"), "model.family='gpt3'"),
    ("lsa", lambda s: s["task"].update(d=0), "task.d=0"),
    ("lsa", lambda s: s.pop("model"), "settings.model"),
]


@pytest.mark.parametrize("system, change, words", CASES)
def test_a_bad_config_json_is_one_line(runs, tmp_path, capsys, system, change, words):
    run = edited(runs, tmp_path, system, change)
    main = icl_curve.main if system == "gpt2" else alignment.main
    capsys.readouterr()
    assert main(["--run", str(run)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "unexpected" not in lines[0], lines


def test_non_finite_parameters_are_refused(runs, tmp_path, capsys):
    run = tmp_path / "nan"
    shutil.copytree(runs / "gpt2", run)
    with np.load(run / "params.npz") as data:
        np.savez(run / "params.npz", **{k: data[k] * np.nan for k in data.files})
    capsys.readouterr()
    assert icl_curve.main(["--run", str(run)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "non-finite" in lines[0]


def test_params_of_the_gpt2_model_before_the_one_family_still_load(runs, tmp_path):
    """Rename the parameters to the names the GPT2 module gave them (model/gpt2/block_0/mixer/...):
    the analysis reads them as the same model, and the curve is the same."""
    legacy = {
        "/norm_seq/": "/ln_mixer/",
        "/seq_mixer/": "/mixer/",
        "/norm_state/": "/ln_mlp/",
        "/state_mixer/up/": "/mlp_in/",
        "/state_mixer/down/": "/mlp_out/",
        "/norm_final/": "/ln_final/",
    }
    run = tmp_path / "old"
    shutil.copytree(runs / "gpt2", run)
    with np.load(run / "params.npz") as data:
        arrays = {k: data[k] for k in data.files}
    renamed = {}
    for key, value in arrays.items():
        for new, old in legacy.items():
            key = key.replace(new, old)
        renamed["model/" + key] = value
    assert renamed.keys() != {"model/" + k for k in arrays}
    np.savez(run / "params.npz", **renamed)
    assert icl_curve.main(["--run", str(run)]) == 0
    assert (run / "analysis/icl_curve.csv").read_text() == (runs / "gpt2/analysis/icl_curve.csv").read_text()


def test_a_study_refuses_a_report_directory_it_cannot_write_before_training(tmp_path, capsys):
    """chattr +i makes a folder read-only even for root; without it, chmod (for other users)."""
    import os
    import subprocess
    from scripts import mechanisms

    locked = tmp_path / "locked"
    locked.mkdir()
    immutable = subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode == 0
    if not immutable:
        if os.geteuid() == 0:
            pytest.skip("neither chattr nor a non-root user to make a folder read-only")
        locked.chmod(0o500)
    try:
        code = mechanisms.main(
            ["--quick", "--runs-dir", str(tmp_path / "runs"), "--report-dir", str(locked / "report")]
        )
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(locked)])
        locked.chmod(0o700)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--report-dir" in lines[0] and "cannot be written" in lines[0]
    assert not (tmp_path / "runs").exists()
