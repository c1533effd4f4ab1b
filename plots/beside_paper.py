"""The "Beside the paper" section of every study report: each claim of a paper (report/anchors.yaml,
the one table of the papers' numbers) with the paper's number, the interval ours must reach, our
number from the study's recorded results (plots/paper_rows.py), the budget ratio and a verdict by
one rule (`verdict`; the rule is printed in every section).

plots.report_index.write_index, which every study calls after writing its report, writes the
section of every report in the folder from its recorded results file (only where it changes), so
`python -m plots.report_index` rewrites them all without training after report/anchors.yaml
changes:

    python -m plots.report_index                     # every report in report/, then report/README.md
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import yaml

from plots.paper_rows import rows_for
from plots.paper_rows_base import Budget, Row
from src.files import atomic_write_text
from src.flags import UsageError

ANCHORS = Path(__file__).resolve().parent.parent / "report" / "anchors.yaml"
HEADING = "## Beside the paper"
VERDICTS = ("agrees", "disagrees", "not comparable")
RULE = (
    "Verdict rule (one for every report): **not comparable** when we have no number or our setting "
    "differs from the paper's in kind (said in the row); else **agrees** when our number, or any seed's, "
    "lies inside the interval the paper's number allows (as printed); else **not comparable** when our "
    "runs saw less of the paper's training than the claim needs (said in the row); else **disagrees**."
)
CLAIM_KEYS = {
    "paper",
    "claim",
    "metric",
    "value",
    "accept",
    "basis",
    "source",
    "setting",
    "sequences",
    "model",
    "needs",
}


@dataclass(frozen=True)
class Claim:
    key: str
    cite: str
    claim: str
    metric: str
    value: float
    accept: tuple[float | None, float | None]  # [low, high]; None: unbounded
    basis: str
    source: str
    budget: Budget  # the paper's
    needs: tuple[float, str] | None = None  # (fraction of the paper's sequences, why)


@dataclass(frozen=True)
class Anchors:
    claims: dict[str, Claim] = field(default_factory=dict)


def _bound(value, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where}={value!r} is not accepted; accepted: a number or null")
    return float(value)


def load_anchors(path: Path = ANCHORS) -> Anchors:
    """report/anchors.yaml, checked (UsageError, one line, naming the key, for a bad entry)."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise UsageError(f"{path}: cannot be read as YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("papers"), dict) or not isinstance(raw.get("claims"), dict):
        raise UsageError(f"{path} is not accepted; accepted: a mapping with 'papers' and 'claims' mappings")
    papers = {}
    for key, paper in raw["papers"].items():
        budget = (paper or {}).get("budget") or {}
        if not isinstance(paper, dict) or "cite" not in paper or set(budget) != {"sequences", "model", "rates"}:
            raise UsageError(
                f"{path}: papers.{key} is not accepted; accepted: cite and budget {{sequences, model, rates}}"
            )
        papers[key] = (paper["cite"], Budget(int(budget["sequences"]), str(budget["model"]), str(budget["rates"])))
    claims = {}
    for key, entry in raw["claims"].items():
        where = f"{path}: claims.{key}"
        if not isinstance(entry, dict) or set(entry) - CLAIM_KEYS:
            extra = sorted(set(entry) - CLAIM_KEYS) if isinstance(entry, dict) else entry
            raise UsageError(f"{where} has {extra!r}; accepted keys: {', '.join(sorted(CLAIM_KEYS))}")
        missing = sorted({"paper", "claim", "metric", "value", "accept", "basis", "source"} - set(entry))
        if missing:
            raise UsageError(f"{where} lacks {', '.join(missing)}")
        if entry["paper"] not in papers:
            raise UsageError(f"{where}.paper={entry['paper']!r} is not accepted; accepted: {', '.join(papers)}")
        accept = entry["accept"]
        if not isinstance(accept, list) or len(accept) != 2:
            raise UsageError(f"{where}.accept={accept!r} is not accepted; accepted: [low, high] (null: unbounded)")
        low, high = _bound(accept[0], f"{where}.accept[0]"), _bound(accept[1], f"{where}.accept[1]")
        if low is not None and high is not None and low > high:
            raise UsageError(f"{where}.accept={accept!r} is not accepted; accepted: low ≤ high")
        cite, budget = papers[entry["paper"]]
        budget = Budget(
            int(entry.get("sequences", budget.sequences)), str(entry.get("model", budget.model)), budget.rates
        )
        needs = entry.get("needs")
        if needs is not None:
            if not isinstance(needs, dict) or set(needs) != {"fraction", "why"}:
                raise UsageError(f"{where}.needs is not accepted; accepted: {{fraction, why}}")
            needs = (float(needs["fraction"]), str(needs["why"]))
        claims[key] = Claim(
            key,
            cite,
            str(entry["claim"]),
            str(entry["metric"]),
            _bound(entry["value"], f"{where}.value"),
            (low, high),
            str(entry["basis"]),
            str(entry["source"]),
            budget,
            needs,
        )
    return Anchors(claims)


