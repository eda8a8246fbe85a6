"""Package faces (issue 24 item 5): each face's __all__ names only what exists, and the faces
together stay small (their public API; everything else is imported from its module)."""

import importlib
import pkgutil

import pytest

import podsim

FACES = sorted(m.name for m in pkgutil.iter_modules(podsim.__path__) if m.ispkg)
MAX_FACE_NAMES = 80  # issue 24: fewer than 80 names across the package faces (220 before it)


@pytest.mark.parametrize("name", FACES)
def test_all_names_exist(name):
    mod = importlib.import_module(f"podsim.{name}")
    assert [n for n in getattr(mod, "__all__", ()) if not hasattr(mod, n)] == []


def test_faces_stay_small():
    names = {f: list(getattr(importlib.import_module(f"podsim.{f}"), "__all__", ())) for f in FACES}
    total = sum(map(len, names.values()))
    assert total < MAX_FACE_NAMES, f"{total} names across the faces: {names}"
    assert len(podsim.__all__) <= 14  # the front door
