"""Pod topology: generations as data, pod layout, OCS circuits, slices, routes and figures.

Typical use::

    from podsim.topology import build_slice, topology_summary
    built = build_slice("tpu-v4", "4x4x8", twisted=True)   # fabric + slice + local view
    topology_summary("tpu-v4")["bisection_bytes_per_s"]     # 2.3e13
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.topology.dcn import DcnSpec
    from podsim.topology.generations import Generation, get_generation
    from podsim.topology.pod import PodLayout
    from podsim.topology.shapes import format_shape, parse_shape
    from podsim.topology.summary import build_slice, topology_summary

# The public API; a fabric's node kinds, torus routes, cube circuits and per-slice figures
# (slice_figures) are internals of their modules.
__all__ = ["DcnSpec", "Generation", "PodLayout", "build_slice", "format_shape", "get_generation", "parse_shape", "topology_summary"]

lazy_face(__name__)
