"""Slice-size mixes. The default is the TPU v4 paper's slice popularity table."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.generations import Generation
from podsim.topology.shapes import parse_shape, split_slice_name, validate_shape

# [ISCA23] Table 2, one day in Nov 2022, slices >= 0.1% (hardware.md slc.4-slc.7).
# "_T" = twisted torus, "_NT" = the same shape untwisted.
V4_SLICE_POPULARITY: dict[str, float] = {
    "1x1x1": 2.1, "1x1x2": 0.4, "1x2x2": 6.7, "2x2x2": 4.7, "2x2x4": 6.4, "2x4x4": 8.9,
    "4x4x4": 13.9, "4x4x8_T": 16.0, "4x4x8_NT": 1.5, "4x4x12": 0.7, "4x8x8_T": 9.2, "4x8x8_NT": 1.5,
    "4x4x16": 1.0, "4x8x12": 0.1,
    "8x8x8": 9.6, "4x8x16": 1.7, "4x4x32": 0.6, "8x8x12": 0.7, "8x8x16_T": 1.8, "8x8x16_NT": 1.4,
    "4x16x16": 0.3, "4x4x64": 0.1, "4x8x32": 0.1, "8x12x16": 0.1, "4x4x96": 0.1, "8x8x24": 0.1,
    "8x16x16_T": 1.4, "8x16x16_NT": 0.3, "12x16x16": 5.7, "4x4x192": 0.4,
}
V4_SLICE_POPULARITY_SOURCE = "[ISCA23] Table 2 (hardware.md slc.4-slc.7)"


@dataclass(frozen=True)
class SliceMix:
    """Shapes (with twist) and their probabilities, validated against one generation."""

    shapes: tuple[tuple[int, ...], ...]
    twisted: tuple[bool, ...]
    weights: np.ndarray

    @classmethod
    def from_table(cls, gen: Generation, table: dict[str, float]) -> SliceMix:
        """Table of 'AxBxC[_T|_NT]' -> weight. Shapes invalid for `gen` are an error; whether a
        shape fits a particular fleet (e.g. one without OCS) is the scheduler's question."""
        shapes, twisted, weights = [], [], []
        for name, w in table.items():
            if w < 0:
                raise PodsimError(f"slice mix: weight of {name!r} is negative ({w})")
            try:
                base, tag = split_slice_name(name)
            except PodsimError as exc:
                raise PodsimError(f"slice mix: {exc}") from None
            tw = bool(tag)
            spec = validate_shape(gen, parse_shape(base), tw)
            shapes.append(spec.shape)
            twisted.append(tw)
            weights.append(float(w))
        total = sum(weights)
        if total <= 0:
            raise PodsimError("slice mix: the weights sum to zero")
        return cls(tuple(shapes), tuple(twisted), np.array(weights) / total)

    def sample(self, rng: np.random.Generator, n: int) -> list[tuple[tuple[int, ...], bool]]:
        idx = rng.choice(len(self.shapes), size=n, p=self.weights)
        return [(self.shapes[i], self.twisted[i]) for i in idx]
