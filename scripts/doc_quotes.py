"""Every time and memory size the README and docs/ quote, and where each comes from.

A quote is a figure with a unit of time (ms, s, min, h) or memory (MB, GB, MiB, GiB), e.g.
"13.0 ms/step", "4 min 05 s", "341–503 s", "peak memory 3.4 GiB". Each (document, figure) has one
entry in the ledger, report/measurements/quoted.json, saying how many times the document quotes it
(``times``, when more than once: the same quantity each time; where one figure stands for different
quantities, one entry per quote with its ``occurrence``) and of which kind it is:

- ``measured`` (or ``estimate``, a figure computed from measured ones): either ``record``, a file
  under report/ that carries its own provenance (a study report's "Produced ... from commit ..."
  header and "Machine:" line, or a JSON record with "commit", "machine" and "produced") and holds
  the figure (its number as written, or in a JSON record a number under a key ending in "seconds"
  or "_gib" equal to it at the quote's precision: "6 minutes" holds 357.2 s); or ``commit``, ``date`` and ``machine``:
  the commit that wrote the measurement into
  the docs, its date, and the machine it was taken on.
- ``setting``: a limit or setting of the code, with ``constant`` ("module:NAME", or
  "module:function(parameter)" for a default) and ``scale`` (what turns the constant into the
  figure's unit, 1 when left out); the test reads the constant and compares.
- ``external``: a figure fixed outside this repository (the lent GPU's rules), with ``source``.

`python -m scripts.doc_quotes` lists the quotes without an entry (exit 1 if any), so a writer
who adds a figure sees what to record. tests/test_docs_quotes.py fails on any of them, on an
entry no document quotes any more, and on a record that does not hold its figure.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEDGER = ROOT / "report" / "measurements" / "quoted.json"
KINDS = ("measured", "estimate", "setting", "external")

_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_UNIT = r"ms|s|min|minutes|seconds|h|hours|GiB|GB|MiB|MB|KiB|KB"
FIGURE = re.compile(
    rf"(?<![\w.^/−-])(?:(?P<minutes>\d+) min (?P<seconds>\d\d) s"
    rf"|(?P<low>{_NUMBER})(?:[–-](?P<high>{_NUMBER}))?(?P<space>\s?)(?P<unit>{_UNIT})"
    rf"(?:/(?:step|run|epoch|seed-step))?)(?![\w/^])"
)


def documents(root: Path = ROOT) -> list[str]:
    """The documents whose quotes need a source: README.md and docs/*.md (paths from the root)."""
    return ["README.md"] + sorted(str(p.relative_to(root)) for p in (root / "docs").glob("*.md"))


def figures(text: str):
    """Each quoted time or memory size in ``text``: (figure as written, line number)."""
    for match in FIGURE.finditer(text):
        if match["unit"] and not match["space"] and match["unit"] not in ("s", "ms"):
            continue  # "8h/H", "4GB" inside a word: not a quote
        yield match.group(0), text.count("\n", 0, match.start()) + 1


def quotes(root: Path = ROOT) -> dict[tuple[str, str], list[int]]:
    """(document, figure) -> the lines quoting it, one per quote."""
    found: dict[tuple[str, str], list[int]] = {}
    for doc in documents(root):
        for figure, line in figures((root / doc).read_text()):
            found.setdefault((doc, figure), []).append(line)
    return found


def ledger(path: Path = LEDGER) -> dict[tuple[str, str], list[dict]]:
    """(document, figure) -> its entries: one (covering ``times`` quotes), or one per quote where
    the same figure stands for different quantities (each with its ``occurrence``, 1-based)."""
    found: dict[tuple[str, str], list[dict]] = {}
    for entry in json.loads(path.read_text())["quotes"]:
        found.setdefault((entry["doc"], entry["figure"]), []).append(entry)
    return found


def coverage_problem(entries: list[dict], quoted: int) -> str | None:
    """Why a figure's entries do not cover its ``quoted`` quotes in one document (None when they do)."""
    if len(entries) == 1 and "occurrence" not in entries[0]:
        if entries[0].get("times", 1) == quoted:
            return None
        return (
            f"quoted {quoted} times, its entry covers {entries[0].get('times', 1)} (the same quantity each "
            f"time? then say so with 'times'; else one entry per quote with its 'occurrence')"
        )
    if sorted(entry.get("occurrence", 0) for entry in entries) == list(range(1, quoted + 1)):
        return None
    return f"quoted {quoted} times, its entries' occurrences are not 1..{quoted}"


def numbers_of(figure: str) -> list[str]:
    """The figure's number as a record may write it: "2,269 ms" -> "2,269", "2269"; "4 min 05 s" ->
    "4 min 05 s", "245"; a range gives both ends."""
    match = FIGURE.fullmatch(figure)
    if match["minutes"]:
        return [figure, str(int(match["minutes"]) * 60 + int(match["seconds"]))]
    forms = [match["low"], match["low"].replace(",", "")]
    if match["high"]:
        forms += [match["high"], match["high"].replace(",", "")]
    return forms


SECONDS = {"ms": 1e-3, "s": 1, "seconds": 1, "min": 60, "minutes": 60, "h": 3600, "hours": 3600}
GIB = {"GiB": 1, "GB": 1e9 / 2**30, "MiB": 2**-10, "MB": 1e6 / 2**30, "KiB": 2**-20, "KB": 1e3 / 2**30}


def in_units(figure: str) -> tuple[str, float, float]:
    """A single figure as ("s" or "GiB", value, half its last digit's step): "5 min 57 s" ->
    ("s", 357, 0.5); "6 minutes" -> ("s", 360, 30); "3.4 GiB" -> ("GiB", 3.4, 0.05)."""
    match = FIGURE.fullmatch(figure)
    if match["minutes"]:
        return "s", int(match["minutes"]) * 60 + int(match["seconds"]), 0.5
    number = match["low"].replace(",", "")
    step = 10.0 ** -len(number.partition(".")[2])
    unit = match["unit"]
    scale, kind = (SECONDS[unit], "s") if unit in SECONDS else (GIB[unit], "GiB")
    return kind, float(number) * scale, step * scale / 2


def json_holds(record, figure: str) -> bool:
    """Whether a JSON record holds the figure at its precision: a number under a key ending in
    "seconds" (time) or "_gib" (memory), anywhere in the record."""
    kind, value, half_step = in_units(figure)
    suffix = "seconds" if kind == "s" else "_gib"
    found = []

    def walk(node):
        if isinstance(node, dict):
            for key, item in node.items():
                if isinstance(item, (int, float)) and not isinstance(item, bool) and key.endswith(suffix):
                    found.append(float(item))
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(record)
    return any(abs(number - value) <= half_step * (1 + 1e-9) for number in found)


def provenance_problem(path: Path) -> str | None:
    """Why a record file does not say where it came from (None when it does)."""
    text = path.read_text()
    if path.suffix == ".json":
        record = json.loads(text)
        missing = [key for key in ("commit", "machine", "produced") if not record.get(key)]
        return f"no {', '.join(missing)}" if missing else None
    if not re.search(r"from commit [0-9a-f]{7,40}", text) or "Machine:" not in text:
        return "no 'from commit <hash>' or 'Machine:' line"
    return None


def constant(spec: str) -> float:
    """The value a setting entry names: "module:NAME", or "module:function(parameter)" for a
    parameter's default."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError("expected module:NAME or module:function(parameter)")
    imported = importlib.import_module(module)
    if name.endswith(")"):
        function, _, parameter = name[:-1].partition("(")
        return inspect.signature(getattr(imported, function)).parameters[parameter].default
    return getattr(imported, name)


def entry_problem(entry: dict, root: Path = ROOT) -> str | None:
    """What is wrong with one ledger entry (None when nothing)."""
    kind = entry.get("kind")
    if kind not in KINDS:
        return f"kind {kind!r} is not one of {', '.join(KINDS)}"
    if kind in ("measured", "estimate"):
        if "record" in entry:
            path = root / entry["record"]
            if not path.is_file() or not entry["record"].startswith("report/"):
                return f"record {entry['record']} is not a file under report/"
            problem = provenance_problem(path)
            if problem:
                return f"record {entry['record']}: {problem}"
            text = path.read_text()
            if any(re.search(rf"(?<![\d.,]){re.escape(n)}(?!\d)", text) for n in numbers_of(entry["figure"])):
                return None
            if path.suffix == ".json" and json_holds(json.loads(text), entry["figure"]):
                return None
            return f"record {entry['record']} does not hold {entry['figure']}"
        if not re.fullmatch(r"[0-9a-f]{7,40}", str(entry.get("commit", ""))):
            return "no record and no commit (7-40 hex digits)"
        if not re.fullmatch(r"\d{4}-\d\d-\d\d", str(entry.get("date", ""))):
            return "no date (YYYY-MM-DD)"
        if not entry.get("machine"):
            return "no machine"
        return None
    if kind == "setting":
        try:
            value = constant(str(entry.get("constant", "")))
        except (ImportError, AttributeError, ValueError, KeyError) as err:
            return f"constant {entry.get('constant')!r} cannot be read ({err})"
        quoted = float(numbers_of(entry["figure"])[1])
        if abs(value * entry.get("scale", 1) - quoted) > 1e-9 * max(1.0, quoted):
            return f"{entry['constant']} is {value!r} (x {entry.get('scale', 1)}), the docs quote {entry['figure']}"
        return None
    return None if entry.get("source") else "an external figure needs a source"


def main(argv=None) -> int:
    from src.flags import OneLineParser, summary

    OneLineParser(prog="python -m scripts.doc_quotes", description=summary(__doc__)).parse_args(argv)
    known = ledger()
    problems = []
    for (doc, figure), lines in quotes().items():
        entries = known.get((doc, figure))
        problem = coverage_problem(entries, len(lines)) if entries else f"no entry in {LEDGER.relative_to(ROOT)}"
        if problem:
            problems.append(f"{doc}:{','.join(map(str, lines))}: {figure!r}: {problem}")
    print("\n".join(problems) or "every quote has an entry")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
