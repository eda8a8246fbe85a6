"""Per-op compute performance: how long a matmul, a convolution or a memory-bound op takes on
one chip of a generation (systolic-tile padding, precision, HBM bandwidth)."""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.perf.chips import CHIPS, ChipCompute, chip_compute
    from podsim.perf.opmodel import (
        Matmul,
        backward_matmuls,
        compute_time_s,
        compute_timing,
        matmul_time_s,
        memory_time_s,
        op_time_s,
        op_timer,
        padded_flops,
    )

__all__ = [
    "CHIPS", "ChipCompute", "Matmul", "backward_matmuls", "chip_compute", "compute_time_s", "compute_timing",
    "matmul_time_s", "memory_time_s", "op_time_s", "op_timer", "padded_flops",
]

lazy_face(__name__)
