"""`make help`: every target of the Makefile listed with a one-line description, generated from the
Makefile itself (scripts/make_help.py, standard library only)."""

import re
import subprocess
import sys
from pathlib import Path

from scripts.make_help import described_targets

ROOT = Path(__file__).resolve().parent.parent


def test_every_target_has_a_description_and_make_help_lists_it():
    text = (ROOT / "Makefile").read_text()
    targets = re.findall(r"^([a-z_][a-z0-9_]*):(?!=)", text, re.M)
    phony = text.split(".PHONY:")[1].splitlines()[0].split()
    described = dict(described_targets(text))
    assert sorted(targets) == sorted(phony), "every target is .PHONY and every .PHONY name a target"
    assert [t for t in targets if not described.get(t)] == [], "add `## description` to these targets' lines"
    assert all(len(line) <= 110 for line in text.splitlines() if "##" in line)
    done = subprocess.run(
        [sys.executable, "scripts/make_help.py", "Makefile"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0 and done.stderr == ""
    listed = [line.split()[1] for line in done.stdout.splitlines()]
    assert listed == targets and listed[0] == "help"  # `make` alone prints this list
