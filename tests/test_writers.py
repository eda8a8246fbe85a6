"""No writer takes a path from a user-given name except through podsim/files/.

Two rules, read from the source (the writers of podsim/ and app_pages/):

1. Only podsim/files/ calls a raw writer (Path.write_text/write_bytes, open(..., 'w'),
   os.replace, shutil moves and copies, mkdir, mkdtemp, pyarrow's write_table, ...): every other
   module writes through podsim.files' atomic writers, `staged_folder`, `claim_folder` and
   `output_folder`.
2. Every path handed to a podsim.files writer is a path the user gave whole (a variable), a folder
   joined to a constant name (`out / "report.html"`), or made by podsim.files from a name
   (`inside`, `safe_component`, `plain_name`, `safe_file_name`), also when it is
   first bound to a variable: a user-given name joined to a folder anywhere else is refused.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.joinpath("podsim").rglob("*.py"), *ROOT.joinpath("app_pages").glob("*.py"), ROOT / "app.py"])
SOURCES = [p for p in SOURCES if "chakra_schema" not in p.parts]
FILES = ROOT / "podsim" / "files"

RAW = re.compile(r"\.write_text\(|\.write_bytes\(|\bopen\([^)\n]*[\"'][wax]b?\+?[\"']|os\.replace\(|os\.rename\(|"
                 r"shutil\.(?:move|copy\w*|rmtree)\(|\.mkdir\(|mkdtemp\(|mkstemp\(|\.write_table\(|\.to_parquet\(|"
                 r"\.write_html\(|\.savefig\(|\.to_csv\(|\.symlink_to\(|\.touch\(")
WRITERS = {"write_text_atomic", "write_bytes_atomic", "write_parquet", "write_new", "output_folder", "staged_folder",
           "claim_folder", "save_trace"}
NAMERS = {"inside", "safe_component", "plain_name", "safe_file_name"}  # podsim.files'
# podsim.files' checks of a whole output path (each returns the path it was given, or refuses it),
# and the CLI's wrappers of them
CHECKS = {"output_file", "output_dir", "check_store", "check_out", "_check_out"}


def _raw_writes() -> list[str]:
    bad = []
    for path in SOURCES:
        if path.is_relative_to(FILES):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if code.lstrip().startswith((">>>", "...")):
                continue  # a docstring's example is the reader's code (the front door's doctests)
            if RAW.search(code):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    return bad


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return None


def _safe_path(node: ast.AST, unsafe_names: set[str]) -> bool:
    """A path expression no user-given name reaches except through podsim.files."""
    if isinstance(node, ast.Name):
        return node.id not in unsafe_names
    if isinstance(node, (ast.Attribute, ast.Constant)):
        return True
    if isinstance(node, ast.BoolOp):  # `out or Path("out") / ...`
        return all(_safe_path(v, unsafe_names) for v in node.values)
    if isinstance(node, ast.IfExp):  # `default if out is None else out`
        return _safe_path(node.body, unsafe_names) and _safe_path(node.orelse, unsafe_names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        right = node.right
        named = isinstance(right, ast.Constant) and isinstance(right.value, str) or _call_name(right) in NAMERS
        return named and _safe_path(node.left, unsafe_names)
    if isinstance(node, ast.Call):
        name = _call_name(node)
        if name in NAMERS:
            return True
        if name in WRITERS or name in CHECKS:  # they return the path they were given (checked at that call)
            return True
        if name == "Path":  # Path(p) is p; Path(folder, name) joins like folder / name
            first, *rest = node.args or [ast.Constant(".")]
            return _safe_path(first, unsafe_names) and all(
                isinstance(a, ast.Constant) and isinstance(a.value, str) or _call_name(a) in NAMERS for a in rest)
        if name in ("resolve", "expanduser") and isinstance(node.func, ast.Attribute):
            return _safe_path(node.func.value, unsafe_names)
    return False


def _unsafe_joins() -> list[str]:
    bad = []
    for path in SOURCES:
        if path.is_relative_to(FILES):
            continue
        tree = ast.parse(path.read_text())
        for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            body = list(ast.walk(fn))
            unsafe = {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets
                      if isinstance(t, ast.Name) and not _safe_path(n.value, set())}
            for call in (n for n in body if isinstance(n, ast.Call) and _call_name(n) in WRITERS):
                args = [*call.args[:1], *(k.value for k in call.keywords if k.arg in ("path", "out"))]
                if _call_name(call) == "save_trace":
                    args = call.args[1:2]
                for arg in args:
                    if not _safe_path(arg, unsafe):
                        bad.append(f"{path.relative_to(ROOT)}:{call.lineno}: {ast.unparse(call)[:100]}")
    return bad


def test_only_files_py_writes_raw():
    assert _raw_writes() == []


def test_every_writer_path_is_whole_constant_or_made_by_files_py():
    assert sorted(set(_unsafe_joins())) == []


def test_the_checks_catch_what_they_are_for(tmp_path):
    """The two rules flag a raw write and a name joined outside podsim.files (so they can fail)."""
    assert RAW.search('Path(out, name).write_bytes(data)') and RAW.search('open(p, "wb")') and RAW.search("os.replace(a, b)")
    assert not RAW.search('open(p, "rb")') and not RAW.search("read_text()")
    ok = ast.parse('write_text_atomic(out / "report.html", t)\nwrite_text_atomic(inside(out, name), t)\n'
                   'write_text_atomic(path, t)\nwrite_new(inside(staging, n), t)').body
    bad = ast.parse('write_text_atomic(out / name, t)\nwrite_text_atomic(out / f"{name}.json", t)\n'
                    'write_bytes_atomic(Path(out, name), t)').body
    assert all(_safe_path(s.value.args[0], set()) for s in ok)
    assert not any(_safe_path(s.value.args[0], set()) for s in bad)
    tree = ast.parse("def f(out, name):\n    p = out / name\n    write_text_atomic(p, 'x')\n")
    fn = tree.body[0]
    unsafe = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets if not _safe_path(n.value, set())}
    assert unsafe == {"p"}
