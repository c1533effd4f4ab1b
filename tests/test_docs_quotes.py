"""Every time and memory size quoted in README.md and docs/ has a recorded source
(report/measurements/quoted.json; scripts/doc_quotes.py says what an entry holds)."""

from __future__ import annotations

import json
import subprocess

import pytest

from scripts import doc_quotes
from scripts.doc_quotes import LEDGER, ROOT, coverage_problem, entry_problem, figures, ledger, numbers_of, quotes


def test_the_scanner_finds_each_kind_of_quote_once():
    text = (
        "took 4 min 05 s, then 13.0 ms/step and 2,269 ms; 341–503 s per run; peak memory 3.4 GiB,\n"
        "a 4.9s line, 28 s/run, about 10 hours; not 2^(−8h/H), not 131 GFLOP/s, not v1.5s, not 4GB"
    )
    assert [figure for figure, _ in figures(text)] == [
        "4 min 05 s",
        "13.0 ms/step",
        "2,269 ms",
        "341–503 s",
        "3.4 GiB",
        "4.9s",
        "28 s/run",
        "10 hours",
    ]
    assert [line for _, line in figures(text)][-1] == 2
    assert numbers_of("2,269 ms") == ["2,269", "2269"]
    assert numbers_of("4 min 05 s") == ["4 min 05 s", "245"]
    assert numbers_of("341–503 s") == ["341", "341", "503", "503"]


def test_every_quote_in_the_docs_has_an_entry():
    known = ledger()
    problems = []
    for (doc, figure), lines in quotes().items():
        entries = known.get((doc, figure))
        problem = coverage_problem(entries, len(lines)) if entries else "no entry"
        if problem:
            problems.append(f"{doc}:{lines[0]} {figure!r}: {problem}")
    assert not problems, (
        "quotes without a recorded source (python -m scripts.doc_quotes; add each to "
        f"{LEDGER.relative_to(ROOT)}):\n" + "\n".join(problems)
    )


def test_no_entry_outlives_its_quote():
    quoted = quotes()
    stale = [key for key in ledger() if key not in quoted]
    assert not stale, f"entries for figures no document quotes any more: {stale}"


def test_every_entry_names_its_source():
    problems = [
        f"{entry['doc']} {entry['figure']!r}: {problem}"
        for entries in ledger().values()
        for entry in entries
        for problem in [entry_problem(entry)]
        if problem
    ]
    assert not problems, "\n".join(problems)


def test_the_commits_named_are_in_the_history():
    """Each commit an entry names exists, and is no later than the docs' own history (skipped
    without git or in a shallow clone)."""
    commits = {entry["commit"] for entries in ledger().values() for entry in entries if "commit" in entry}
    try:
        shallow = subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("no git")
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a full clone")
    missing = [
        c
        for c in sorted(commits)
        if subprocess.run(["git", "cat-file", "-e", f"{c}^{{commit}}"], cwd=ROOT, capture_output=True).returncode != 0
    ]
    assert not missing, f"commits the ledger names that this history lacks: {missing}"


def test_a_record_must_hold_the_figure_and_say_where_it_came_from(tmp_path):
    (tmp_path / "report").mkdir()
    record = tmp_path / "report" / "timing.json"
    record.write_text(
        json.dumps({"commit": "a" * 40, "machine": "2 CPU cores", "produced": "2026-11-27", "seconds": 245})
    )
    entry = {"doc": "README.md", "figure": "4 min 05 s", "kind": "measured", "record": "report/timing.json"}
    assert entry_problem(entry, tmp_path) is None
    assert "does not hold" in entry_problem({**entry, "figure": "4 min 06 s"}, tmp_path)
    record.write_text(
        json.dumps(
            {
                "commit": "a" * 40,
                "machine": "2 CPU cores",
                "produced": "2026-11-27",
                "seconds": 357.2,
                "train": {"peak_rss_gib": 3.35},
            }
        )
    )
    for figure in ("6 minutes", "5 min 57 s", "3.4 GiB", "3,597 MB"):  # in the record's units
        assert entry_problem({**entry, "figure": figure}, tmp_path) is None, figure
    for figure in ("8 minutes", "5 min 58 s", "3.2 GiB"):
        assert "does not hold" in entry_problem({**entry, "figure": figure}, tmp_path), figure
    record.write_text(json.dumps({"machine": "2 CPU cores", "seconds": 245}))
    assert "no commit, produced" in entry_problem(entry, tmp_path)
    assert "no record and no commit" in entry_problem({"doc": "x", "figure": "3 s", "kind": "measured"})
    assert "no machine" in entry_problem(
        {"doc": "x", "figure": "3 s", "kind": "measured", "commit": "abcdef1", "date": "2026-11-27"}
    )


