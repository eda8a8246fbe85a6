"""Every file podsim reads or writes goes through here: one reader per format (text, YAML, JSON,
CSV) and one atomic writer, each failing with one line that names the file.

Reading: the bytes are capped in size, decoded as UTF-8 (a byte-order mark is allowed), parsed
with a nesting-depth cap; YAML aliases may not expand past a node budget (billion-laughs safe);
numbers must be finite (`.inf`, `NaN`, `1e400` are refused with the field's path); CSV rows
must have as many fields as the header (the error gives the line).

Writing: to a temporary file in the target folder, then `os.replace`, so a failed write
leaves the old file (or nothing) behind; a folder where a file is expected, a file where a
folder is expected and an unwritable place are each one line naming the path.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from podsim.errors import PodsimError
from podsim.units import format_bytes

MAX_TEXT_BYTES = 64 * 2**20  # a scenario, sweep, requests or trace file; the largest shipped is < 2 MB
MAX_CSV_BYTES = 1024 * 2**20  # a job trace: public traces run to ~10^6 rows (~100 MB)
MAX_DEPTH = 100  # nesting levels; podsim's own files need fewer than 10
MAX_EXPANDED_NODES = 1_000_000  # YAML nodes after aliases are expanded


def read_bytes(path: str | Path, what: str = "input", max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of an input file; missing, a folder, too large or unreadable: one line."""
    path = Path(path)
    try:
        if path.is_dir():
            raise PodsimError(f"{what} file {str(path)!r} is a folder; give a file")
        size = path.stat().st_size
        if size > max_bytes:
            raise PodsimError(f"{what} file {str(path)!r} is {format_bytes(size)}; podsim reads inputs of at most "
                              f"{format_bytes(max_bytes)} (they are parsed in memory)")
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise PodsimError(f"{what} file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise PodsimError(f"cannot read {what} file {str(path)!r}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # a pipe or a file that grew
        raise PodsimError(f"{what} file {str(path)!r} is larger than {format_bytes(max_bytes)}")
    return data


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped); otherwise one line with the byte offset."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PodsimError(f"{source}: not UTF-8 text (byte offset {exc.start}); podsim reads UTF-8 YAML, JSON and CSV") from None


def read_text(path: str | Path, what: str = "input", max_bytes: int = MAX_TEXT_BYTES) -> str:
    """An input file as text: size-capped and UTF-8 (see read_bytes, decode_text)."""
    return decode_text(read_bytes(path, what, max_bytes), str(path))


# YAML -------------------------------------------------------------------------------------------
class _TooDeep(Exception):
    def __init__(self, mark):
        self.mark = mark


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with a nesting cap (its composer recurses once per level)."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeep(self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _expanded_nodes(root: yaml.Node) -> int:
    """How many nodes the document has once every alias is expanded (memoised per node)."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key not in sizes:
            if isinstance(node, yaml.MappingNode):
                sizes[key] = 1 + sum(size(k) + size(v) for k, v in node.value)
            elif isinstance(node, yaml.SequenceNode):
                sizes[key] = 1 + sum(size(v) for v in node.value)
            else:
                sizes[key] = 1
        return sizes[key]

    return size(root)


def parse_yaml_node(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """(data, composed node) of YAML text. Syntax errors propagate as yaml.YAMLError (callers word
    them with the line); depth, alias expansion and non-finite numbers are one-line PodsimErrors."""
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except _TooDeep as exc:
            raise PodsimError(f"{source}:{exc.mark.line + 1}: nested deeper than {MAX_DEPTH} levels; podsim files need fewer than 10") from None
        if node is None:
            return None, None
        if "*" in text and _expanded_nodes(node) > MAX_EXPANDED_NODES:
            raise PodsimError(f"{source}: YAML aliases expand to more than {MAX_EXPANDED_NODES:,} nodes; write the values out instead")
        data = loader.construct_document(node)
    except RecursionError:
        raise PodsimError(f"{source}: nested too deeply to read") from None
    finally:
        loader.dispose()
    check_finite(data, source)
    return data, node


def yaml_error_text(exc: yaml.YAMLError) -> str:
    """' at line L column C: problem' of a PyYAML error, on one line."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return f"{where}: {' '.join(str(problem).split())}"


def parse_yaml(text: str, source: str) -> Any:
    """YAML text -> data; any problem is one line naming `source`."""
    try:
        return parse_yaml_node(text, source)[0]
    except yaml.YAMLError as exc:
        raise PodsimError(f"{source} is not valid YAML{yaml_error_text(exc)}") from None


