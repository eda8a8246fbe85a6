"""Per-op compute performance: how long a matmul, a convolution or a memory-bound op takes on
one chip of a generation (systolic-tile padding, precision, HBM bandwidth)."""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.perf.chips import chip_compute
    from podsim.perf.opmodel import compute_time_s

__all__ = ["chip_compute", "compute_time_s"]

lazy_face(__name__)
