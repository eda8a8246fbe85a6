"""Read scenario (and sweep) files: YAML -> validated models, with one-line errors that name
the file, the line and the field and say what is allowed.

pydantic reports where a value is wrong as a path of field names (`loc`); the YAML composer
keeps every node's position (`start_mark`). Walking the composed node tree along that path
gives the line. Bad YAML names the line and the nearest field above it.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from podsim.errors import PodsimError
from podsim.files import MAX_YAML_BYTES, parse_yaml_node, read_text
from podsim.scenario.check import FieldError, check_scenario
from podsim.scenario.schema import Scenario


class YamlDoc(typing.NamedTuple):
    """A parsed YAML document and its node tree (for line numbers)."""

    data: Any
    node: yaml.Node | None
    source: str
    base_dir: Path | None


def _field_above(text: str, line: int) -> str | None:
    """The dotted path of the last `key:` at or above `line` (1-based), by indentation."""
    lines = text.splitlines()[:line]
    path: list[tuple[int, str]] = []
    for raw in lines:
        m = re.match(r"^(\s*)(?:-\s+)?([A-Za-z_][\w.-]*)\s*:", raw)
        if not m or raw.lstrip().startswith("#"):
            continue
        indent = len(m.group(1))
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, m.group(2)))
    return ".".join(k for _, k in path) or None


def read_yaml_doc(path: str | Path, what: str = "scenario") -> YamlDoc:
    """Parse a YAML file keeping node positions; bad YAML is a one-line error with its line."""
    path = Path(path)
    return parse_yaml_doc(read_text(path, what, MAX_YAML_BYTES), str(path), path.parent)


def parse_yaml_doc(text: str, source: str, base_dir: Path | None = None) -> YamlDoc:
    try:
        data, node = parse_yaml_node(text, source)
    except yaml.MarkedYAMLError as exc:
        mark, opened = exc.problem_mark or exc.context_mark, exc.context_mark
        line = mark.line + 1 if mark else None
        near_line = opened.line + 1 if opened is not None else line
        near = _field_above(text, near_line) if near_line else None
        where = f"{source}:{line}" if line else source
        field = ""
        if near:
            field = f" (in field {near}" + (f", opened on line {near_line})" if near_line != line else ")")
        problem = " ".join(str(exc.problem or exc.context or "syntax error").split())
        raise PodsimError(f"{where}: not valid YAML{field}: {problem} at column {mark.column + 1 if mark else '?'}") from None
    except yaml.YAMLError as exc:
        raise PodsimError(f"{source}: not valid YAML: {' '.join(str(exc).split())}") from None
    return YamlDoc(data, node, source, base_dir)


def line_of(node: yaml.Node | None, loc: tuple) -> int | None:
    """1-based line of the deepest node along `loc` (field names and list indices)."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            hit = next(((k, v) for k, v in node.value if str(k.value) == str(part)), None)
            if hit is None:
                break
            line = hit[0].start_mark.line + 1
            node = hit[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _inner(tp: Any) -> Any:
    """The model / container type inside Optional, Annotated, unions."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _inner(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        return _inner(models[0] if models else args[0])
    return tp


def fields_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the model found at `loc` below `model` (empty if not a model)."""
    tp: Any = model
    for part in loc:
        tp = _inner(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            f = tp.model_fields.get(str(part))
            if f is None:
                return []
            tp = f.annotation
        else:
            origin, args = typing.get_origin(tp), typing.get_args(tp)
            if origin is dict and args:
                tp = args[1]
            elif origin in (list, tuple) and args:
                tp = args[0]
            else:
                return []
    tp = _inner(tp)
    return list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []


def describe_error(err: dict, model: type[BaseModel]) -> tuple[tuple, str]:
    """(loc, message) of one pydantic error, worded for a person editing the file."""
    loc = tuple(p for p in err["loc"] if p != "[key]")
    kind, msg = err["type"], err["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        allowed = fields_at(model, loc[:-1])
        return loc, f"unknown field {loc[-1]!r}; allowed: {', '.join(allowed)}"
    if kind == "missing":
        return loc, f"missing required field {loc[-1]!r}"
    if kind in ("value_error", "assertion_error"):
        return loc, msg
    got = err.get("input")
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return loc, f"{msg[0].lower() + msg[1:]} (got {shown})"


def format_error(source: str, line: int | None, loc: tuple, message: str) -> str:
    where = f"{source}:{line}" if line else source
    field = ".".join(str(p) for p in loc)
    return f"{where}: {field}: {message}" if field else f"{where}: {message}"


def validated(model: type[BaseModel], doc: YamlDoc, prefix: tuple = ()) -> Any:
    """`model` from the document's data (at `prefix`); one-line errors with file and line."""
    data = doc.data
    context = {"base_dir": doc.base_dir}
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        loc, message = describe_error(exc.errors()[0], model)
        raise PodsimError(format_error(doc.source, line_of(doc.node, prefix + loc), prefix + loc, message)) from None


def scenario_from_doc(doc: YamlDoc) -> Scenario:
    """Validate a parsed scenario document and run the cross-field checks."""
    if not isinstance(doc.data, dict):
        raise PodsimError(f"{doc.source}: a scenario is a mapping of fields ({', '.join(Scenario.model_fields)})")
    if "sweep" in doc.data:
        raise PodsimError(f"{doc.source}: this is a sweep file (it has 'sweep:'); run it with `podsim sweep`")
    scenario = validated(Scenario, doc)
    try:
        check_scenario(scenario)
    except FieldError as exc:
        raise PodsimError(format_error(doc.source, line_of(doc.node, exc.loc), exc.loc, str(exc))) from None
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    r"""Read and validate a scenario file: one pydantic schema, then the rules across fields.

    Parameters
    ----------
    path : str or Path
        The YAML file; paths inside it are relative to its folder.

    Returns
    -------
    Scenario
        The validated scenario (`run_scenario` runs it).

    Raises
    ------
    PodsimError
        One line naming the file, line and field, the value and what is allowed.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from podsim import load_scenario
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "s.yaml"
    >>> _ = path.write_text("name: x\ntopology: {generation: tpu-v4}\nworkload: {step: {model: resnet50, slice: 4x4x4}}")
    >>> load_scenario(path).kind
    'step'
    >>> _ = path.write_text("name: x\ntopology: {generation: tpu-v9}\nworkload: {step: {model: resnet50, slice: 4x4x4}}")
    >>> load_scenario(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    podsim.errors.PodsimError: ...s.yaml:2: topology.generation: unknown generation 'tpu-v9'...
    """
    return scenario_from_doc(read_yaml_doc(path))


def scenario_from_dict(raw: dict, source: str = "<scenario>", base_dir: str | Path | None = None) -> Scenario:
    """Validate a scenario given as a mapping (no line numbers)."""
    return scenario_from_doc(YamlDoc(raw, None, source, Path(base_dir) if base_dir else None))


def load_scenario_text(text: str, source: str = "<scenario>", base_dir: str | Path | None = None) -> Scenario:
    """Validate scenario YAML text (the dashboard's editor, tests)."""
    return scenario_from_doc(parse_yaml_doc(text, source, Path(base_dir) if base_dir else None))
