"""The numbers of the three newer systems do not move: small runs through their command lines
give exactly the metrics, outputs and parameter bytes recorded by commit 4d70975, before the
one-core refactor (tests/golden_systems.py). The suite runs one run per system; `make golden`
checks every recorded run. The GPT-2 and recipe models are presets of the one sequence family
now, whose parameters are named by role: the recorded names are read through
`canonical_param_name` (the same map that loads their old params.npz files).

The file was recorded on the 'default' kind of CPU (tests/golden_runs.py: cpu_kind); XLA's CPU
code gives other last digits on another instruction set, where these tests are skipped."""
import json
from pathlib import Path

import pytest

from golden_runs import cpu_kind
from golden_systems import GOLDEN as GOLDEN_FILE
from golden_systems import RUNS, expected, read_run, train

GOLDEN = json.loads(GOLDEN_FILE.read_text())
IN_SUITE = ("gpt2_fire_curriculum", "recipe_mqar_gla", "dynamics_attnS")


def compare(name: str, out: Path) -> None:
    got, want = read_run(out), expected(name, GOLDEN)
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], f"{name}: {key} moved"


@pytest.mark.skipif(cpu_kind() != "default", reason="recorded on the 'default' CPU kind only")
@pytest.mark.parametrize("name", IN_SUITE)
def test_golden_system_run_is_bit_identical(name, tmp_path):
    runner, argv = RUNS[name]
    train(runner, argv, tmp_path / name)
    compare(name, tmp_path / name)
