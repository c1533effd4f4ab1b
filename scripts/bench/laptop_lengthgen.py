"""The length study's own config as its users type it, at the laptop size the docs give, timed:
training (runners.train, its analyses included), the eval.sh equivalent (analysis.length_gen
--factor 8) and the config at width 32 for 3 steps (16 layers: what a newcomer tries first), each in
its own process, with its wall time, peak resident memory and exit status. Writes
report/measurements/lengthgen_laptop.json (the commit, machine and date beside the
figures); docs/length_generalisation.md and the README quote it (tests/test_docs_measurements.py).

    python -m scripts.bench.laptop_lengthgen [--out runs/laptop_lengthgen] [--overwrite]     (make lengthgen_laptop)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scripts.bench import record_timing

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "report" / "measurements" / "lengthgen_laptop.json"
CONFIG = "configs/lengthgen/tasks/linear_regression/alibi.yaml"
# the laptop size: width 64, 2 layers, 200 steps, 100 held-out prompts (the docs' command)
LAPTOP = ("model.hidden_size=64", "model.num_hidden_layers=2", "training.max_steps=200", "training.eval_size=100")
# the eval.sh equivalent reads the first 64 of them (its original evaluates 1,280 in batches of 64)
EVAL_TASKS = 64
# the config as a newcomer first tries it: 16 layers at width 32 for 3 steps (its analyses within
# their budget, analysis/budget.py; on a machine with too little memory, refused in one line)
TYPED = ("model.hidden_size=32", "training.max_steps=3")


def train_command(out: str, overwrite: bool, size: tuple[str, ...] = LAPTOP) -> list[str]:
    sets = [part for value in size for part in ("--set", value)]
    return ["-m", "runners.train", CONFIG, *sets, "--out", out, *(["--overwrite"] if overwrite else [])]


def eval_command(out: str) -> list[str]:
    return ["-m", "analysis.length_gen", "--run", out, "--factor", "8", "--eval_size", str(EVAL_TASKS)]


def timed(args: list[str]) -> dict:
    """Run `python args` here: its wall time, peak resident memory and exit status."""
    record = record_timing.timed([sys.executable, *args])
    return {**record, "command": "python " + " ".join(args)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.bench.laptop_lengthgen", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", default="runs/laptop_lengthgen")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    record = record_timing.provenance()
    record["train"] = timed(train_command(args.out, args.overwrite))
    if record["train"]["exit"] != 0:
        print(json.dumps(record, indent=1))
        return 1
    summary = json.loads((ROOT / args.out / "metrics_summary.json").read_text())
    record["train"]["train_seconds"] = summary.get("train_seconds")
    record["train"]["analyses_seconds"] = round(record["train"]["seconds"] - summary.get("train_seconds", 0), 1)
    record["train"]["eval_error_last"] = summary.get("eval_error_last")
    record["typed"] = timed(train_command(args.out + "_typed", True, TYPED))
    record["eval"] = timed(eval_command(args.out))
    length = json.loads((ROOT / args.out / "analysis" / "length_gen.json").read_text())
    record["eval"].update({"eval_tasks": length.get("eval_tasks"), "evaluated_points": length.get("evaluated_points")})
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    from src.files import atomic_write_text

    atomic_write_text(RECORD, json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return 0 if record["eval"]["exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
