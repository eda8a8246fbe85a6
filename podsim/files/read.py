"""Reading: one reader per format (text, YAML, JSON, CSV), each failing with one line that
names the file.

The bytes are capped in size, decoded as UTF-8 (a byte-order mark is allowed), parsed with a
nesting-depth cap; YAML aliases may not expand past a node budget (billion-laughs safe);
numbers must be finite (`.inf`, `NaN`, `1e400` are refused with the field's path); CSV rows
must have as many fields as the header (the error gives the line). Only a regular file is read:
a FIFO, a device, a socket or a folder is refused before anything could block on it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from podsim.bounds import budget
from podsim.errors import PodsimError
from podsim.units import format_bytes

MAX_TEXT_BYTES = 64 * 2**20  # a JSON trace or any text input; the largest shipped file is < 2 MB
MAX_YAML_BYTES = 16 * 2**20  # a YAML file: PyYAML builds ~1 MB of nodes a second, so this parses within ~a minute
MAX_CSV_BYTES = 1024 * 2**20  # a job trace: public traces run to ~10^6 rows (~100 MB)
MAX_BINARY_BYTES = 1024 * 2**20  # a Chakra .et rank file: PyTorch execution traces of large models run to ~100s of MB
MAX_DEPTH = 100  # nesting levels; podsim's own files need fewer than 10
MAX_EXPANDED_NODES = 1_000_000  # YAML nodes after aliases are expanded


def kind_of(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def input_cap(default: int) -> int:
    """The byte cap of an input: `--max-input` (podsim.bounds budget) when given, else `default`."""
    given = budget().input_bytes
    return default if given is None else int(given)


def read_bytes(path: str | Path, what: str = "input", max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of an input file. Only a regular file is read (a FIFO, a device, a socket or a
    folder is refused before it can block), at most `max_bytes` (or `--max-input`); missing,
    too large or unreadable: one line."""
    path = Path(path)
    cap = input_cap(max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise PodsimError(f"{what} file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise PodsimError(f"{what} file {str(path)!r} is a folder; give a file") from None
    except OSError as exc:
        raise PodsimError(f"cannot read {what} file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        kind = kind_of(info.st_mode)
        if kind == "a folder":
            raise PodsimError(f"{what} file {str(path)!r} is a folder; give a file")
        if kind is not None:
            raise PodsimError(f"{what} file {str(path)!r} is {kind}; podsim reads regular files only (a pipe or device could block or never end)")
        if info.st_size > cap:
            raise PodsimError(f"{what} file {str(path)!r} is {format_bytes(info.st_size)}; podsim reads inputs of at most "
                              f"{format_bytes(cap)} (they are parsed in memory); raise it with --max-input SIZE")
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(min(cap, info.st_size) + 1)  # no buffer of the cap's size (--max-input 1PB)
            while len(data) <= cap and len(data) > info.st_size:  # it grew (or /proc says 0): read on
                chunk = fh.read(min(cap + 1 - len(data), 16 * 2**20))
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        raise PodsimError(f"cannot read {what} file {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > cap:  # a file that grew while it was read
        raise PodsimError(f"{what} file {str(path)!r} is larger than {format_bytes(cap)}; raise it with --max-input SIZE")
    return data


def check_input_file(path: str | Path, what: str = "input") -> Path:
    """`path` if it names an existing regular file (for readers handed a path, not bytes)."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise PodsimError(f"{what} file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise PodsimError(f"cannot read {what} file {str(path)!r}: {exc.strerror or exc}") from None
    kind = kind_of(info.st_mode)
    if kind is not None:
        raise PodsimError(f"{what} file {str(path)!r} is {kind}; podsim reads regular files only")
    return path


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped) without NUL bytes; otherwise one line with
    the byte offset (a NUL is binary data or a truncated write, never text podsim reads)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PodsimError(f"{source}: not UTF-8 text (byte offset {exc.start}); podsim reads UTF-8 YAML, JSON and CSV") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise PodsimError(f"{source}: a NUL byte at byte offset {nul}; podsim reads text files (binary data or a truncated write?)")
    return text


def read_text(path: str | Path, what: str = "input", max_bytes: int = MAX_TEXT_BYTES) -> str:
    """An input file as text: size-capped and UTF-8 (see read_bytes, decode_text)."""
    return decode_text(read_bytes(path, what, max_bytes), str(path))


# YAML -------------------------------------------------------------------------------------------
class _TooDeep(Exception):
    def __init__(self, mark):
        self.mark = mark


try:  # libyaml's parser (C) under PyYAML's own composer and constructor: ~3x faster, same nodes
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.cyaml import CParser
    from yaml.resolver import Resolver

    class _Base(Composer, SafeConstructor, Resolver, CParser):
        def __init__(self, stream):
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)
except ImportError:  # PyYAML built without libyaml
    _Base = yaml.SafeLoader


class _Loader(_Base):
    """PyYAML's safe loader (its composer in Python, so every node passes here) with a nesting
    cap (the composer recurses once per level) that refuses a key given twice in one mapping
    (PyYAML keeps the last, silently)."""

    _depth = 0
    source = "YAML"

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *base`: keys given beside it override the merged ones, by design
                key = self.construct_object(key_node, deep=False)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise PodsimError(f"{self.source}:{line}: key {key!r} is given twice in one mapping (first on line "
                                          f"{seen[key]}); the last would silently win")
                    seen[key] = line
                except TypeError:  # an unhashable key: the constructor words that error itself
                    continue
        return super().construct_mapping(node, deep=deep)

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
    loader.source = source
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
    return parse_yaml(read_text(path, what, MAX_YAML_BYTES), str(path))


# JSON -------------------------------------------------------------------------------------------
def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"key {k!r} is given twice in one object; the last would silently win")
        out[k] = v
    return out


def parse_json(text: str, source: str) -> Any:
    """JSON text -> data; bad JSON, NaN/Infinity, a key given twice in one object and deep
    nesting are one line naming `source`."""
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise PodsimError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except _DuplicateKey as exc:
        raise PodsimError(f"{source}: {exc}") from None
    except ValueError as exc:
        raise PodsimError(f"{source} is not valid JSON for podsim: {exc}") from None
    except RecursionError:
        raise PodsimError(f"{source}: nested deeper than {MAX_DEPTH} levels; podsim files need fewer than 10") from None
    check_finite(data, source, floats=False)  # parse_float and parse_constant refused non-finite numbers
    return data


def read_json(path: str | Path, what: str = "input") -> Any:
    return parse_json(read_text(path, what), str(path))


def read_structured(path: str | Path, what: str = "input") -> Any:
    """A `.json` file as JSON, anything else as YAML."""
    return read_json(path, what) if Path(path).suffix.lower() == ".json" else read_yaml(path, what)


def check_finite(data: Any, source: str, floats: bool = True) -> None:
    """Refuse nesting past MAX_DEPTH and any NaN or infinite number, naming its path. Only
    containers are pushed (a trace of 10^5 ops walks in well under a second); the path of a
    bad value is rebuilt from parent links only when one is found."""
    isfinite = math.isfinite

    def where(link: tuple | None) -> str:
        parts = []
        while link is not None:
            link, k = link
            parts.append(k)
        return ".".join(str(p) for p in reversed(parts)) or "value"

    if isinstance(data, float) and not isfinite(data):
        raise PodsimError(f"{source}: value: {data} is not a finite number; podsim reads only finite numbers")
    stack: list[tuple[Any, int, tuple | None]] = [(data, 0, None)]
    seen: set[int] = set()
    while stack:
        x, depth, link = stack.pop()
        if not isinstance(x, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            raise PodsimError(f"{source}: nested deeper than {MAX_DEPTH} levels; podsim files need fewer than 10")
        if floats:
            if id(x) in seen:  # a YAML alias: its content is checked once
                continue
            seen.add(id(x))
        for k, v in (x.items() if isinstance(x, dict) else enumerate(x)):
            if isinstance(v, float) and floats:
                if not isfinite(v):
                    raise PodsimError(f"{source}: {where((link, k))}: {v} is not a finite number; podsim reads only finite numbers")
            elif isinstance(v, (dict, list)):
                stack.append((v, depth + 1, (link, k)))


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
    dup = next((h for i, h in enumerate(header) if h in header[:i]), None)
    if dup is not None:
        raise PodsimError(f"{path.name} line 1: column {dup!r} appears twice in the header; which one is meant?")

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
