"""Names: a name a user or a file gives for something inside an output folder, made safe to
join to that folder (never a path outside it, never hidden, never empty)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from podsim.errors import PodsimError

MAX_NAME_BYTES = 200  # a file name; most file systems stop at 255


def plain_name(name: str, what: str = "file name") -> str:
    """A name the user gives for a file inside an output folder (a prefix, a run or scenario
    file name), as is, if it is a plain name: no folder separator, no '..', not absolute, not
    hidden, no NUL, at most MAX_NAME_BYTES; else one line saying why. Every writer joins a
    user-given name to its folder through this (or `inside`)."""
    text = str(name)
    seps = [c for c in ("/", "\\", os.sep, os.altsep) if c]
    if not text.strip():
        raise PodsimError(f"{what} {name!r} is empty; give a plain file name")
    if any(c in text for c in seps) or Path(text).is_absolute():
        raise PodsimError(f"{what} {name!r} must be a plain name inside the output folder: no '/' or '\\', not an absolute path")
    if text in (".", "..") or text.startswith("."):
        raise PodsimError(f"{what} {name!r} must be a plain name inside the output folder: not '.', '..' or a hidden name")
    if "\x00" in text or any(ord(c) < 32 for c in text):
        raise PodsimError(f"{what} {name!r} holds a control character; give a plain file name")
    if len(text.encode()) > MAX_NAME_BYTES:
        raise PodsimError(f"{what} is {len(text.encode())} bytes long; a file name is at most {MAX_NAME_BYTES} bytes")
    return text


def inside(folder: str | Path, name: str, what: str = "file name") -> Path:
    """FOLDER/NAME for a user-given `name` (checked by plain_name): never outside FOLDER."""
    return Path(folder) / plain_name(name, what)


def safe_component(name: str, default: str = "run") -> str:
    """A name from a file (a scenario's, a sweep's) as one path component: separators, '..',
    and characters outside letters, digits, '.', '_', '-' become '_'; never empty or hidden."""
    parts = [p for p in re.split(r"[/\\]+", str(name)) if p not in ("", ".", "..")]
    text = re.sub(r"[^\w.-]+", "_", "_".join(parts)).lstrip(".")
    return text[:100] or default


def safe_file_name(name: str, default: str = "upload") -> str:
    """An uploaded file's name as a safe file name that keeps its suffix (the loaders read it):
    safe_component of the rest, at most 100 characters in all."""
    base = Path(str(name).replace("\\", "/")).name
    stem, dot, suffix = base.rpartition(".")
    if not dot or not re.fullmatch(r"[A-Za-z0-9]{1,10}", suffix) or not stem.strip("."):
        return safe_component(base, default)[:100]
    return f"{safe_component(stem, default)[:89]}.{suffix}"
