"""Hardware generations as validated data: every figure has a value, a unit and a source.

The data file is `podsim/data/generations.yaml`; it is loaded and validated once, at import.
"""

from __future__ import annotations

import math
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from podsim.errors import PodsimError
from podsim.units import UNIT_SCALE, to_si


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AltFigure(_Frozen):
    """A conflicting published figure, recorded beside the one chosen."""

    value: float
    unit: str
    source: str
    note: str = ""


class Figure(_Frozen):
    """A published (or explicitly assumed) figure with its unit and source id."""

    value: float | None
    unit: str
    source: str
    note: str = ""
    alt: AltFigure | None = None
    era: int | None = None

    @field_validator("unit")
    @classmethod
    def _known_unit(cls, unit: str) -> str:
        if unit not in UNIT_SCALE:
            raise ValueError(f"unknown unit {unit!r}")
        return unit

    @property
    def si(self) -> float | None:
        """Value in podsim's base unit, or None where no figure is published."""
        return None if self.value is None else to_si(self.value, self.unit)

    def require(self, what: str) -> float:
        """The SI value; a clear error where the figure is not published."""
        if self.value is None:
            raise PodsimError(f"{what} is not published ({self.note or self.source}); give it in the scenario")
        return to_si(self.value, self.unit)


class OcsSpec(_Frozen):
    """Optical circuit switches of a pod: one OCS per (dimension, face-link index)."""

    count: Figure
    ports: Figure
    ports_used: Figure
    links_per_face: Figure
    switch_time: Figure
    reconfigure_time: Figure


Wraparound = Literal["whole_cubes", "full_axis", "switched"]
SliceRule = Literal["cubes", "listed", "pow2_rectangle", "gpu_nodes", "torus"]


