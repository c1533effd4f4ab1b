"""The zoo study (scripts/zoo.py, plots/zoo_report.py): its mixers and grid refused in one line,
its runs named and sized as configs/zoo.yaml says (hybrids included), the report's verdict read
off numbers, and `--quick` end to end (make test_studies)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from plots.zoo_report import kind_of, verdict
from scripts import zoo
from scripts.mixers import make_jobs
from scripts.mixers_grid import read_grid
from src.flags import UsageError

ROOT = Path(__file__).resolve().parent.parent


def test_mixers_are_registered_names_with_options_or_hybrids_and_anything_else_is_refused():
    assert zoo.mixer_names(None) == list(zoo.ZOO)
    assert zoo.mixer_names("attention, base_conv+based") == ["attention", "base_conv+based"]
    for bad, words in [
        ("attention,base_conv+flash", "--mixers='base_conv+flash': 'flash' is unknown; accepted: attention,"),
        ("base_conv:kernel_size=-2", "base_conv: kernel_size=-2; accepted: -1 (long) or an integer >= 1"),
        ("base_conv:kernel=3", "has no option 'kernel'; accepted: filter_order, kernel_size, max_length"),
        ("base_conv:kernel_size", "'kernel_size' is not accepted; accepted: name:option=value"),
        ("based++base_conv", "an empty entry"),
        (" , ", "is not accepted; accepted: a comma list"),
    ]:
        with pytest.raises(UsageError, match=re.escape(words)) as err:
            zoo.mixer_names(bad)
        assert "\n" not in str(err.value)


def test_zoologys_baseconv_alternates_a_short_and_the_long_convolution_by_layer(tmp_path):
    jobs = make_jobs(tmp_path, ["base_conv+base_conv:kernel_size=-1"], [0], False, read_grid(zoo.CONFIG))
    job = next(j for j in jobs if j.seq_len == 64)
    assert job.name == "mqar_k4_T64_base_conv+base_conv_kernel_size-1_w64_seed0"
    assert [m.options.kernel_size for m in job.settings.model.layer_mixers()] == [3, -1]
    # the short convolution keeps its last 2 inputs, the long one every input
    assert job.settings.model.state_floats(64) == 2 * 64 + 64 * 64
    assert kind_of("base_conv+base_conv:kernel_size=-1") == "gated convolution"
    assert kind_of("base_conv+based") == kind_of("rwkv7") == "small state" and kind_of("attention") == "reference"


def test_the_grid_makes_every_mixer_at_every_cell_and_rate_with_its_state(tmp_path):
    grid = read_grid(zoo.CONFIG)
    assert [(c.seq_len, c.kappa) for c in grid.cells] == [(64, 4), (128, 8)] and grid.widths == (64,)
    jobs = make_jobs(tmp_path, list(zoo.ZOO), [0], False, grid)
    assert len(jobs) == len(zoo.ZOO) * 2 and grid.learning_rates == (0.003,)
    assert read_grid("configs/zoo_rates.yaml").learning_rates == (0.001, 0.003)
    based = next(j for j in jobs if j.name == "mqar_k8_T128_base_conv+based_w64_seed0")
    model = based.settings.model
    assert [m.name for m in model.layer_mixers()] == ["base_conv", "based"] and model.n_head == 1
    # a BaseConv layer keeps (3 − 1) D; Based (f = 16, one head of 64) E (K + 1), E = 1 + 16 + 136
    assert model.state_floats(128) == 2 * 64 + 153 * 65
    attention = next(j for j in jobs if j.name == "mqar_k8_T128_attention_w64_seed0")
    assert attention.settings.model.state_floats(128) == 2 * (2 * 128 * 64)  # both layers' keys and values


def test_a_recorded_rate_set_per_mixer_and_cell(tmp_path):
    """rates: {mixer: [...]} over a cell's learning_rates over the grid's: each (mixer, cell) trains at
    its own set and reports the best; a name carries its rate where the set is not the grid's one."""
    config = tmp_path / "grid.yaml"
    config.write_text(
        "vocab_size: 256\ncells:\n  - {seq_len: 64, kappa: 4, steps: 10}\n"
        "  - {seq_len: 128, kappa: 8, steps: 10, learning_rates: [0.001, 0.003]}\n"
        "widths: [16]\nheads: 1\nlearning_rates: [0.003]\nrates: {h3: [0.0001, 0.01]}\n"
    )
    grid = read_grid(str(config))
    jobs = make_jobs(tmp_path, ["attention", "h3"], [0], False, grid)
    got = sorted((j.mixer, j.seq_len, j.learning_rate) for j in jobs)
    assert got == [
        ("attention", 64, 0.003),
        ("attention", 128, 0.001),
        ("attention", 128, 0.003),
        ("h3", 64, 0.0001),
        ("h3", 64, 0.01),
        ("h3", 128, 0.0001),
        ("h3", 128, 0.01),
    ]
    names = {j.name for j in jobs}
    assert "mqar_k4_T64_attention_w16_seed0" in names  # the grid's own set: the name as before
    assert {"mqar_k8_T128_attention_w16_lr0.001_seed0", "mqar_k4_T64_h3_w16_lr0.0001_seed0"} <= names
    for text, words in [
        ("rates: {h3: []}", "rates.h3=[] is not accepted"),
        ("rates: {h3: [0.01, 0.01]}", "without repeats"),
        ("rates: {flash: [0.01]}", "'flash' is unknown"),
        ("rates: [0.01]", "accepted: a mapping of mixer"),
        ("cells:\n  - {kappa: 4, learning_rates: [-1]}", "a number > 0"),
    ]:
        config.write_text(text + "\n")
        with pytest.raises(UsageError, match=re.escape(words)) as err:
            read_grid(str(config))
        assert "\n" not in str(err.value)
    config.write_text("rates: {hyena: [0.01]}\n")
    with pytest.raises(UsageError, match="rates names 'hyena', which this study does not run"):
        make_jobs(tmp_path, ["attention"], [0], False, read_grid(str(config)))


