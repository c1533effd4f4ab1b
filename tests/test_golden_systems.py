"""The numbers of the three newer systems do not move: small runs through their command lines
give exactly the metrics, outputs and parameter bytes recorded by commit 4d70975, before the
one-core refactor (tests/golden_systems.py). The suite runs one run per system; `make golden`
checks every recorded run. The GPT-2 and recipe models are presets of the one sequence family
now, whose parameters are named by role: the recorded names are read through
`canonical_param_name` (the same map that loads their old params.npz files).

One file per kind of CPU it was recorded on (tests/golden_runs.py: cpu_kind; XLA's CPU code
gives other last digits on another instruction set); on a kind with no file these tests skip."""
import json
from pathlib import Path

import pytest

from golden_runs import cpu_kind
from golden_systems import RUNS, expected, golden_file, read_run, train

GOLDEN_FILE = golden_file()
GOLDEN = json.loads(GOLDEN_FILE.read_text()) if GOLDEN_FILE is not None else {}
IN_SUITE = ("gpt2_fire_curriculum", "recipe_mqar_gla", "dynamics_attnS")


def compare(name: str, out: Path) -> None:
    got, want = read_run(out), expected(name, GOLDEN)
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], f"{name}: {key} moved"


@pytest.mark.skipif(GOLDEN_FILE is None, reason=f"no golden runs recorded on CPU kind {cpu_kind()!r}")
@pytest.mark.parametrize("name", IN_SUITE)
def test_golden_system_run_is_bit_identical(name, tmp_path):
    runner, argv = RUNS[name]
    train(runner, argv, tmp_path / name)
    compare(name, tmp_path / name)
