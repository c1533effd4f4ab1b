"""The paper's numbers do not move: three small runs through the runner CLIs give the metrics,
analysis outputs and parameters recorded by the code before the registries were introduced
(commit d39df7a; see tests/golden_runs.py).

XLA's CPU code rounds with the machine (tests/golden_machines.py): where a record was made on a
machine of this one's fingerprint the run must match it bit for bit, parameter bytes included;
elsewhere every recorded number must agree to 1e-6 relative (the parameters by their shapes and
squared norm), against every record of the run. How they were compared is printed at the end of
the session, and `make golden_record` adds this machine's record."""

import pytest

from golden_machines import compare_run, param_samples
from golden_runs import RUNS, read_run, train


@pytest.mark.parametrize("name", list(RUNS))
def test_golden_run_matches_its_record(name, tmp_path):
    runner, flags = RUNS[name]
    train(runner, flags, tmp_path / name)
    moved, how = compare_run(name, read_run(tmp_path / name), param_samples(tmp_path / name / "params.npz"))
    assert not moved, f"{how}: moved: {'; '.join(moved)}"