def read_yaml(path: str | Path, what: str = "input") -> Any:
    """A YAML file's data (see the module docstring for what is refused)."""
    return parse_yaml(read_text(path, what), str(path))


# JSON -------------------------------------------------------------------------------------------
def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def parse_json(text: str, source: str) -> Any:
    """JSON text -> data; bad JSON, NaN/Infinity and deep nesting are one line naming `source`."""
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise PodsimError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:
        raise PodsimError(f"{source} is not valid JSON for podsim: {exc}") from None
    except RecursionError:
        raise PodsimError(f"{source}: nested deeper than {MAX_DEPTH} levels; podsim files need fewer than 10") from None
    check_finite(data, source)
    return data


def read_json(path: str | Path, what: str = "input") -> Any:
    return parse_json(read_text(path, what), str(path))


def read_structured(path: str | Path, what: str = "input") -> Any:
    """A `.json` file as JSON, anything else as YAML."""
    return read_json(path, what) if Path(path).suffix.lower() == ".json" else read_yaml(path, what)


def check_finite(data: Any, source: str) -> None:
    """Refuse nesting past MAX_DEPTH and any NaN or infinite number, naming its path."""
    stack: list[tuple[Any, tuple, int]] = [(data, (), 0)]
    seen: set[int] = set()
    while stack:
        x, path, depth = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            where = ".".join(str(p) for p in path) or "value"
            raise PodsimError(f"{source}: {where}: {x} is not a finite number; podsim reads only finite numbers")
        if isinstance(x, (dict, list)):
            if depth >= MAX_DEPTH:
                raise PodsimError(f"{source}: nested deeper than {MAX_DEPTH} levels; podsim files need fewer than 10")
            if id(x) in seen:  # a YAML alias: its content is checked once
                continue
            seen.add(id(x))
            items = x.items() if isinstance(x, dict) else enumerate(x)
            stack.extend((v, (*path, k), depth + 1) for k, v in items)


# CSV --------------------------------------------------------------------------------------------
def read_csv(path: str | Path, what: str = "CSV") -> tuple[list[str], Iterator[tuple[int, dict[str, str]]]]:
    """(header, rows) of a CSV file; each row is (line number, {column: text}). A row with more
    or fewer fields than the header is one line naming the file and the line."""
    path = Path(path)
    text = read_text(path, what, MAX_CSV_BYTES)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, [])
    except csv.Error as exc:
        raise PodsimError(f"{path.name} line 1: not valid CSV: {exc}") from None
    header = [h.strip() for h in header]

    def rows() -> Iterator[tuple[int, dict[str, str]]]:
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise PodsimError(f"{path.name} line {reader.line_num}: not valid CSV: {exc}") from None
            if not fields:
                continue
            if len(fields) != len(header):
                raise PodsimError(f"{path.name} line {reader.line_num}: {len(fields)} fields, but the header has "
                                  f"{len(header)} ({', '.join(header)})")
            yield reader.line_num, dict(zip(header, fields, strict=True))

    return header, rows()


# Writing ----------------------------------------------------------------------------------------
def output_folder(path: str | Path, what: str = "output folder") -> Path:
    """Create `path` (and its parents) as a folder; a file in the way or no permission: one line."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise PodsimError(f"{what} {str(path)!r} is a file, not a folder; give a folder path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PodsimError(f"{what} {str(path)!r}: a file is in the way of this folder path") from None
    except OSError as exc:
        raise PodsimError(f"cannot create {what} {str(path)!r}: {exc.strerror or exc}") from None
    return path


def write_bytes_atomic(path: str | Path, data: bytes, make_parents: bool = False) -> Path:
    """Write `data` to a temporary file beside `path`, then rename it into place."""
    path = Path(path)
    if path.is_dir():
        raise PodsimError(f"output {str(path)!r} is a folder; give a file name")
    if make_parents:
        output_folder(path.parent)
    elif not path.parent.is_dir():
        raise PodsimError(f"output folder {str(path.parent)!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise PodsimError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise PodsimError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | Path, text: str, make_parents: bool = False) -> Path:
    """write_bytes_atomic of UTF-8 text."""
    return write_bytes_atomic(path, text.encode("utf-8"), make_parents)


def safe_component(name: str, default: str = "run") -> str:
    """A name from a file (a scenario's, a sweep's) as one path component: separators, '..',
    and characters outside letters, digits, '.', '_', '-' become '_'; never empty or hidden."""
    parts = [p for p in re.split(r"[/\\]+", str(name)) if p not in ("", ".", "..")]
    text = re.sub(r"[^\w.-]+", "_", "_".join(parts)).lstrip(".")
    return text[:100] or default
