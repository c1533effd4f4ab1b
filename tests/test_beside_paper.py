"""Every study report stands beside its papers: a "Beside the paper" table generated from the one
anchors table (report/anchors.yaml) and the report's recorded results, a verdict on every row that
follows from the row's own printed numbers under the stated rule, and the verdict counts in
report/README.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from plots import beside_paper as bp
from plots.provenance import commit_line
from plots.paper_rows import ROWS
from plots.paper_rows_zoology import ZOO_SETTLING
from plots.report_index import REPORTS

ROOT = Path(__file__).resolve().parent.parent
REPORT_DIR = ROOT / "report"
NUMBER = r"[−-]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?"


def _float(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


def _claim_of(cell: str, anchors: bp.Anchors) -> bp.Claim:
    found = [c for c in anchors.claims.values() if cell == f"{c.cite}: {c.claim}"]
    assert len(found) == 1, f"the row's claim {cell!r} is not one claim of report/anchors.yaml"
    return found[0]


def _parse(cells: list[str]) -> dict:
    """A table row's numbers as printed: the accepted interval, ours (and its seed range), the
    sequence ratio and the verdict word."""
    accepted = re.match(rf"\[(−∞|{NUMBER}), (∞|{NUMBER})\]", cells[2])
    low = None if accepted.group(1) == "−∞" else _float(accepted.group(1))
    high = None if accepted.group(2) == "∞" else _float(accepted.group(2))
    ours = re.match(rf"(—|{NUMBER})(?: \(seeds ({NUMBER})–({NUMBER})\))?: ", cells[3])
    assert ours, f"ours is not printed as 'value[ (seeds a–b)]: what': {cells[3]!r}"
    value = None if ours.group(1) == "—" else _float(ours.group(1))
    seeds = [_float(ours.group(2)), _float(ours.group(3))] if ours.group(2) else []
    ratio = re.match(r"sequences (?:1/([\d,]+)|([\d.]+)×|\?)", cells[4])
    fraction = 1 / _float(ratio.group(1)) if ratio.group(1) else _float(ratio.group(2)) if ratio.group(2) else None
    word = cells[5].split("**")[1]
    return {
        "accept": (low, high),
        "value": value,
        "seeds": seeds,
        "ratio": fraction,
        "verdict": word,
        "why": cells[5].split("**: ", 1)[1] if "**: " in cells[5] else "",
    }


SHIPPED = [r for r in REPORTS if (REPORT_DIR / r).is_file()]


def test_every_report_has_a_table_of_rows():
    assert set(ROWS) == set(REPORTS), "each report in the index has its rows (plots/paper_rows.py)"
    assert len(SHIPPED) >= 13
    for report in SHIPPED:
        text = (REPORT_DIR / report).read_text(encoding="utf-8")
        assert bp.HEADING in text.split("\n"), f"{report} has no '{bp.HEADING}' section"
        rows = bp.read_rows(text)
        assert rows, f"{report}'s section has no row"
        for cells in rows:
            assert len(cells) == 6, f"{report}: a row of {len(cells)} cells: {cells}"
            assert cells[5].split("**")[1] in bp.VERDICTS, f"{report}: a row without a verdict: {cells}"


@pytest.mark.parametrize("report", SHIPPED)
def test_each_verdict_follows_from_its_own_numbers(report):
    anchors = bp.load_anchors()
    for cells in bp.read_rows((REPORT_DIR / report).read_text(encoding="utf-8")):
        claim, row = _claim_of(cells[0], anchors), _parse(cells)
        assert row["accept"] == claim.accept, f"{report}: the printed interval is not the anchors' ({cells[2]})"
        if row["value"] is None or (row["why"] and not row["why"].startswith("at ")):  # or unlike in kind
            expected = "not comparable"
        elif bp.inside(row["accept"], min([row["value"]] + row["seeds"]), max([row["value"]] + row["seeds"])):
            expected = "agrees"
        elif claim.needs and row["ratio"] is not None and row["ratio"] < claim.needs[0]:
            expected = "not comparable"
        else:
            expected = "disagrees"
        assert row["verdict"] == expected, f"{report}: {cells[0]}: printed {row['verdict']}, its numbers say {expected}"


@pytest.mark.parametrize("report", SHIPPED)
def test_section_is_the_one_its_results_and_the_anchors_give(report, tmp_path):
    """Regenerated from the results file and report/anchors.yaml, the section is the shipped one
    (but for its 'Written ...' line): a changed anchor or result without a rewrite fails here."""
    text = (REPORT_DIR / report).read_text(encoding="utf-8")
    copy = tmp_path / report
    copy.write_text(text, encoding="utf-8")
    (tmp_path / REPORTS[report][0]).write_bytes((REPORT_DIR / REPORTS[report][0]).read_bytes())
    extras = ["matrix_settling_results.json", *(f"{folder}/zoo_results.json" for folder in ZOO_SETTLING)]
    for extra in extras:  # the settling results a report's rows read beside its own
        if (REPORT_DIR / extra).is_file():
            (tmp_path / extra).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / extra).write_bytes((REPORT_DIR / extra).read_bytes())
    bp.write_section(tmp_path, report, REPORTS[report][0], head={"commit": "0" * 40, "dirty": False})
    strip = bp._without_provenance
    assert strip(copy.read_text(encoding="utf-8")) == strip(text), (
        f"{report}'s section is stale: run python -m plots.beside_paper"
    )


def test_index_counts_the_verdicts_of_each_report():
    index = (REPORT_DIR / "README.md").read_text(encoding="utf-8")
    totals = {w: 0 for w in bp.VERDICTS}
    for report in SHIPPED:
        counts = bp.tally((REPORT_DIR / report).read_text(encoding="utf-8"))
        totals = {w: totals[w] + counts[w] for w in bp.VERDICTS}
        block = index.split(f"]({report})", 1)[1].split("\n## ", 1)[0]
        assert f"- Beside the paper: {bp.counted(counts)}" in block, f"README.md's count for {report}"
    assert f"all reports: {bp.counted(totals)}." in index


# --- the rule itself, on numbers made by hand
CLAIM = bp.Claim(
    "x.y",
    "Someone (2024)",
    "a claim",
    "accuracy",
    0.7,
    (0.67, 0.73),
    "± 0.03",
    "fig. 1",
    bp.Budget(1000, "2 × 64", "best of 4"),
    needs=None,
)
OURS = bp.Budget(10, "2 × 64", "one")


@pytest.mark.parametrize(
    "value, values, unlike, needs, expected",
    [
        (0.70, (), "", None, "agrees"),
        (0.73, (), "", None, "agrees"),  # the bound is inside
        (0.60, (0.55, 0.68), "", None, "agrees"),  # a seed reaches the interval
        (0.60, (0.55, 0.66), "", None, "disagrees"),
        (0.35, (), "", None, "disagrees"),
        (0.35, (), "", (0.5, "moves with training"), "not comparable"),  # 1/100 of the paper's sequences
        (0.35, (), "", (0.001, "moves with training"), "disagrees"),  # enough training for the claim
        (0.70, (), "RWKV-7, not RWKV-4", None, "not comparable"),
        (None, (), "", None, "not comparable"),
    ],
)
def test_verdict_rule(value, values, unlike, needs, expected):
    claim = bp.Claim(**{**CLAIM.__dict__, "needs": needs})
    assert bp.verdict(claim, bp.Row("x.y", value, "ours", OURS, values, unlike))[0] == expected


def test_verdict_is_taken_on_the_printed_number():
    """0.96996 prints as 0.97 (3 decimals): the reader sees it inside [0.97, 1]; so does the rule."""
    claim = bp.Claim(**{**CLAIM.__dict__, "accept": (0.97, 1.0)})
    row = bp.Row("x.y", 0.96996, "ours", OURS)
    assert bp.table_row(claim, row).split(" | ")[3].startswith("0.97: ")
    assert bp.verdict(claim, row)[0] == "agrees"


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda d: d["claims"]["c"].update(accept=[0.9, 0.1]), "low ≤ high"),
        (lambda d: d["claims"]["c"].update(accept=0.5), "[low, high]"),
        (lambda d: d["claims"]["c"].update(paper="nobody"), "claims.c.paper='nobody'"),
        (lambda d: d["claims"]["c"].update(colour="red"), "accepted keys"),
        (lambda d: d["claims"]["c"].pop("value"), "lacks value"),
        (lambda d: d["claims"]["c"].update(needs={"fraction": 0.5}), "needs"),
        (lambda d: d["papers"]["p"].pop("budget"), "papers.p"),
    ],
)
def test_bad_anchor_is_refused_in_one_line(tmp_path, edit, says):
    raw = {
        "papers": {"p": {"cite": "P", "budget": {"sequences": 10, "model": "m", "rates": "r"}}},
        "claims": {
            "c": {
                "paper": "p",
                "claim": "c",
                "metric": "m",
                "value": 0.5,
                "accept": [0.4, 0.6],
                "basis": "b",
                "source": "s",
            }
        },
    }
    path = tmp_path / "anchors.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert bp.load_anchors(path).claims["c"].accept == (0.4, 0.6)
    edit(raw)
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(bp.UsageError) as err:
        bp.load_anchors(path)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_every_anchor_is_used_and_every_used_claim_exists():
    anchors = bp.load_anchors()
    used = set()
    for report in SHIPPED:
        used |= {_claim_of(cells[0], anchors).key for cells in bp.read_rows((REPORT_DIR / report).read_text("utf-8"))}
    assert set(anchors.claims) - used == set(), "claims no report shows"


def _config(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))


def test_our_budgets_are_the_shipped_configs():
    from plots import paper_rows_base as pr

    mech = _config("configs/mechanisms.yaml")["training"]
    assert pr.MECHANISMS.sequences == mech["train_steps"] * mech["batch_size"]
    for budget, path in ((pr.MATRIX, "configs/matrix.yaml"), (pr.TASK_DIVERSITY, "configs/task_diversity.yaml")):
        train = _config(path)["train"]
        assert budget.sequences == train["steps"] * train["batch_size"], path
    zoo = _config("configs/zoo.yaml")
    assert {c["steps"] for c in zoo["cells"]} == {pr.ZOO.sequences // 64}
    lengthgen = _config("configs/lengthgen.yaml")["training"]
    assert pr.LENGTHGEN.sequences == lengthgen["train_steps"] * lengthgen["batch_size"]
    mad = _config("configs/mad.yaml")  # the recall tasks', selective copying's and memorization's budgets
    assert pr.MAD.sequences == mad["tasks"]["in_context_recall"]["steps"] * mad["batch_size"]
    assert pr.MAD_COPYING.sequences == mad["tasks"]["selective_copying"]["steps"] * mad["batch_size"]
    assert float(pr.MAD.rates.split()[1].rstrip(",")) == mad["learning_rates"][0]
    assert pr.MAD_MEMORIZATION.sequences == mad["tasks"]["memorization"]["steps"] * mad["batch_size"]


def test_section_replaces_itself_and_lands_before_figures():
    text = "# R\n\nbody\n\n## Figures\n\n- a.png\n"
    once = bp.replace_section(text, [bp.HEADING, "", "one", ""])
    assert once.index(bp.HEADING) < once.index("## Figures")
    twice = bp.replace_section(once, [bp.HEADING, "", "two", ""])
    assert "one" not in twice and twice.count(bp.HEADING) == 1 and "- a.png" in twice


# A sentence of the README or docs/ that says we agree with a paper's result must name the claim
# (its key in report/anchors.yaml, in backticks) and that claim must agree in a shipped report.
AGREEMENT = re.compile(
    r"\b(?:as in|as|like|matches|match|agrees with|agree with|reaches|reproduces|confirms)\s+(?:the paper(?:'s)?"
    r"(?:\s+(?:figure|table|says|finds|reports|headline|result))?|(?:Zoology|Garg|von Oswald|Raventós|Lin|Zhang|"
    r"limits_of_icl|Olsson|Edelman|MAD|Akyürek|Bai)(?: et al\.)?'s (?:figure|table|headline|result|finding|claim)s?)"
)


def _sentence(text: str, at: int) -> str:
    start = max(text.rfind(". ", 0, at), text.rfind("\n\n", 0, at)) + 1
    end = min((i for i in (text.find(". ", at), text.find("\n\n", at)) if i >= 0), default=len(text))
    return text[start:end]


def _agreeing_claims() -> set[str]:
    anchors = bp.load_anchors()
    found = set()
    for report in SHIPPED:
        for cells in bp.read_rows((REPORT_DIR / report).read_text(encoding="utf-8")):
            if cells[5].startswith("**agrees**"):
                found.add(_claim_of(cells[0], anchors).key)
    return found


def agreement_problems(text: str, doc: str, agreeing: set[str], keys: set[str]) -> list[str]:
    problems = []
    for match in AGREEMENT.finditer(text):
        sentence = _sentence(text, match.start())
        named = set(re.findall(r"`([a-z_]+\.[a-z0-9_]+)`", sentence)) & keys
        line = text.count("\n", 0, match.start()) + 1
        if not named:
            problems.append(f"{doc}:{line}: '{match.group(0)}' states a paper's result without naming its claim")
        elif not named & agreeing:
            problems.append(f"{doc}:{line}: '{match.group(0)}': {sorted(named)} agrees in no shipped report")
    return problems


def test_the_docs_say_we_agree_only_where_a_verdict_does():
    keys, agreeing = set(bp.load_anchors().claims), _agreeing_claims()
    problems = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        problems += agreement_problems(path.read_text(encoding="utf-8"), path.name, agreeing, keys)
    assert not problems, "\n".join(problems)


def test_the_agreement_check_catches_an_unbacked_sentence():
    keys = {"zoology.h3_t64", "von_oswald.lsa_is_gd"}
    text = "At T 64 the gated convolutions fall, as in Zoology's figure 2. Other text."
    assert "without naming its claim" in agreement_problems(text, "x.md", set(), keys)[0]
    named = "H3 falls, as in Zoology's figure 2 (`zoology.h3_t64`)."
    assert "agrees in no shipped report" in agreement_problems(named, "x.md", {"von_oswald.lsa_is_gd"}, keys)[0]
    assert agreement_problems(named, "x.md", {"zoology.h3_t64"}, keys) == []


# --- provenance: a shipped report says it can be reproduced from a commit
def test_no_shipped_report_is_marked_unreproducible():
    """A report written from a tree with uncommitted changes says 'do not ship' in bold; none of
    report/ may say it (its header or its section)."""
    marked = [
        f"{path.name}:{n}"
        for path in sorted(REPORT_DIR.glob("*.md"))
        for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1)
        if "do not ship" in line
    ]
    assert not marked, f"written from a changed tree, rewrite from a clean commit: {', '.join(marked)}"


def _copy_marked_unreproducible(report: str, to: Path) -> None:
    """The shipped report and its results in `to`, its section's 'Written' line as a changed tree's."""
    (to / REPORTS[report][0]).write_bytes((REPORT_DIR / REPORTS[report][0]).read_bytes())
    lines = (REPORT_DIR / report).read_text(encoding="utf-8").split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("- Written "))
    lines[at] = "- Written 2026-01-01 00:00 UTC from " + commit_line({"commit": "d" * 40, "dirty": True})
    (to / report).write_text("\n".join(lines), encoding="utf-8")


def test_index_writes_sections_with_the_head_it_is_given(tmp_path, monkeypatch):
    """A study writes its report before the index: the git state then is dirty (its own report),
    so the sections must carry the head the study took at its start, not a new one."""
    import src.provenance
    from plots.report_index import write_index

    report = "CIRCUITS.md"
    _copy_marked_unreproducible(report, tmp_path)
    monkeypatch.setattr(src.provenance, "git_commit", lambda: {"commit": "f" * 40, "dirty": True})
    write_index(tmp_path, {"commit": "a" * 40, "dirty": False})
    section = (tmp_path / report).read_text(encoding="utf-8").split(bp.HEADING, 1)[1]
    assert "from commit aaaaaaaaaaaa (clean tree)" in section and "do not ship" not in section


def test_a_section_marked_unreproducible_is_rewritten_from_a_clean_commit(tmp_path):
    report = "CIRCUITS.md"
    _copy_marked_unreproducible(report, tmp_path)
    bp.write_section(tmp_path, report, REPORTS[report][0], head={"commit": "b" * 40, "dirty": True})
    assert "do not ship" in (tmp_path / report).read_text(encoding="utf-8")
    bp.write_section(tmp_path, report, REPORTS[report][0], head={"commit": "c" * 40, "dirty": False})
    text = (tmp_path / report).read_text(encoding="utf-8")
    assert "do not ship" not in text and "from commit cccccccccccc (clean tree)" in text


def test_every_study_passes_its_head_to_the_index():
    """Every call of write_index but the command line's passes the head taken before writing."""
    import ast

    calls = []
    for path in sorted([*(ROOT / "plots").glob("*.py"), *(ROOT / "scripts").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "write_index":
                calls.append((path.name, node.lineno, len(node.args) + len(node.keywords)))
    assert len(calls) > 10
    assert [c for c in calls if c[2] < 2 and c[0] != "report_index.py"] == []
