"""The paper's numbers do not move: three small runs through the runner CLIs give exactly
the metrics, analysis outputs and parameter bytes recorded by the code before the
registries were introduced (tests/golden/golden_v1.json, see tests/golden_runs.py)."""
import json
from pathlib import Path

import pytest

from golden_runs import RUNS, read_run, train

GOLDEN = json.loads((Path(__file__).parent / "golden" / "golden_v1.json").read_text())


@pytest.mark.parametrize("name", list(RUNS))
def test_golden_run_is_bit_identical(name, tmp_path):
    runner, flags = RUNS[name]
    train(runner, flags, tmp_path / name)
    got, want = read_run(tmp_path / name), GOLDEN[name]
    assert got["metrics"] == want["metrics"]
    assert got["summary"] == want["summary"]
    assert got["alignment"] == want["alignment"]
    assert got["ood_csv"] == want["ood_csv"]
    assert got["params_sha256"] == want["params_sha256"]
    assert got.get("auroc") == want.get("auroc")
