"""Pod topology: generations as data, pod layout, OCS circuits, slices, routes and figures.

Typical use::

    from podsim.topology import build_slice, topology_summary
    built = build_slice("tpu-v4", "4x4x8", twisted=True)   # fabric + slice + local view
    topology_summary("tpu-v4")["bisection_bytes_per_s"]     # 2.3e13
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.topology.cables import chip_cubes, circuit_rows, slice_cables
    from podsim.topology.fabric import Circuit, DcnSpec, Fabric, LinkKind, build_fabric, dcn_choice
    from podsim.topology.generations import (
        Figure,
        Generation,
        custom_generation,
        generations,
        get_generation,
        sources,
    )
    from podsim.topology.pod import PodLayout
    from podsim.topology.routing import dcn_routes, slice_routes
    from podsim.topology.shapes import (
        SliceSpec,
        format_shape,
        is_twistable,
        parse_shape,
        slice_name,
        validate_shape,
    )
    from podsim.topology.slices import (
        Slice,
        SliceView,
        check_slice_topology,
        plan_slice,
        slice_view,
    )
    from podsim.topology.summary import (
        Built,
        build_slice,
        fleet_rows,
        fleet_summary,
        pod_spec,
        summary_rows,
        topology_detail,
        topology_summary,
    )

# The public API; a fabric's node kinds, torus routes, cube circuits and per-slice figures
# (slice_figures) are internals of their modules.
__all__ = [
    "Built", "Circuit", "DcnSpec", "dcn_choice", "Fabric", "Figure", "Generation", "LinkKind", "PodLayout",
    "Slice", "chip_cubes", "circuit_rows", "slice_cables", "SliceSpec", "SliceView", "build_fabric", "build_slice", "check_slice_topology",
    "custom_generation",
    "dcn_routes", "format_shape", "generations", "get_generation", "is_twistable",
    "parse_shape", "plan_slice", "pod_spec", "slice_name", "slice_routes", "slice_view", "sources", "summary_rows",
    "fleet_rows", "fleet_summary", "topology_detail", "topology_summary", "validate_shape",
]

lazy_face(__name__)
