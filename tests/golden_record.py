"""Record the golden runs on this machine: `make golden_record` (python tests/golden_record.py).

Trains every golden run (the paper's system: tests/golden_runs.py; the newer systems:
tests/golden_systems.py), compares each with the records already in tests/golden/ to the
tolerance of another machine (tests/golden_machines.py), and only if none moved writes
tests/golden/machine-<id>.json: this machine's fingerprint, the commit, every run and the shape, sum
and sum of squares of every parameter array. From then on the suite compares this machine's runs with it bit for bit.
A run that moved beyond the tolerance is named and nothing is written (exit 1): a moved number is
a bug until explained, and recording it would hide it.

    python tests/golden_record.py                  # this machine's record, checked first
    python tests/golden_record.py --out FILE       # write the record to FILE instead (no check)
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def commit() -> str:
    """The commit the code was at, with '+changes' when the work tree differs from it."""

    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def record_all(base: Path) -> tuple[dict, dict]:
    """(every golden run read back, the parameter samples of each), trained under `base`."""
    from golden_machines import param_samples
    from golden_systems import every_run

    runs, samples = {}, {}
    for name, (module, _) in every_run().items():
        runner, argv = module.RUNS[name]
        print(f"training {name} ...", flush=True)
        module.train(runner, argv, base / name)
        runs[name] = module.read_run(base / name)
        samples[name] = param_samples(base / name / "params.npz")
    return runs, samples


def moved_against_records(runs: dict, samples: dict) -> tuple[list[str], list[str]]:
    """(what moved beyond the tolerance against the records, one line per run on how it was
    compared): every run compared as a machine without a record of its own compares it."""
    from golden_machines import compare_run
    from golden_systems import every_run

    elsewhere = {"machine": "a new record"}  # a fingerprint no record has: the tolerance path
    moved, lines = [], []
    transforms = {name: transform for name, (_, transform) in every_run().items()}
    for name, got in runs.items():
        keys, how = compare_run(name, got, samples[name], transforms[name], elsewhere)
        moved += [f"{name}: {key}" for key in keys]
        lines.append(how)
    return moved, lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python tests/golden_record.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        help="write the record here, without checking it (default: tests/golden/machine-<id>.json, after the check)",
    )
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT), str(HERE)]
    from golden_machines import FOLDER, fingerprint, fingerprint_id, measured_fingerprint
    import os

    os.chdir(ROOT)  # the runs name their configs relative to the checkout
    if os.environ.get("ICL_GOLDEN_FINGERPRINT"):
        print(
            "ICL_GOLDEN_FINGERPRINT is set: a record is made under the machine's own fingerprint; unset it",
            file=sys.stderr,
        )
        return 2
    mine = measured_fingerprint()
    target = Path(args.out) if args.out else FOLDER / f"machine-{fingerprint_id(mine)}.json"
    with tempfile.TemporaryDirectory() as tmp:
        runs, samples = record_all(Path(tmp))
    if not args.out:
        moved, lines = moved_against_records(runs, samples)
        print("\n".join(lines))
        if moved:
            print(
                "not recorded: these runs moved beyond the tolerance against a record:\n  " + "\n  ".join(moved),
                file=sys.stderr,
            )
            return 1
    data = {
        "fingerprint": mine,
        "recorded": f"commit {commit()}, {datetime.date.today().isoformat()}",
        "runs": runs,
        "param_samples": samples,
    }
    target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}: {len(runs)} golden runs on this machine's fingerprint {fingerprint()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