def inside(accept: tuple[float | None, float | None], low: float, high: float) -> bool:
    """Whether [low, high] meets the interval `accept` (None: unbounded on that side)."""
    return (accept[0] is None or high >= accept[0]) and (accept[1] is None or low <= accept[1])


def verdict(claim: Claim, row: Row) -> tuple[str, str]:
    """(agrees | disagrees | not comparable, why): the rule printed in every section (RULE)."""
    if row.value is None or (isinstance(row.value, float) and math.isnan(row.value)):
        return "not comparable", "no number of ours"
    if row.unlike:
        return "not comparable", row.unlike
    numbers = [shown(v, row.digits) for v in row.values + (row.value,)]
    low, high = min(numbers), max(numbers)
    if inside(claim.accept, low, high):
        return "agrees", ""
    ratio = sequence_ratio(row.budget, claim.budget)
    if claim.needs and ratio is not None and ratio < claim.needs[0]:
        return "not comparable", f"at {fraction(ratio)} of the paper's training: {claim.needs[1]}"
    return "disagrees", ""


def sequence_ratio(ours: Budget, theirs: Budget) -> float | None:
    return None if not ours.sequences or not theirs.sequences else ours.sequences / theirs.sequences


def fraction(ratio: float) -> str:
    """0.0149 -> '1/67', 1.0 -> '1×', 2.5 -> '2.5×'."""
    return f"1/{1 / ratio:,.0f}" if ratio < 0.95 else f"{ratio:.3g}×"


def _number(value: float | None, digits: int) -> str:
    """`digits` decimals (trailing zeros dropped); `digits` significant figures when tiny or huge."""
    if value is None:
        return "—"
    if value != 0 and (abs(value) >= 10**4 or abs(value) < 10**-digits):
        return f"{value:.{max(digits, 1)}g}"
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def shown(value: float, digits: int) -> float:
    """The number as a row prints it: the verdict is taken on what the reader sees."""
    return float(_number(value, digits))


def interval(accept: tuple[float | None, float | None]) -> str:
    low = "−∞" if accept[0] is None else f"{accept[0]:g}"
    high = "∞" if accept[1] is None else f"{accept[1]:g}"
    return f"[{low}, {high}]"


