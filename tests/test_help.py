"""Every command's --help opens with whole sentences: a description that ends a sentence, with
balanced parentheses and backticks (a docstring's first line cut mid-sentence fails here), and
exits 0 without doing any work."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__main__")
    for folder in ("src", "runners", "analysis", "plots", "scripts")
    for p in (ROOT / folder).rglob("*.py")
    if '__name__ == "__main__"' in p.read_text()
) + ["eval_noise", "eval_order"]


def help_text(module: str, monkeypatch) -> tuple[int, str]:
    out = io.StringIO()
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=False)
        except SystemExit as exit_:
            code = exit_.code or 0
    return code, out.getvalue()


def description(text: str) -> str:
    """The paragraph after the usage block (argparse), or the first one inside tyro's frame."""
    paragraphs = [
        " ".join(line.strip(" │╭╰─") for line in block.splitlines()).strip() for block in re.split(r"\n\s*\n", text)
    ]
    return next((p for p in paragraphs[1:] if p and not p.startswith(("usage:", "options:"))), "")


def test_every_command_is_listed():
    assert {
        "runners.recipe",
        "runners.train",
        "scripts.mixers",
        "analysis.icl_curve",
        "src.rundir",
        "eval_order",
    } <= set(COMMANDS) and len(COMMANDS) >= 30


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("module", COMMANDS)
def test_help_reads_as_whole_sentences(module, monkeypatch):
    code, text = help_text(module, monkeypatch)
    assert code == 0, text
    words = description(text)
    assert len(words) > 20, (module, text[:400])
    assert words.endswith((".", "?", ".)")), (module, words)
    assert words.count("(") == words.count(")") and words.count("`") % 2 == 0, (module, words)
