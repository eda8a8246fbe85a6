"""The step study: one training step on placed slices as one request (`StepStudy`), the one way
to simulate it (`run_study`), and the step-time models keyed by it (`StepTimeModel`: the engine's
`EngineStepTime`, the compute-only `RooflineStepTime`; `CachedStepTime` for the cluster).

Typical use::

    from podsim.study import StepStudy, run_study
    r = run_study(StepStudy("tpu-v4", "4x4x8", model="llama2-70b", plan="fsdp=32,tensor=4"))
    r.step_time_s, r.exposed_comm_s
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.study.steptime import (
        CachedStepTime,
        EngineStepTime,
        RooflineStepTime,
        StepTimeModel,
    )
    from podsim.study.study import StepStudy, run_study

__all__ = ["CachedStepTime", "EngineStepTime", "RooflineStepTime", "StepStudy", "StepTimeModel", "run_study"]

lazy_face(__name__)
