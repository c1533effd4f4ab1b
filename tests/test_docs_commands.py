"""Every command the README and docs/*.md show runs as written: each `python -m …` line (in a
code block, or inline in backticks) is run in this process with WORKBENCH_DRY_RUN=1, so its flags,
settings, config files and output places are checked exactly as a user's run checks them, and it
stops before its first write; each `make …` line is dry-run by make (-n). A command with a
placeholder (`<run>`, `…`) or a shell variable is not a command as written and is skipped; a page
may hold none such outside prose."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from src.flags import DRY_RUN

ROOT = Path(__file__).resolve().parent.parent
# docs/extending.md's commands name its worked examples, which live in a scratch copy:
# tests/test_extending.py runs them there
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "extending.md")]
STARTS = ("python -m ", "make ")


def _joined(block: str) -> list[str]:
    """The lines of a code block with backslash continuations joined and comments dropped."""
    out, current = [], ""
    for raw in block.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        out.append((current + line).strip())
        current = ""
    return [re.sub(r"\s+#.*$", "", line) for line in out]


def commands(text: str) -> list[str]:
    found = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        found += [line for line in _joined(block) if line.startswith(STARTS)]
    outside = re.sub(r"```.*?```", "", text, flags=re.S)
    found += [span for span in re.findall(r"`([^`\n]+)`", outside) if span.startswith(STARTS)]
    return [c.strip() for c in found]


def runnable(command: str) -> bool:
    """A command as written: no placeholder, optional-argument brackets or shell syntax."""
    return not any(mark in command for mark in ("<", "…", "...", "$", "|", "&&", ";", "[--"))


# (page, command, the commands before it on its page); `make demo`'s steps are commands too
CASES = [
    (page.relative_to(ROOT).as_posix(), c, tuple(found[:i]))
    for page in PAGES
    for found in [commands(page.read_text())]
    for i, c in enumerate(found)
    if runnable(c)
]
_DEMO = __import__("scripts.demo", fromlist=["STEPS"])
CASES += [
    (
        "scripts/demo.py",
        _DEMO.shown(step, Path("runs/demo")),
        tuple(_DEMO.shown(s, Path("runs/demo")) for s in _DEMO.STEPS[:i]),
    )
    for i, step in enumerate(_DEMO.STEPS)
]


def made_before(missing: str, before: tuple[str, ...]) -> bool:
    """Whether the run directory a failed dry run missed is made by an earlier command on its page
    (a dry run makes nothing, so a command that reads that run cannot be checked further)."""
    parts = Path(missing).parts
    return (
        len(parts) > 1
        and parts[0] == "runs"
        and any(
            (f"runs/{parts[1]}" in c and "--out" in c) or (c.startswith("make") and parts[1] in c.split())
            for c in before
        )
    )


def test_the_pages_show_commands():
    pages = {page for page, _, _ in CASES}
    assert "README.md" in pages and len(pages) >= 6 and len(CASES) >= 60, (pages, len(CASES))


def _python(argv: list[str], monkeypatch, tmp_path) -> tuple[int, str]:
    module = argv[0]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setenv(DRY_RUN, "1")
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=False)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return code, out.getvalue() + err.getvalue()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("page,command,before", CASES, ids=[f"{p}:{c[:60]}" for p, c, _ in CASES])
def test_command_runs_as_written(page, command, before, monkeypatch, tmp_path):
    words = shlex.split(command)
    if words[0] == "make":
        done = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (page, command, done.stderr[-500:])
        return
    monkeypatch.chdir(tmp_path)  # nothing of the checkout is in the way (or touched)
    for name in ("configs", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    listing = sorted(p.name for p in tmp_path.iterdir())
    code, text = _python(words[2:], monkeypatch, tmp_path)
    missing = re.search(r"(runs/[\w./-]+)", text) if code else None
    if missing and made_before(missing.group(1), before):
        return
    assert code == 0, (page, command, text[-800:])
    assert sorted(p.name for p in tmp_path.iterdir()) == listing, (page, command, "a dry run wrote files")
