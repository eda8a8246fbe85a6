"""Step time of a job's model on the slice it was given: the bridge from steps to run time.

A job may give its length in training steps of a model instead of in time; the cluster
simulation then needs the step time of that model on the slice actually placed (a rotated or
untwisted slice may be slower). Anything with `step_time_s(model, generation, shape, twisted)`
will do (`StepTimeModel`); `CachedStepTime` asks it once per (model, generation, shape, twist).

`RooflineStepTime` ships here: model FLOPs per step (what `podsim.trace.generate_trace` records
as `meta["model_flops_per_step"]`) / (chips x peak FLOP/s x efficiency). It sees compute only
- no collectives, no HBM limit - so with efficiency 1 it is a lower bound on the step time; the
default efficiency 0.6 is the v4 paper's average for LLM training (hardware.md perf.3). The
flow-level step-time engine (podsim.engine) plugs in through the same protocol.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

from podsim.errors import PodsimError
from podsim.topology import get_generation
from podsim.trace.configs import get_model
from podsim.trace.model import DEFAULT_COMPUTE_EFFICIENCY


@runtime_checkable
class StepTimeModel(Protocol):
    """Seconds per training step of `model` on a `shape` slice of `generation`."""

    def step_time_s(self, model: str, generation: str, shape: tuple[int, ...], twisted: bool) -> float: ...


class RooflineStepTime:
    """Compute-only step time: model FLOPs per step / (chips x peak bf16 FLOP/s x efficiency)."""

    def __init__(self, efficiency: float = DEFAULT_COMPUTE_EFFICIENCY):
        if not 0 < efficiency <= 1:
            raise PodsimError(f"roofline efficiency {efficiency} must be in (0, 1] (fraction of peak FLOP/s)")
        self.efficiency = efficiency

    def step_time_s(self, model: str, generation: str, shape: tuple[int, ...], twisted: bool) -> float:
        flops = get_model(model).training_flops_per_step()
        chips = math.prod(shape)
        return flops / (chips * get_generation(generation).peak_flops_per_s * self.efficiency)


class CachedStepTime:
    """Asks the wrapped model once per (model, generation, shape, twist); checks the answer."""

    def __init__(self, inner: StepTimeModel):
        if not isinstance(inner, StepTimeModel):
            raise PodsimError(f"{type(inner).__name__} has no step_time_s(model, generation, shape, twisted)")
        self.inner = inner
        self._cache: dict[tuple, float] = {}

    def step_time_s(self, model: str, generation: str, shape: tuple[int, ...], twisted: bool) -> float:
        key = (model, generation, tuple(shape), bool(twisted))
        t = self._cache.get(key)
        if t is None:
            t = float(self.inner.step_time_s(model, generation, tuple(shape), bool(twisted)))
            if not (math.isfinite(t) and t > 0):
                raise PodsimError(f"step time of {model} on {generation} {'x'.join(map(str, shape))} is {t}; it must be a positive number of seconds")
            self._cache[key] = t
        return t

    @property
    def calls(self) -> int:
        """How many distinct (model, generation, shape, twist) were asked (cache misses)."""
        return len(self._cache)
