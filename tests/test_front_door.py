"""The front door (issue 24 item 5): `import podsim` offers the dozen entry points a user needs,
each with a numpydoc docstring (Parameters, Returns, Examples) whose examples run here as
doctests; `import podsim` itself stays cheap (each name loads its package on first use)."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

import podsim


def test_the_front_door_is_small_and_every_name_resolves():
    assert 10 <= len(podsim.__all__) <= 14 and sorted(podsim.__all__) == list(podsim.__all__)
    for name in podsim.__all__:
        assert getattr(podsim, name) is not None
    assert set(podsim.__all__) <= set(dir(podsim))
    with pytest.raises(AttributeError, match="no_such_thing"):
        podsim.no_such_thing  # noqa: B018


@pytest.mark.parametrize("name", podsim.__all__)
def test_each_entry_point_is_documented_with_a_working_example(name):
    obj = getattr(podsim, name)
    doc = obj.__doc__ or ""
    for section in ("Parameters", "Returns", "Examples"):
        if section == "Returns" and isinstance(obj, type):
            continue  # a class documents its fields; constructing it returns it
        assert f"{section}\n" in doc and "-" * len(section) in doc, f"{name}: no numpydoc {section} section"
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={"podsim": podsim})
    assert tests and sum(len(t.examples) for t in tests) >= 2, f"{name}: no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    assert runner.failures == 0, f"{name}: {runner.failures} example(s) failed"


def test_import_podsim_loads_no_package():
    code = "import sys, podsim; print(sorted(m for m in sys.modules if m.startswith('podsim.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
