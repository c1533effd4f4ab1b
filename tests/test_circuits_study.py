"""The circuits study's parts and GPT-2 (scripts/circuits.py): --parts trains and reports only the parts
it names, --config gives the GPT-2 of the probe and selection runs (the GPU queue's circuits jobs),
and the report and its Beside-the-paper budget say which GPT-2 was probed. The study end to end:
tests/test_probes.py (its quick form) and tests/test_gpu_job_runs.py (the circuits jobs' rehearsals)."""

from __future__ import annotations

import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from plots.circuits_probes import gpt2_named, gpt2_size, recorded_gpt2
from plots.paper_rows import circuits as circuit_rows
from plots.paper_rows_base import Budget, circuits_gpt2
from scripts import circuits
from src.flags import UsageError

ROOT = Path(__file__).resolve().parents[1]
GPU_CONFIG = "configs/gpu/circuits_probes.yaml"
# the mechanisms study's GPT-2, as the circuits study's results before it recorded its GPT-2 are read
CIRCUITS_GPT2 = Budget(7000 * 64, "3 × 64, 4 heads (d = 5)", "Adam 2e-3 warm-up + decay, one rate")


def names(parts=None, config=None) -> set[str]:
    return {cell.name for cell in circuits.study_cells(Namespace(quick=True, parts=parts, config=config))}


def test_parts_choose_the_cells():
    every = names()
    assert names("probes") == {"probe_gpt2", "probe_gpt2_fixed_w"}
    assert names("selection") == {"selection_mixture", "selection_sigma0.1", "selection_sigma0.5"}
    assert names("heads") == {"induction_L1", "induction_L2", "mqar_L1", "mqar_L2"}
    assert names("probes_lsa") == {"probe_lsa1", "probe_lsa1_fixed_w", "probe_twolayer", "probe_twolayer_fixed_w"}
    assert names("heads,probes,probes_lsa,selection") == every and len(every) == 13


@pytest.mark.parametrize("parts", ["probe", "probes,,bogus", ","])
def test_an_unknown_part_is_refused_in_one_line(parts):
    with pytest.raises(UsageError, match="--parts=.*accepted: a comma list of heads, probes, probes_lsa, selection"):
        circuits.parts_of(Namespace(parts=parts))


def test_the_command_refuses_a_bad_part_or_config_before_any_work(tmp_path):
    refused = ((["--parts", "heads,probe"], "--parts='heads,probe'"), (["--config", "none.yaml"], "none.yaml"))
    for flags, said in refused:
        done = subprocess.run(
            [sys.executable, "-m", "scripts.circuits", "--quick", *flags, "--runs-dir", str(tmp_path / "runs")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "runs").exists()


def test_the_config_gives_the_probed_gpt2():
    flags = Namespace(quick=False, parts="probes,selection", config=GPU_CONFIG)
    cells = {c.name: c for c in circuits.study_cells(flags)}
    for name in ("probe_gpt2", "probe_gpt2_fixed_w", "selection_mixture"):
        model, train = cells[name].settings.model, cells[name].settings.train
        assert (model.n_layer, model.width, model.n_head, model.n_dims) == (12, 256, 8, 5)
        assert (train.steps, train.batch_size, train.learning_rate) == (30000, 64, 5e-4)
    assert cells["probe_gpt2_fixed_w"].settings.train.num_tasks == 1
    assert cells["selection_mixture"].settings.task.name == "noise_mixture_regression"


def test_the_report_and_the_budget_name_the_gpt2():
    gpt2 = {"config": GPU_CONFIG, "layers": 12, "width": 256, "heads": 8, "steps": 30000, "batch_size": 64}
    earlier = recorded_gpt2({})  # results written before the study recorded its GPT-2
    assert gpt2_named(earlier) == "The mechanisms study's softmax GPT-2"
    assert gpt2_size(earlier) == "3 layers of width 64, 4 heads, 7,000 steps at batch 64"
    assert gpt2_named(gpt2) == f"The softmax GPT-2 of {GPU_CONFIG}"
    assert gpt2_size(gpt2) == "12 layers of width 256, 8 heads, 30,000 steps at batch 64"
    assert circuits_gpt2(earlier) == CIRCUITS_GPT2
    mechanisms = {**gpt2, "config": "configs/mechanisms.yaml", "layers": 3, "width": 64, "heads": 4, "steps": 7000}
    assert circuits_gpt2({**mechanisms, "learning_rate": 0.002}) == CIRCUITS_GPT2
    budget = circuits_gpt2({**gpt2, "learning_rate": 5e-4})
    assert budget == Budget(1_920_000, "12 × 256, 8 heads (d = 5)", "Adam 5e-4 warm-up + decay, one rate")
    probe = {"w_ols_ridge": 0.5, "read": "last_y"}
    rows = circuit_rows({"checks": {"probes": probe}, "gpt2": {**gpt2, "learning_rate": 5e-4}}, ROOT / "report")
    assert [r.budget for r in rows] == [budget]
    assert [r.budget for r in circuit_rows({"checks": {"probes": probe}}, ROOT / "report")] == [CIRCUITS_GPT2]
