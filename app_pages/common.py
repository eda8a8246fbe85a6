"""What every dashboard page shares: inline errors, bounded uploads, number formats.

No model logic lives here or in the pages: they call podsim's library and draw its results.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from podsim.errors import InternalError, PodsimError
from podsim.files import inside, safe_file_name, write_bytes_atomic
from podsim.topology import Generation, get_generation
from podsim.topology.generations import generations
from podsim.units import format_duration, format_percent

MAX_UPLOAD_BYTES = 20 * 2**20
"""Uploaded files above this size are refused before they are parsed (the server's own limit,
`server.maxUploadSize`, is set to the same 20 MB by `podsim dashboard`)."""

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#EECA3B", "#72B7B2", "#FF9DA6", "#9D755D",
           "#BAB0AC", "#E45756", "#2E86AB", "#A23B72", "#3B8B5A", "#D1A11E", "#6C5B7B", "#C06C84")
"""Categorical colours (Vega's tableau-like set, extended) cycled over cubes and jobs."""


def tpu_generations() -> list[str]:
    """Generation ids with a torus (the switched GPU cluster has no cubes or ICI torus)."""
    return [g.id for g in generations().values() if g.slice_rule != "gpu_nodes"]


def pick_generation(where=st) -> tuple[str, Generation]:
    """The generation selectbox every page starts with (key `gen`, tpu-v4 by default)."""
    gens = tpu_generations()
    gen_id = where.selectbox("Generation", gens, index=gens.index("tpu-v4"), key="gen")
    return gen_id, get_generation(gen_id)


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


@contextmanager
def inline_errors() -> Iterator[None]:
    """Show bad input (a PodsimError) as one red line and stop the page: never a traceback. A
    failed check of podsim's own output (InternalError) is a bug: said so, with its details."""
    try:
        yield
    except PodsimError as exc:
        st.error(str(exc), icon=":material/error:")
        st.stop()
    except InternalError as exc:
        st.error(f"internal error, please report: {exc}", icon=":material/bug_report:")
        st.exception(exc)
        st.stop()


def upload_bytes(upload) -> bytes:
    """The bytes of one `st.file_uploader` file, refused above MAX_UPLOAD_BYTES."""
    size = getattr(upload, "size", None)
    data = upload.getvalue()
    size = len(data) if size is None else size
    if size > MAX_UPLOAD_BYTES:
        raise PodsimError(f"{upload.name}: {size / 2**20:.1f} MB is above the {MAX_UPLOAD_BYTES // 2**20} MB upload limit")
    return data


@contextmanager
def saved_files(files: Sequence[tuple[str, bytes]]) -> Iterator[list[Path]]:
    """Write (name, bytes) pairs into a fresh temporary folder for the library's file loaders;
    the folder is removed afterwards, and errors name the files as uploaded, not their copies."""
    with tempfile.TemporaryDirectory(prefix="podsim-upload-") as tmp:
        paths = []
        for name, data in files:
            paths.append(write_bytes_atomic(inside(tmp, safe_file_name(name), "upload name"), data))
        try:
            yield paths
        except PodsimError as exc:
            raise PodsimError(str(exc).replace(tmp + "/", "")) from None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


# The pages' number formats are the library's ('n/a' for a missing figure).
seconds = format_duration
percent = format_percent


def step_time_cell(row: dict) -> str:
    """A stored run's step time with its error band (podsim.validation.bands): '8.1 s ±7%', or that
    the validation corpus has no run of its kind."""
    step, err = row.get("step_time_s"), row.get("step_time_error")
    if row.get("kind") != "step" or step is None or err is None:  # a job stream, or a run stored before bands
        return seconds(step)
    return seconds(step) + (" (error unknown: no validation runs of this kind)" if math.isnan(err) else f" ±{err:.0%}")
