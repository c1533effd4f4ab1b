"""A YAML file with every `!include PATH` resolved relative to the file that holds it (an absolute
PATH as written), read with a safe loader (no tag constructs objects; `!!python/...` is refused),
each file once however often it is included. Budgets: MAX_INCLUDE_DEPTH files in one chain,
MAX_FILES files, MAX_VALUES values and MAX_NESTING levels in the composed config. A cycle, a missing
or unreadable file, invalid YAML and a budget exceeded are refused as src.flags.UsageError, in one
line naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from src.flags import UsageError, read_user_file


# Budgets of `!include` composition: a config is a few files of a few hundred values; these stop a
# hostile or mistaken graph (a file included twice at every one of 30 levels expands to 2^30
# copies) long before it costs memory or time.
MAX_INCLUDE_DEPTH = 32  # files in one chain of includes
MAX_FILES = 256  # distinct files
MAX_VALUES = 200_000  # values of the whole composed config
MAX_NESTING = 100  # levels of mappings and lists in the composed config


class _Include:
    """An `!include` read but not yet resolved: the path as written, and the file holding it."""

    def __init__(self, target: str, holder: Path):
        self.target, self.holder = target, holder


def load(path: str | Path) -> Any:
    """The YAML file at `path` with every `!include` resolved (UsageError, one line): each file is
    read once however often it is included, and the composition is refused, naming the file, when
    it loops, nests deeper than MAX_INCLUDE_DEPTH files, or would expand beyond MAX_VALUES values,
    MAX_NESTING levels or MAX_FILES files. Only regular files are read (a FIFO, device or
    directory is refused without being opened for long)."""
    from src.provenance import checkout_path

    composer = _Composer()
    root = composer.resolve(checkout_path(path), None)
    size, depth = composer.measure(root, ())
    if size > MAX_VALUES:
        raise UsageError(
            f"config {path}: its !includes expand to {size:,} values; accepted: at most "
            f"{MAX_VALUES:,} (is a file included many times over?)"
        )
    if depth > MAX_NESTING:
        raise UsageError(
            f"config {path}: nests more than {MAX_NESTING} levels deep (with its !includes); "
            f"accepted: at most {MAX_NESTING}"
        )
    return composer.expand(composer.parsed[root])


class _Composer:
    """Reads each file of an include graph once (`parsed`: resolved path -> its YAML with
    `_Include` leaves), measures the composition before building it, then builds it."""

    def __init__(self):
        self.parsed: dict[Path, Any] = {}
        self.measured: dict[Path, tuple[int, int]] = {}

    def resolve(self, path: Path, include: _Include | None) -> Path:
        """The resolved path of a file of the graph, read and parsed once."""
        where = f" (included by {include.holder})" if include is not None else ""
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError) as err:  # Python 3.11: RuntimeError for a symlink loop
            raise UsageError(f"config {path}: cannot be resolved ({err}){where}") from None
        if resolved in self.parsed:
            return resolved
        if len(self.parsed) >= MAX_FILES:
            raise UsageError(f"config {path}: the !includes name more than {MAX_FILES} files{where}")
        try:
            text = read_user_file(path, "config" if include is None else "!include", "a YAML config")
        except UsageError as err:
            raise UsageError(f"{err}{where}") from None
        self.parsed[resolved] = self._parse(text, path, resolved)
        return resolved

    @staticmethod
    def _parse(text: str, path: Path, resolved: Path) -> Any:
        import yaml

        class Loader(yaml.SafeLoader):
            """A safe loader whose `!include` is left as an `_Include` to resolve after parsing."""

        Loader.add_constructor("!include", lambda loader, node: _Include(loader.construct_scalar(node), resolved))
        try:
            return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as err:
            raise UsageError(f"config {path}: not valid YAML ({' '.join(str(err).split())[:300]})") from None
        except RecursionError:
            raise UsageError(
                f"config {path}: nests too deeply to read; accepted: at most {MAX_NESTING} levels"
            ) from None

    def target(self, include: _Include) -> Path:
        named = Path(str(include.target))
        return self.resolve(named if named.is_absolute() else include.holder.parent / named, include)

    def measure(self, file: Path, chain: tuple[Path, ...]) -> tuple[int, int]:
        """(values, nesting levels) of a file once its includes are expanded; refuses a cycle and
        a chain of more than MAX_INCLUDE_DEPTH files, and stops counting past the budgets."""
        if file in chain:
            cycle = " -> ".join(str(p) for p in (*chain[chain.index(file) :], file))
            raise UsageError(f"!include cycle: {cycle}")
        if file not in self.measured:
            self.measured[file] = self._measure(self.parsed[file], (*chain, file), 0)
        size, depth, files = self.measured[file]
        if len(chain) + files > MAX_INCLUDE_DEPTH:
            raise UsageError(
                f"config {chain[0] if chain else file}: !includes nest more than "
                f"{MAX_INCLUDE_DEPTH} files deep (through {file}); accepted: at most "
                f"{MAX_INCLUDE_DEPTH}"
            )
        return size, depth

    def _measure(self, node: Any, chain: tuple[Path, ...], level: int) -> tuple[int, int, int]:
        """(values, nesting levels, files in the longest include chain) below `node`."""
        if level > MAX_NESTING:
            return 1, level, 1
        if isinstance(node, _Include):
            file = self.target(node)
            size, depth = self.measure(file, chain)
            return size, level + depth, 1 + self.measured[file][2]
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        size, depth, files = 1, level, 1
        for child in children:
            child_size, child_depth, child_files = self._measure(child, chain, level + 1)
            size = min(size + child_size, MAX_VALUES + 1)
            depth, files = max(depth, child_depth), max(files, child_files)
        return size, depth, files

    def expand(self, node: Any) -> Any:
        """A fresh copy of a parsed file with every include replaced by its file's expansion."""
        if isinstance(node, _Include):
            return self.expand(self.parsed[self.target(node)])
        if isinstance(node, dict):
            return {key: self.expand(value) for key, value in node.items()}
        if isinstance(node, list):
            return [self.expand(value) for value in node]
        return node
