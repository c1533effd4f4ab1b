"""`make help`: every target of a Makefile with its one-line description, the text after `##` on
the target's line, in the file's order. Standard library only: it runs before .venv exists.

    python3 scripts/make_help.py Makefile
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TARGET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):[^=]*?##\s*(.+)$")


def described_targets(text: str) -> list[tuple[str, str]]:
    """(target, description) for every target line carrying `## description`, in order."""
    return [(m.group(1), m.group(2).strip()) for line in text.splitlines() if (m := TARGET.match(line))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 scripts/make_help.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("makefile", nargs="?", default="Makefile", help="the Makefile to read (default: Makefile)")
    args = parser.parse_args(argv)
    try:
        text = Path(args.makefile).read_text(encoding="utf-8")
    except OSError as err:
        print(
            f"{parser.prog}: error: makefile={args.makefile!r} cannot be read ({err.strerror}); accepted: "
            "a readable Makefile",
            file=sys.stderr,
        )
        return 2
    targets = described_targets(text)
    width = max((len(name) for name, _ in targets), default=0)
    for name, text in targets:
        print(f"make {name:<{width}}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
