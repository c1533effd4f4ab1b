"""The golden runs: three small trainings through the runner CLIs whose every number must
not move when the code is refactored (issue 11: "the paper's numbers do not move").

`record()` returns, per run, every metrics row (without wall times), the summary's metric
values, the analysis outputs (alignment.json, ood.csv, attention_stats AUROC) and a sha256
of every parameter array. `python tests/golden_runs.py OUT.json` writes them; the golden
files in tests/golden/ were written by the code of commit d39df7a (before the registries), one
per kind of CPU (tests/test_golden.py picks the one of the machine).
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

SMALL = ["--batch_size", "256", "--eval_size", "500", "--log_every", "100", "--quiet"]
# name -> (runner module, flags)
RUNS = {
    "lsa1": ("runners.run_concat_inputs_targets",
             ["--steps", "300", "--save_attention", *SMALL]),
    "lsa_rec_k3": ("runners.run_concat_inputs_targets",
                   ["--steps", "200", "--num_layers", "3", *SMALL]),
    "twolayer": ("runners.run_softmax_copy",
                 ["--steps", "200", "--ordering", "easy2hard", "--noise_mode", "random_pairs",
                  "--noise_p", "0.2", "--save_attention", *SMALL]),
}
TIMING_KEYS = {"elapsed_s", "train_seconds"}


def cpu_kind() -> str:
    """The kind of CPU, as far as XLA's CPU code (and so the last digit of a float) differs:
    'avx2' for an x86 CPU with AVX2 but no AVX-512 (an AMD EPYC, 2026-11-23), 'amd_avx512' for
    an AMD CPU with AVX-512 (an AMD EPYC of family 25, 2026-11-25), else 'default' (the kind the
    fixtures of tests/golden/golden_v1.json and tests/fixtures/v1 were recorded on)."""
    flags, vendor = [], ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1].split()
            elif line.startswith("vendor_id") and not vendor:
                vendor = line.split(":", 1)[1].strip()
    except OSError:
        pass
    if "avx2" in flags and "avx512f" not in flags:
        return "avx2"
    return "amd_avx512" if vendor == "AuthenticAMD" and "avx512f" in flags else "default"


def same_numbers(new, old) -> bool:
    """Bit for bit on the kind of CPU the v1 fixtures were recorded on; elsewhere equal to 1e-6
    relative (the same code gives other last digits on another instruction set)."""
    if cpu_kind() == "default":
        return new == old
    if isinstance(new, dict) and isinstance(old, dict):
        return new.keys() == old.keys() and all(same_numbers(new[k], old[k]) for k in new)
    if isinstance(new, float) and isinstance(old, float):
        import pytest
        return new == pytest.approx(old, rel=1e-6, abs=1e-9)
    return new == old


def params_digest(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as data:
        return {k: hashlib.sha256(np.ascontiguousarray(data[k]).tobytes()).hexdigest()
                for k in sorted(data.files)}


def read_run(out: Path) -> dict:
    def load(name):
        return json.loads((out / name).read_text())
    metrics = [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS}
               for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    summary = {k: v for k, v in load("metrics_summary.json").items()
               if isinstance(v, float) and k not in TIMING_KEYS}
    record = {"metrics": metrics, "summary": summary,
              "alignment": {k: v for k, v in load("analysis/alignment.json").items()
                            if isinstance(v, float)},
              "ood_csv": (out / "analysis/ood.csv").read_text(),
              "params_sha256": params_digest(out / "params.npz")}
    if (out / "analysis/attention_stats.json").exists():
        record["auroc"] = [e["auroc"] for e in load("analysis/attention_stats.json")["layers"]]
    return record


def preset_of_runner(runner: str) -> str:
    """The preset a runner module is the CLI of (the first one, for a shared runner)."""
    from src.presets import MODEL_PRESETS
    return next(name for name, spec in MODEL_PRESETS.items() if spec.runner == runner)


def train(runner: str, flags: list[str], out: Path) -> None:
    """`python -m <runner> FLAGS --out OUT`, in-process (the runner module's `main`)."""
    import importlib
    code = importlib.import_module(runner).main([*flags, "--out", str(out)])
    assert code == 0, f"{runner} {flags} exited {code}"


def record(base: Path) -> dict:
    out = {}
    for name, (runner, flags) in RUNS.items():
        train(runner, flags, base / name)
        out[name] = read_run(base / name)
    return out


if __name__ == "__main__":
    import tempfile
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    with tempfile.TemporaryDirectory() as tmp:
        result = record(Path(tmp))
    Path(sys.argv[1]).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
