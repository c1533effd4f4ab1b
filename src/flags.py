"""Flags of every command line, below everything that parses them (src/cli/ holds the papers'
dialects only): a parser whose errors are one line (exit 2), typed flag converters whose
messages name the value and what is accepted, the dry run, and `--choices`.

    parser = OneLineParser(prog="python -m runners.x")
    parser.add_argument("--steps", type=int_at_least(1))
    parser.add_argument("--noise_p", type=number_in(0, 1))

argparse prefixes the converter's message with the flag, so a bad value reads
"python -m runners.x: error: argument --steps: '0' is out of range; accepted: an integer >= 1".
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Callable, Mapping, Sequence

from src.bounds import RANGES, SEED_LIMIT  # noqa: F401 - the one table of integer ranges


DRY_RUN = "WORKBENCH_DRY_RUN"


def dry_run_requested() -> bool:
    """WORKBENCH_DRY_RUN=1 is set: the command checks and stops before its first write."""
    return os.environ.get(DRY_RUN, "") not in ("", "0")


def overwrite_hint() -> str:
    """How to ask for --overwrite where the user typed the command: under make, OVERWRITE=1."""
    return "--overwrite (make: OVERWRITE=1)" if os.environ.get("MAKELEVEL") else "--overwrite"


def dry_run(prog: str, what: str) -> bool:
    """True, after one line on stdout, when WORKBENCH_DRY_RUN=1: the command has checked its flags,
    settings and output places and stops before its first write (the docs' commands are tested
    this way; a user can check a long command the same way)."""
    if not dry_run_requested():
        return False
    print(f"{prog}: dry run ({DRY_RUN}=1): would {what}")
    return True


def summary(doc: str | None) -> str:
    """A module docstring's first paragraph as one line: what a command's --help opens with."""
    paragraph = (doc or "").strip().split("\n\n", 1)[0]
    lines = [line.strip() for line in paragraph.splitlines()]
    return "".join(
        line if i + 1 == len(lines) or line.endswith("-") else line + " " for i, line in enumerate(lines)
    ).strip()


class UsageError(Exception):
    """A bad flag, value or combination; the message is one line."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


# flags that never change a run's numbers, left out of default run names
OUTPUT_FLAGS = frozenset(
    {"out", "overwrite", "resume", "quiet", "skip_analysis", "save_attention", "choices", "show", "seed"}
)


def changed_flags(
    args: argparse.Namespace,
    defaults: argparse.Namespace,
    words: Mapping[str, str] | None = None,
    skip: frozenset = OUTPUT_FLAGS,
) -> list[str]:
    """`<word><value>` (`<word>` for a switch) for each flag of `args` not at its default in
    `defaults` (both parsed by the same parser), in the parser's order: the part of a default run
    name that tells apart the iterations of a loop over any flag. `words` names a flag's dest
    (default: the dest itself); a list value (a repeated flag) is joined by '+'."""
    out = []
    for dest, value in vars(args).items():
        if dest in skip or (words is not None and dest not in words) or value == getattr(defaults, dest, value):
            continue
        word = dest if words is None else words[dest]
        text = "+".join(map(str, value)) if isinstance(value, list) else str(value)
        out.append(word if value is True else f"{word}{text}".replace("/", "-"))
    return out


def add_both_spellings(parser, flag: str, **options) -> argparse.Action:
    """`flag` under both spellings, as given first (`--runs-dir`, then `--runs_dir`), stored in its
    underscored dest; `options` as for add_argument."""
    other = "--" + (flag[2:].replace("-", "_") if "-" in flag[2:] else flag[2:].replace("_", "-"))
    return parser.add_argument(flag, other, dest=flag[2:].replace("-", "_"), **options)


def add_set_flag(parser, dest: str, help: str) -> argparse.Action:
    """`--set KEY=VALUE`, repeatable, the values in order in `dest` (an empty list by default)."""
    return parser.add_argument("--set", dest=dest, action="append", default=[], metavar="KEY=VALUE", help=help)


def fail(prog: str, message: str, code: int = 2) -> int:
    """Print `prog: error: message` (one line) to stderr; returns `code` for `return fail(...)`."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code


def _named(parse: Callable, name: str) -> Callable:
    parse.__name__ = name
    return parse


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (high None: no upper bound)."""
    what = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer; accepted: {what}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} is out of range; accepted: {what}")
        return value

    return _named(parse, what)


def seed() -> Callable[[str], int]:
    return int_at_least(0, SEED_LIMIT - 1)


def bounded(kind: str) -> Callable[[str], int]:
    """An integer flag in the range src.bounds.RANGES gives `kind` (layers, heads, sizes, ...)."""
    return int_at_least(*RANGES[kind])