def test_a_setting_is_read_from_the_code():
    entry = {"doc": "x", "figure": "5 s", "kind": "setting", "constant": "src.loop:CHUNK_SECONDS"}
    assert entry_problem(entry) is None
    assert "docs quote 6 s" in entry_problem({**entry, "figure": "6 s"})
    assert entry_problem({**entry, "figure": "4 MiB", "constant": "src.flags:MAX_FILE_BYTES", "scale": 2**-20}) is None
    assert entry_problem({**entry, "figure": "3 s", "constant": "src.jobs.ray:_reachable(timeout_s)"}) is None
    assert "cannot be read" in entry_problem({**entry, "constant": "src.loop:NO_SUCH"})


def test_one_figure_for_two_quantities_needs_an_entry_per_quote():
    one = [{"kind": "measured"}]
    assert coverage_problem(one, 1) is None
    assert "quoted 2 times" in coverage_problem(one, 2)
    assert coverage_problem([{"times": 2}], 2) is None
    assert coverage_problem([{"occurrence": 1}, {"occurrence": 2}], 2) is None
    assert "not 1..3" in coverage_problem([{"occurrence": 1}, {"occurrence": 2}], 3)


def test_the_command_lists_what_lacks_a_source(capsys, monkeypatch):
    monkeypatch.setattr(doc_quotes, "ledger", lambda: {})
    assert doc_quotes.main([]) == 1
    out = capsys.readouterr().out
    assert "README.md:" in out and "no entry in report/measurements/quoted.json" in out


GPU_WORDS = ("H200", "H100", "A100", "GPU")


def test_a_gpu_figure_has_a_record_file():
    """A figure measured on a lent GPU names a record under report/ that holds it (the machine is
    gone when the session ends: a commit alone is not enough to check it against)."""
    loose = [
        f"{entry['doc']} {entry['figure']!r}"
        for entries in ledger().values()
        for entry in entries
        if entry["kind"] in ("measured", "estimate")
        and "record" not in entry
        and any(word in str(entry.get("machine", "")) for word in GPU_WORDS)
    ]
    assert not loose, "GPU figures without a record file under report/: " + ", ".join(loose)


def test_the_transcribed_gpu_figures_are_in_their_commits():
    """report/measurements/gpu_earlier.json transcribes GPU figures whose raw files were not kept:
    each is in the text of the commit that first wrote it (its message or its change to the
    document); skipped without git or in a shallow clone."""
    record = json.loads((ROOT / "report" / "measurements" / "gpu_earlier.json").read_text(encoding="utf-8"))
    try:
        shallow = subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("no git")
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a full clone")
    import re

    missing = []
    for figure in record["figures"]:
        text = "".join(
            subprocess.run(
                ["git", "show", *how, figure["commit"], "--", *where],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
            for how, where in ((["-s", "--format=%B"], []), ([], [figure["doc"]]))
        )
        if not any(re.search(rf"(?<![\d.,]){re.escape(n)}(?!\d)", text) for n in numbers_of(figure["figure"])):
            missing.append(f"{figure['doc']} {figure['figure']!r} ({figure['commit']})")
    assert not missing, "transcribed figures their commits do not hold: " + ", ".join(missing)