def _count(n: int | None) -> str:
    if not n:
        return "?"
    for unit, size in (("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def table_row(claim: Claim, row: Row) -> str:
    word, why = verdict(claim, row)
    ours = _number(row.value, row.digits)
    if row.values and row.value is not None and len(row.values) > 1:
        ours += f" (seeds {_number(min(row.values), row.digits)}–{_number(max(row.values), row.digits)})"
    ratio = sequence_ratio(row.budget, claim.budget)
    budget = (
        f"sequences {fraction(ratio) if ratio else '?'} ({_count(row.budget.sequences)} / "
        f"{_count(claim.budget.sequences)}); model {row.budget.model} / {claim.budget.model}; "
        f"rates {row.budget.rates} / {claim.budget.rates}"
    )
    cells = [
        f"{claim.cite}: {claim.claim}",
        f"{claim.value:g} ({claim.metric})",
        f"{interval(claim.accept)}: {claim.basis}",
        f"{ours}: {row.ours}",
        budget,
        f"**{word}**" + (f": {why}" if why else ""),
    ]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def section(rows: Sequence[Row], anchors: Anchors, provenance: str) -> list[str]:
    """The section's Markdown lines (heading first, a blank line last)."""
    lines = [
        HEADING,
        "",
        f"- {provenance}",
        f"- {RULE}",
        "- Numbers: the paper's from report/anchors.yaml (source in its entry); ours from this "
        "report's results file, the mean over seeds (seeds: the lowest–highest seed) where there are several. "
        "Budget: ours / the paper's.",
        "",
    ]
    if not rows:
        return lines + ["No claim of a paper is measured by this report.", ""]
    counts = {w: 0 for w in VERDICTS}
    lines += ["| claim | the paper | accepted | ours | budget (ours / paper) | verdict |", "|---|---|---|---|---|---|"]
    for row in rows:
        claim = anchors.claims.get(row.claim)
        if claim is None:
            raise KeyError(f"no claim {row.claim!r} in report/anchors.yaml")
        counts[verdict(claim, row)[0]] += 1
        lines.append(table_row(claim, row))
    return lines + ["", f"Verdicts: {counted(counts)}.", ""]


def replace_section(text: str, new: list[str]) -> str:
    """The report with its "Beside the paper" section replaced by `new` (or inserted before its
    "## Figures", else at its end)."""
    return replace_titled(text, HEADING, new, before="## Figures")


def replace_titled(text: str, heading: str, new: list[str], before: str) -> str:
    """`text` with the section under `heading` (to the next "## " heading) replaced by `new`; where
    there is none, `new` inserted before the line `before`, else at the end."""
    lines = text.rstrip("\n").split("\n")
    if heading in lines:
        start = lines.index(heading)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines[start:end] = new
    elif before in lines:
        at = lines.index(before)
        lines[at:at] = new
    else:
        lines += [""] + new
    return "\n".join(lines).rstrip("\n") + "\n"


def provenance_line(head: dict | None = None) -> str:
    from plots.provenance import commit_line
    from src.provenance import git_commit
    import datetime as dt

    head = head if head is not None else git_commit()
    when = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return f"Written {when} from {commit_line(head)}, from this report's results file and report/anchors.yaml"


def write_section(report_dir: Path, report: str, results_file: str, head: dict | None = None) -> str | None:
    """Writes the section of report_dir/report from report_dir/results_file; returns the verdict
    tally line, or None when the report or its results are missing."""
    path, results = report_dir / report, report_dir / results_file
    if not path.is_file() or not results.is_file():
        return None
    data = json.loads(results.read_text(encoding="utf-8"))
    new = section(rows_for(report, data, report_dir), load_anchors(), provenance_line(head))
    old = path.read_text(encoding="utf-8")
    changed = _without_provenance(replace_section(old, new)) != _without_provenance(old)
    if changed or (_unshippable(old) and not _unshippable(replace_section(old, new))):
        atomic_write_text(path, replace_section(old, new))
    return new[-2] if new[-2].startswith("Verdicts:") else None


def _unshippable(text: str) -> bool:
    """Whether the section's provenance line says its tree had uncommitted changes."""
    return any(line.startswith("- Written ") and "do not ship" in line for line in text.split("\n"))


def _without_provenance(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.startswith("- Written "))


def counted(counts: dict[str, int]) -> str:
    """{'agrees': 2, 'disagrees': 1, ...} -> '2 agree, 1 disagrees, 0 not comparable'."""
    words = {
        "agrees": ("agrees", "agree"),
        "disagrees": ("disagrees", "disagree"),
        "not comparable": ("not comparable", "not comparable"),
    }
    return ", ".join(f"{n} {words[w][n != 1]}" for w, n in counts.items())


def tally(text: str) -> dict[str, int]:
    """The verdict counts of a report's section, read from its table."""
    counts = {w: 0 for w in VERDICTS}
    for line in read_rows(text):
        counts[line[-1].split("**")[1]] += 1
    return counts


def read_rows(text: str) -> list[list[str]]:
    """The section's table rows, split into cells (unescaped)."""
    lines = text.split("\n")
    if HEADING not in lines:
        return []
    start = lines.index(HEADING)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("| ") and not line.startswith("| claim |"):
            cells = [c.strip().replace("\\|", "|") for c in line.strip()[2:-2].split(" | ")]
            rows.append(cells)
    return rows
