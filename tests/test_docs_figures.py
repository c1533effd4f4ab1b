"""Figures a reader can trust: every number in a paragraph or list item of the README that names
one report (report/X.md), and of a docs page that links one (](../report/X.md)), is in that
report, so a regenerated report cannot leave a page stale silently (a number after ≈, ~, ≥ or ≤
is a paper's value or a threshold and is not checked). And report/README.md indexes
every report with a headline read from its results."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from plots.report_index import REPORTS, write_index

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*\.\d+(?![\w.])")  # decimals: 0.068, 1,189.5
# a number after ≈, ~, ≥ or ≤ (** for bold) is a paper's value or a threshold, not a measurement
QUOTED = re.compile(r"[≈~≥≤]\s*\**\s*\d[\d,]*\.\d+")


def cited_lines():
    for page in PAGES:
        units = [u for p in re.split(r"\n\s*\n", page.read_text()) for u in re.split(r"\n(?=- )", p)]
        # a report is report/X.md or a sweep's report/sweeps/<name>/X.md
        cite = (
            r"report/((?:sweeps/[\w-]+/)?[A-Z_]+\.md)"
            if page.name == "README.md"
            else r"\]\(\.\./report/((?:sweeps/[\w-]+/)?[A-Z_]+\.md)\)"
        )
        for paragraph in units:
            reports = set(re.findall(cite, paragraph))
            if len(reports) == 1 and (ROOT / "report" / next(iter(reports))).is_file():
                yield page.relative_to(ROOT).as_posix(), next(iter(reports)), paragraph


CASES = list(cited_lines())


def test_the_readme_cites_every_shipped_report():
    cited = {report for page, report, _ in CASES if page == "README.md"}
    shipped = {r for r in REPORTS if (ROOT / "report" / r).is_file()}
    assert shipped <= cited, shipped - cited


@pytest.mark.parametrize("page,report,paragraph", CASES, ids=[f"{p}:{r}:{i}" for i, (p, r, _) in enumerate(CASES)])
def test_numbers_next_to_a_report_are_in_it(page, report, paragraph):
    text = (ROOT / "report" / report).read_text()
    for number in NUMBER.findall(QUOTED.sub("", paragraph)):
        assert number in text or number.replace(",", "") in text, (page, report, number, paragraph[:300])


def test_the_index_has_a_headline_per_report(tmp_path):
    for name in ("REPRODUCTION.md", "MIXERS.md"):
        (tmp_path / name).write_text(f"# {name}\n\n- Produced 2026-11-25 from commit abc (clean tree)\n")
    (tmp_path / "reproduce_results.json").write_text(
        '{"checks": [{"name": "lsa1 loss", "status": "PASS", "detail": "lsa1 0.2095"}, '
        '{"name": "x", "status": "MISMATCH"}]}'
    )
    (tmp_path / "mixers_results.json").write_text(
        '{"results": [{"mixer": "attention", "kappa": 8, "width": 64, "accuracy": 1.0},'
        ' {"mixer": "attention", "kappa": 8, "width": 64, "accuracy": 0.5}, {"mixer": "mamba", "kappa": 8, "width": 64,'
        ' "accuracy": 0.25}, {"mixer": "mamba", "kappa": 4, "width": 64, "accuracy": 0.9}]}'
    )
    text = write_index(tmp_path).read_text()
    assert "- Headline: 1 PASS, 1 MISMATCH; lsa1 0.2095" in text
    assert (
        "MQAR accuracy at width 64 (mean over seeds): κ = 4: mamba 0.900; κ = 8: attention 0.750, mamba 0.250"
    ) in text
    assert "- Produced 2026-11-25 from commit abc (clean tree)" in text and "DYNAMICS" not in text
