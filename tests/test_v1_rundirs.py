"""Run directories made before the registries (schema 1, tests/fixtures/v1, written by the code
of commit d39df7a) are read by every analysis and plot, and mean the same model."""

import json
import shutil
from pathlib import Path

import pytest

from golden_runs import same_numbers
from analysis import alignment, attention_stats, ood_eval
from plots import attention_quick, fig_templates
from src import rundir as names
from src.rundir import RunDir
from src.rundir.__main__ import check_main
from src.settings import SCHEMA_VERSION

FIXTURES = Path(__file__).parent / "fixtures" / "v1"


@pytest.fixture
def v1(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "v1")
    return tmp_path / "v1"


def test_v1_settings_have_no_schema_version(v1):
    config = json.loads((v1 / "twolayer_v1" / names.CONFIG).read_text())
    assert "schema_version" not in config["settings"]
    settings = RunDir(v1 / "twolayer_v1").load_settings()
    assert settings.model.mixers == ("softmax", "linear") and settings.system == "lsa"


@pytest.mark.parametrize("run", ["twolayer_v1", "order_runs/lsa1__ord-easy2hard__noise-clean__seed0"])
def test_every_analysis_reads_a_v1_run(v1, run):
    path = v1 / run
    summary = json.loads((path / names.SUMMARY).read_text())
    before = json.loads((path / names.ALIGNMENT).read_text())
    for output in (names.ALIGNMENT, names.OOD, names.ATTENTION_STATS):
        (path / output).unlink()
    assert alignment.main(["--run", str(path)]) == 0
    assert ood_eval.main(["--run", str(path)]) == 0
    assert attention_stats.main(["--run", str(path)]) == 0
    assert attention_quick.main(["--run", str(path)]) == 0
    after = json.loads((path / names.ALIGNMENT).read_text())
    # the same model on the same eval tasks: the old numbers, bit for bit (on the fixtures' CPU)
    assert same_numbers(after, before)
    assert same_numbers(after["model_loss"], summary["eval_loss"])
    assert check_main(["--figs", str(path)]) == 0


def test_sweep_figures_from_a_v1_csv(v1, tmp_path):
    out = tmp_path / "figs"
    assert fig_templates.main(["--from", str(v1 / "order_v1.csv"), "--out", str(out)]) == 0
    assert (out / "order_sensitivity.png").exists() and (out / "ood_curve.png").exists()


def test_config_json_alone_reruns_a_v1_run_bit_for_bit(v1, tmp_path):
    from src.cli.rerun import main as rerun_main

    out = tmp_path / "again"
    assert rerun_main(["--config", str(v1 / "twolayer_v1" / names.CONFIG), "--out", str(out), "--quiet"]) == 0
    old = json.loads((v1 / "twolayer_v1" / names.SUMMARY).read_text())
    new = json.loads((out / names.SUMMARY).read_text())
    for key in ("eval_loss", "gd_loss", "align_cos", "copy_own", "copy_next", "copy_other"):
        assert same_numbers(new[key], old[key]), key
    assert json.loads((out / names.CONFIG).read_text())["settings"]["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize(
    "content, words",
    [
        ("{not json", "is not JSON"),
        ('["a list"]', "holds no settings"),
        ('{"settings": {"task": {}}}', "is not a settings mapping"),
    ],
)
def test_rerun_refuses_a_bad_config_in_one_line(tmp_path, capsys, content, words):
    from src.cli.rerun import main as rerun_main

    config = tmp_path / "config.json"
    config.write_text(content)
    assert rerun_main(["--config", str(config), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and not (tmp_path / "x").exists()
