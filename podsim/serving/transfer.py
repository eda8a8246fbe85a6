"""Moving a request's KV cache from a prefill replica to a decode replica, timed by the engine.

Every chip of the prefill slice holds its share of the request's K and V and sends it to the
chip in the same place of the decode slice, all at once: a collective permute, run as a step
study (`podsim.study.run_study`). Over the DCN the two slices are two slices of one job (the
scenario's DCN between them), the permute along the `dcn` axis; over ICI they are the two halves of one torus twice the size along an axis,
the permute a shift by half that axis. The engine's time is affine in the bytes for a fixed
path set, so two runs (1 MiB and 64 MiB per chip) give it at every size.
"""

from __future__ import annotations

from collections.abc import Sequence

from podsim.errors import PodsimError
from podsim.study import StepStudy, run_study
from podsim.topology import DcnSpec, get_generation
from podsim.topology.shapes import validate_shape
from podsim.trace.model import SLICE_AXES, AxisGroup, SendRecv, StepTrace

_SIZES = (2.0**20, 2.0**26)


class KvTransfer:
    """Seconds to move `bytes_per_chip` from a prefill slice to a decode slice."""

    def __init__(self, generation, shape: Sequence[int], over: str = "dcn", dcn: DcnSpec | None = None,
                 routing: str = "dimension_order"):
        self.generation = get_generation(generation)
        self.shape = tuple(int(s) for s in shape)
        self.over = over
        times = [self._engine_s(b, dcn, routing) for b in _SIZES]
        self.per_byte_s = (times[1] - times[0]) / (_SIZES[1] - _SIZES[0])
        self.fixed_s = max(times[0] - self.per_byte_s * _SIZES[0], 0.0)
        self.path = self._path

    def _engine_s(self, nbytes: float, dcn: DcnSpec | None, routing: str) -> float:
        if self.over == "dcn":
            trace = StepTrace((SendRecv("kv", nbytes, AxisGroup("dcn"), 1),), name="KV transfer over the DCN")
            study = StepStudy(self.generation, self.shape, trace=trace, slices=2, dcn=dcn or DcnSpec(), routing=routing,
                              name="kv-transfer")
            self._path = f"DCN between two {'x'.join(map(str, self.shape))} slices"
            return run_study(study).step_time_s
        if self.over != "ici":
            raise PodsimError(f"KV transfer over {self.over!r}: use dcn or ici")
        for i in range(len(self.shape)):
            doubled = tuple(s * (2 if j == i else 1) for j, s in enumerate(self.shape))
            try:
                validate_shape(self.generation, doubled)
            except PodsimError:
                continue
            axis = SLICE_AXES[i]
            trace = StepTrace((SendRecv("kv", nbytes, AxisGroup(axis), self.shape[i]),), name="KV transfer over ICI")
            self._path = f"ICI, halves of one {'x'.join(map(str, doubled))} torus"
            return run_study(StepStudy(self.generation, doubled, trace=trace, routing=routing, name="kv-transfer")).step_time_s
        raise PodsimError(f"KV transfer over ICI needs a {self.generation.id} slice twice {'x'.join(map(str, self.shape))} "
                          "along one axis (the prefill and decode slices as its halves); none is a valid slice; use dcn")

    def time_s(self, bytes_per_chip: float) -> float:
        return self.fixed_s + self.per_byte_s * bytes_per_chip if bytes_per_chip > 0 else 0.0