class Generation(_Frozen):
    """One hardware generation (chip, host, pod, network) as published."""

    id: str
    name: str
    vendor: str
    year: int
    chip: str = ""  # the generation whose chip (and hosts) this network joins (a multipod of v3 pods: tpu-v3); "": its own
    dims: Literal[1, 2, 3]
    pod_shape: tuple[int, ...]
    host_shape: tuple[int, ...]
    cube_shape: tuple[int, ...] | None
    wraparound: Wraparound
    ocs: OcsSpec | None
    twistable: bool
    slice_rule: SliceRule
    slice_shapes: tuple[str, ...] = ()
    nondecreasing_shapes: bool = False
    max_slice_cubes: Figure | None = None
    pod_shape_note: str = ""
    pod_shape_source: str = ""
    peak_bf16_tflops_per_chip: Figure
    hbm_per_chip: Figure
    hbm_bandwidth_per_chip: Figure
    chips_per_host: Figure
    ici_links_per_chip: Figure
    ici_link_bandwidth: Figure
    ici_hop_latency: Figure
    pcie_bandwidth_per_chip: Figure
    # The collective library's own time per collective beyond the fabric's per-hop latency (launch,
    # synchronisation, protocol: NCCL's on GPUs), added once to every collective; none: 0
    collective_latency: Figure | None = None
    dcn_bandwidth_per_host: Figure
    nics_per_host: Figure
    power_per_chip: Figure
    price_per_chip_hour: Figure
    # A network whose dimensions differ (an ASTRA-sim config with a bandwidth and latency per
    # dimension): per axis, bytes/s per link per direction and s per hop; empty: every axis has
    # ici_link_bandwidth and ici_hop_latency.
    ici_axis_bandwidth: tuple[float, ...] = ()
    ici_axis_latency: tuple[float, ...] = ()
    # A static pod whose wiring leaves an axis open (no wraparound cable: a mesh line), per axis;
    # empty: every axis of a static pod wraps (a full torus over the pod).
    axis_wraps: tuple[bool, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Generation:
        if len(self.pod_shape) != self.dims or len(self.host_shape) != self.dims:
            raise ValueError(f"{self.id}: pod_shape and host_shape need {self.dims} entries")
        if math.prod(self.host_shape) != self.chips_per_host.value:
            raise ValueError(f"{self.id}: host_shape {self.host_shape} does not hold chips_per_host chips")
        if self.cube_shape is not None:
            if len(self.cube_shape) != self.dims:
                raise ValueError(f"{self.id}: cube_shape needs {self.dims} entries")
            for p, c, h in zip(self.pod_shape, self.cube_shape, self.host_shape, strict=True):
                if p % c or c % h:
                    raise ValueError(f"{self.id}: pod {self.pod_shape} is not tiled by cubes {self.cube_shape} of hosts {self.host_shape}")
        if (self.wraparound == "whole_cubes") != (self.cube_shape is not None):
            raise ValueError(f"{self.id}: whole_cubes wraparound needs a cube_shape")
        for p, h in zip(self.pod_shape, self.host_shape, strict=True):
            if p % h:
                raise ValueError(f"{self.id}: pod {self.pod_shape} is not tiled by hosts {self.host_shape}")
        if self.axis_wraps and (len(self.axis_wraps) != self.dims or self.wraparound != "full_axis"):
            raise ValueError(f"{self.id}: axis_wraps needs {self.dims} entries and a static (full_axis) pod")
        for name in ("ici_axis_bandwidth", "ici_axis_latency"):
            v = getattr(self, name)
            if v and (len(v) != self.dims or not all(math.isfinite(x) and x >= 0 for x in v)):
                raise ValueError(f"{self.id}: {name} needs {self.dims} finite values >= 0, got {list(v)}")
        return self

    # Convenience accessors in base units -------------------------------------------------
    @property
    def chip_id(self) -> str:
        """The id under which its chip's compute figures are kept (podsim.perf.chips)."""
        return self.chip or self.id

    @property
    def pod_chips(self) -> int:
        return math.prod(self.pod_shape)

    def axis_wraps_at(self, d: int) -> bool:
        """Whether the pod's wiring closes axis `d` into a ring (a static pod's full-length axis)."""
        return self.axis_wraps[d] if self.axis_wraps else True

    @property
    def has_ocs(self) -> bool:
        return self.ocs is not None

    @property
    def chips_per_cube(self) -> int:
        return math.prod(self.cube_shape) if self.cube_shape else 0

    @property
    def cube_grid(self) -> tuple[int, ...]:
        """Cubes per axis in the pod's home arrangement."""
        assert self.cube_shape is not None
        return tuple(p // c for p, c in zip(self.pod_shape, self.cube_shape, strict=True))

    @property
    def link_bytes_per_s(self) -> float:
        """ICI bandwidth per link per direction."""
        return self.ici_link_bandwidth.require(f"{self.id} ICI link bandwidth")

    @property
    def peak_flops_per_s(self) -> float:
        return self.peak_bf16_tflops_per_chip.require(f"{self.id} peak bf16 FLOP/s")

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_bandwidth_per_chip.require(f"{self.id} HBM bandwidth")

    @property
    def hop_latency_s(self) -> float:
        return self.ici_hop_latency.require(f"{self.id} ICI hop latency")

    @property
    def collective_latency_s(self) -> float:
        """Seconds every collective takes beyond its route latencies and bytes (0 when not given)."""
        f = self.collective_latency
        return 0.0 if f is None or f.value is None else f.si

    def figures(self) -> dict[str, Figure]:
        """Every published figure of this generation by field name (OCS figures prefixed)."""
        out = {k: v for k, v in self if isinstance(v, Figure)}
        if self.ocs:
            out.update({f"ocs.{k}": v for k, v in self.ocs if isinstance(v, Figure)})
        return out


class GenerationFile(_Frozen):
    sources: dict[str, str]
    generations: dict[str, dict]


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it: ~10x faster


def _load_file() -> tuple[dict[str, Generation], dict[str, str]]:
    text = resources.files("podsim").joinpath("data/generations.yaml").read_text()
    raw = GenerationFile.model_validate(yaml.load(text, Loader=_YAML_LOADER))
    gens = {gid: Generation.model_validate({"id": gid, **body}) for gid, body in raw.generations.items()}
    return gens, raw.sources


@cache
def _registry() -> tuple[dict[str, Generation], dict[str, str]]:
    return _load_file()


def generations() -> dict[str, Generation]:
    """All generations by id (`tpu-v4`, ...)."""
    return _registry()[0]


def sources() -> dict[str, str]:
    """Source keys used by the data file that are not row ids of the reference sheet."""
    return _registry()[1]


def get_generation(gen_id: str | Generation) -> Generation:
    """The chip generation with this id: its published figures, each with its source.

    Parameters
    ----------
    gen_id : str or Generation
        A generation id (`podsim topology --list`: tpu-v2 ... tpu-v7, gpu-h100) or a generic
        torus id; a Generation passes through unchanged.

    Returns
    -------
    Generation
        Pod shape, cube shape, ICI and DCN bandwidths, peak FLOP/s, HBM, price and power.

    Raises
    ------
    PodsimError
        An unknown id, in one line listing the known ones.

    Examples
    --------
    >>> from podsim import get_generation
    >>> v4 = get_generation("tpu-v4")
    >>> v4.name, v4.pod_shape, v4.pod_chips
    ('Cloud TPU v4', (16, 16, 16), 4096)
    """
    if isinstance(gen_id, Generation):
        return gen_id
    gens = generations()
    if gen_id not in gens:
        if isinstance(gen_id, str) and gen_id.startswith("torus"):
            return _torus(gen_id)
        raise PodsimError(f"unknown generation {gen_id!r}; known: {', '.join(gens)}, or a generic torus "
                          "torus-<dims>-b<block>-p<ports>-<Gb/s>gbps (e.g. torus-16x16x16-b4-p6-400gbps)")
    return gens[gen_id]


@cache
def _torus(gen_id: str) -> Generation:
    """The generic torus pod an id names (podsim.topology.torus), built once per process."""
    from podsim.topology.torus import parse_torus_id, torus_body, torus_error

    err = torus_error(gen_id)
    if err is not None:
        raise err
    spec = parse_torus_id(gen_id)
    return Generation.model_validate(torus_body(spec, get_generation(spec.base)))


def custom_generation(base: str | Generation, gen_id: str, note: str, **fields) -> Generation:
    """A generation derived from `base` with other fields (shapes, or figures given as plain
    numbers in the base's units), re-validated; every replaced figure is marked as such."""
    gen = get_generation(base)
    body = gen.model_dump()
    for name, value in fields.items():
        if name not in body:
            raise PodsimError(f"cannot set {name!r}; generation fields are {', '.join(body)}")
        if isinstance(getattr(gen, name), Figure) and not isinstance(value, dict):
            value = {**body[name], "value": float(value), "source": "override", "note": note, "alt": None}
        body[name] = value
    body.update(id=gen_id, name=f"{gen.name} ({note})")
    return Generation.model_validate(body)


generations()  # validate the data file at import: a broken file fails loudly here
