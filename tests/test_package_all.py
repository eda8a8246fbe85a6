"""Every name a package exports in __all__ exists (so `from podsim.X import *` works)."""

import importlib

import pytest


@pytest.mark.parametrize("name", ["podsim.topology", "podsim.engine", "podsim.collectives"])
def test_all_names_exist(name):
    mod = importlib.import_module(name)
    assert [n for n in mod.__all__ if not hasattr(mod, n)] == []
