"""The paper's numbers do not move: three small runs through the runner CLIs give exactly
the metrics, analysis outputs and parameter bytes recorded by the code before the
registries were introduced (commit d39df7a; see tests/golden_runs.py).

XLA's CPU code differs with the instruction set, so the last digit of a float does too: the
same commit gives different bits on an AVX2-only CPU than on the machine golden_v1.json was
recorded on. Each golden file was written by the code before the one-core refactor on one kind
of CPU (d39df7a; on the AMD AVX-512 kind, 6aca606, whose lsa code is 4d70975's); the test picks
the file of this machine's kind and compares exactly. A kind with no file skips, saying so."""
import json
from pathlib import Path

import pytest

from golden_runs import RUNS, cpu_kind, read_run, train

FOLDER = Path(__file__).parent / "golden"


GOLDEN_FILES = {"default": "golden_v1.json",        # where the golden runs were introduced (2026-11-22)
                "avx2": "golden_v1_avx2.json",      # an AMD EPYC with AVX2, 2026-11-23
                "amd_avx512": "golden_v1_amd_avx512.json"}   # an AMD EPYC (family 25), 2026-11-25
KIND = cpu_kind()
GOLDEN = json.loads((FOLDER / GOLDEN_FILES[KIND]).read_text()) if KIND in GOLDEN_FILES else {}


@pytest.mark.skipif(KIND not in GOLDEN_FILES, reason=f"no golden runs recorded on CPU kind {KIND!r}")
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
