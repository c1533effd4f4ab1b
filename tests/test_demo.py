"""`make demo` (scripts/demo.py) never goes HEARTBEAT_S without a line while a step runs: the line
is the step's own latest progress (its progress bar's state, with the time left)."""

from __future__ import annotations

import re

from scripts import demo

SLOW_STEP = """import sys, time
for i in range(1, 5):
    sys.stderr.write(f"\\\\rtraining: {25 * i}%| {i}/4 [00:0{i}<00:0{4 - i}]")
    sys.stderr.flush()
    time.sleep(1.2)
print("slow step: done")
"""


def test_the_latest_line_is_a_progress_bars_last_state(tmp_path):
    log = tmp_path / "step.log"
    assert demo.latest(log) == ""
    log.write_text("starting\ntraining:  10%| 1/10 [00:01<00:09]\rtraining:  20%| 2/10 [00:02<00:08]\r")
    assert demo.latest(log) == "training:  20%| 2/10 [00:02<00:08]"


def test_a_running_step_shows_its_progress_every_heartbeat(tmp_path, monkeypatch, capsys):
    (tmp_path / "slow_step.py").write_text(SLOW_STEP)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(demo, "HEARTBEAT_S", 1)
    monkeypatch.setattr(demo, "STEPS", (demo.Step("slow", "a step of five seconds", ("slow_step",)),))
    assert demo.main(["--out", str(tmp_path / "demo")]) == 0
    lines = capsys.readouterr().out.splitlines()
    beats = [line for line in lines if re.match(r"\[1/1\] \d+ s: ", line)]
    assert len(beats) >= 3, lines
    assert any(re.search(r"training: \d+%\| \d/4 \[", line) for line in beats), beats
    assert any(line.startswith("[1/1] done in ") and line.endswith("slow step: done") for line in lines), lines