def number_in(
    low: float, high: float, *, low_open: bool = False, high_open: bool = False, what: str | None = None
) -> Callable[[str], float]:
    """A finite number in the interval (brackets as given)."""
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    what = what or f"a number in {left}{low:g}, {high:g}{right}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except (TypeError, ValueError):
            value = math.nan
        ok = (
            math.isfinite(value)
            and (value > low if low_open else value >= low)
            and (value < high if high_open else value <= high)
        )
        if not ok:
            raise argparse.ArgumentTypeError(f"{text!r} is not accepted; accepted: {what}")
        return value

    return _named(parse, what)


def positive_number() -> Callable[[str], float]:
    return number_in(0.0, math.inf, low_open=True, what="a finite number > 0")


def non_negative_number() -> Callable[[str], float]:
    return number_in(0.0, math.inf, what="a finite number >= 0")


def path_text() -> Callable[[str], str]:
    """A path that is not empty or blank (an empty --out would name the working directory)."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{text!r} is empty; accepted: a path")
        return text

    return _named(parse, "a path")


MAX_FILE_BYTES = 1 << 22  # 4 MiB: the most a config file a user names may hold


def read_user_file(path: str | os.PathLike, what: str, accepted: str) -> str:
    """The text of a file a user named (UsageError, one line, `what PATH: ...; accepted: ...`):
    only a regular file of at most MAX_FILE_BYTES, opened without blocking, so a FIFO, device,
    socket or directory is refused at once; a missing, unreadable or binary file is named."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UsageError(f"{what} {path}: no such file") from None
    except OSError as err:
        raise UsageError(f"{what} {path}: cannot be read ({err.strerror or err})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
        os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{what} {path}: is not a regular file; accepted: {accepted}")
        raise UsageError(f"{what} {path}: is {info.st_size:,} bytes; accepted: at most {MAX_FILE_BYTES:,}")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as err:
            raise UsageError(f"{what} {path}: cannot be read ({err.strerror or err})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path}: is not a text file; accepted: {accepted}") from None


def or_auto(convert: Callable[[str], object]) -> Callable[[str], object]:
    """`auto`, or a value of `convert`."""
    return _named(lambda text: "auto" if text == "auto" else convert(text), f"auto or {convert.__name__}")


# ---------------------------------------------------------------------------
# Comma-separated lists (sweep grids): UsageError naming the flag, the item and what is accepted


def comma_items(flag: str, text: str | None, what: str) -> list[str]:
    """The non-empty items of a comma list, in order (UsageError, one line, for an empty list, an
    empty item or an item given twice)."""
    if text is None or not str(text).strip():
        raise UsageError(f"{flag}={text or ''!r} is empty; accepted: a comma-separated list of {what}")
    items = [t.strip() for t in str(text).split(",")]
    if any(not t for t in items):
        raise UsageError(f"{flag}={text!r} has an empty item; accepted: a comma-separated list of {what}")
    refuse_repeats(flag, text, items)
    return items


def refuse_repeats(flag: str, text, items) -> None:
    """UsageError (one line) naming the first item of a list given twice."""
    seen = set()
    for item in items:
        if item in seen:
            raise UsageError(f"{flag}={text!r} names {item!r} twice; accepted: each item once")
        seen.add(item)


def choices_list(flag: str, text: str | None, accepted: Sequence[str]) -> list[str]:
    items = comma_items(flag, text, "values from: " + ", ".join(accepted))
    for item in items:
        if item not in accepted:
            raise UsageError(f"{flag}={item!r} is unknown; accepted: {', '.join(accepted)}")
    return items


def number_list(flag: str, text: str | None, low: float, high: float, what: str, allow_auto: bool = False) -> list:
    """Numbers in [low, high] (and `auto` where allowed)."""
    suffix = " (or auto)" if allow_auto else ""
    out = []
    for item in comma_items(flag, text, what + suffix):
        if allow_auto and item == "auto":
            out.append(item)
            continue
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and low <= value <= high):
            raise UsageError(f"{flag}={item!r} is out of range; accepted: {what}{suffix}")
        out.append(value)
    return out


def int_list(flag: str, text: str | None, low: int, high: int = SEED_LIMIT - 1) -> list[int]:
    what = f"integers in [{low}, {high}]"
    out = []
    for item in comma_items(flag, text, what):
        if not item.isdigit() or not low <= int(item) <= high:
            raise UsageError(f"{flag}={item!r} is not accepted; accepted: {what}")
        out.append(int(item))
    return out


def seed_list(text: str | None, flag: str = "--seeds") -> list[int]:
    return int_list(flag, text, 0, SEED_LIMIT - 1)


class PrintChoices(argparse.Action):
    """`--choices`: print every registry (names, one-line docs, default options) and exit 0."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="list every registry (tasks, layouts, mixers, ...) and exit",
        )

    def __call__(self, parser, namespace, values, option_string=None):
        from src.registry import describe_all

        print(describe_all())
        parser.exit(0)