def rows(**accuracies):
    out = []
    for cell, by_mixer in accuracies.items():
        t, kappa = map(int, cell.split("_"))
        out += [
            {"mixer": m, "seq_len": t, "kappa": kappa, "width": 64, "seed": 0, "accuracy": a}
            for m, a in by_mixer.items()
        ]
    return out


def test_the_verdict_names_the_cells_where_gated_convolutions_fall():
    found = verdict(
        rows(
            **{
                "64_4": {"attention": 1.0, "base_conv": 0.8, "hyena": 0.75, "delta_net": 0.9},
                "128_8": {"attention": 0.99, "base_conv": 0.4, "hyena": 0.8, "delta_net": 0.7},
            }
        ),
        ["attention", "base_conv", "hyena", "delta_net"],
    )
    assert found[0].startswith("- T = 64, κ = 4, width 64: attention 1.000; no gated convolution falls 0.3 below it")
    assert "base_conv fall ≥ 0.3 below it (base_conv 0.400, hyena 0.800)" in found[1]
    assert "small-state mixers: delta_net 0.700" in found[1]


@pytest.mark.study
def test_quick_zoo_study_writes_its_report(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.zoo",
            "--quick",
            "--mixers",
            "attention,base_conv+based",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "report" / "zoo_results.json").read_text())
    assert {r["mixer"] for r in results["results"]} == {"attention", "base_conv+based"}
    assert all(r["status"] == "complete" and r["state_floats"] > 0 for r in results["results"])
    report = (tmp_path / "report" / "ZOO.md").read_text()
    assert "## T = 64, κ = 4, width 16" in report and "| base_conv+based |" in report
    assert (tmp_path / "report" / "figures" / "zoo" / "accuracy_state.png").stat().st_size > 1000
