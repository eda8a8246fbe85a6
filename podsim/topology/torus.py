"""Generic torus pods: a research generation whose geometry the user gives, as RFold's simulator
takes `--dim 16,16,16 --rsize 4` (arXiv 2510.03891): pod dimensions, the reconfigurable block
(a cube of side `block`, joined to other blocks by OCS, one OCS unit per (dimension, face link)
as on TPU v4, [ISCA23] §2.2), ICI ports per chip and the link speed.

Any torus shape that fits the pod is a valid request (slice rule `torus`): a side that is a
multiple of the block wraps (a ring closed through OCS circuits), a shorter side is a mesh line
inside one block. A shape with a side longer than a block but not a multiple of it has no native
placement: with `fold: allowed` placement splits it into whole blocks plus face, edge and corner
pieces (podsim.placement.reshape). The chip, host and DCN figures are the base generation's
(TPU v4 unless `base` says otherwise), each marked as borrowed.

The generation's id names every figure the user gave, so a process that only has the id (a
sweep worker, a stored run) rebuilds the same generation: `torus-16x16x16-b4-p6-400gbps`.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from podsim.errors import PodsimError, first_error

TORUS_ID = re.compile(r"torus-(?P<dims>[0-9]+(?:x[0-9]+)*)-b(?P<block>[0-9]+)-p(?P<ports>[0-9]+)-(?P<gbps>[0-9]+(?:\.[0-9]+)?)gbps"
                      r"(?:-(?P<base>[a-z0-9.-]+))?")
DEFAULT_BASE = "tpu-v4"
MAX_TORUS_CHIPS = 65536


class TorusSpec(BaseModel):
    """The geometry of a generic torus pod (every field the user's)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    dims: tuple[int, int, int] = Field(..., description="chips per pod axis, e.g. 16x16x16 (each a multiple of block)")
    block: int = Field(..., ge=1, le=64, description="side of the reconfigurable block (a cube of block^3 chips joined by OCS)")
    ports_per_chip: int = Field(6, ge=2, description="ICI ports per chip: 2 per dimension, or a multiple (parallel links)")
    link_gbps: float = Field(..., gt=0, le=1e6, description="ICI link speed per direction, Gb/s")
    base: str = Field(DEFAULT_BASE, description="generation whose chip, host and DCN figures the pod borrows")

    @field_validator("dims", mode="before")
    @classmethod
    def _dims(cls, v):
        if isinstance(v, str):
            if not re.fullmatch(r"[0-9]+x[0-9]+x[0-9]+", v.strip()):
                raise PodsimError(f"torus dims {v!r}: give three sides, e.g. 16x16x16")
            return tuple(int(x) for x in v.strip().split("x"))
        return v

    @model_validator(mode="after")
    def _consistent(self) -> TorusSpec:
        name = "x".join(map(str, self.dims))
        if min(self.dims) < 1 or any(d % self.block for d in self.dims):
            raise PodsimError(f"torus dims {name}: each side must be a positive multiple of the block side {self.block}")
        if math.prod(self.dims) > MAX_TORUS_CHIPS:
            raise PodsimError(f"torus dims {name}: {math.prod(self.dims):,} chips; a generic pod has at most {MAX_TORUS_CHIPS:,}")
        if self.ports_per_chip % 6:
            raise PodsimError(f"torus ports_per_chip {self.ports_per_chip}: a 3-D torus chip has 2 ports per dimension "
                              "(6), or a multiple of 6 (parallel links to each neighbour)")
        if self.base.startswith("torus-"):
            raise PodsimError("torus base: give a published generation (e.g. tpu-v4) whose chip figures to borrow")
        return self

    @property
    def id(self) -> str:
        base = "" if self.base == DEFAULT_BASE else f"-{self.base}"
        return f"torus-{'x'.join(map(str, self.dims))}-b{self.block}-p{self.ports_per_chip}-{self.link_gbps:g}gbps{base}"


def parse_torus_id(gen_id: str) -> TorusSpec | None:
    """The spec a `torus-...` id names, or None for any other id."""
    m = TORUS_ID.fullmatch(gen_id)
    if m is None:
        return None
    return make_torus_spec(dims=m["dims"], block=int(m["block"]), ports_per_chip=int(m["ports"]),
                           link_gbps=float(m["gbps"]), base=m["base"] or DEFAULT_BASE)


def make_torus_spec(**fields) -> TorusSpec:
    """TorusSpec with pydantic's first error as one line naming the field."""
    try:
        return TorusSpec(**fields)
    except ValidationError as exc:
        where, msg = first_error(exc, "torus")
        raise PodsimError(msg if not exc.errors()[0]["loc"] else f"torus {where}: {msg}") from None


def torus_body(spec: TorusSpec, base) -> dict:
    """The generation's fields (pydantic input) for `spec`, chip and host figures from `base`."""
    b = spec.block
    note = f"research generation: {base.id}'s figure"
    given = "given by the user (generic torus pod)"
    host = (2, 2, 1) if b % 2 == 0 else (1, 1, 1)
    cubes = math.prod(d // b for d in spec.dims)
    body = base.model_dump()
    ocs_base = (base.ocs.model_dump() if base.ocs else None) or {}

    def fig(value, unit, source="assumption", text=given):
        return {"value": float(value), "unit": unit, "source": source, "note": text, "alt": None, "era": None}

    def borrowed(name):
        f = dict(body[name])
        f["note"] = f"{note} ({f.get('note') or f['source']})"
        return f

    per_link = spec.ports_per_chip // 6
    out = {
        "id": spec.id,
        "name": f"generic torus {'x'.join(map(str, spec.dims))}, {b}^3 blocks, {spec.link_gbps:g} Gb/s links",
        "vendor": "research", "year": base.year, "dims": 3, "pod_shape": spec.dims, "host_shape": host,
        "cube_shape": (b, b, b), "wraparound": "whole_cubes", "twistable": False, "slice_rule": "torus",
        "slice_shapes": (), "nondecreasing_shapes": False,
        "max_slice_cubes": fig(cubes, "cubes"),
        "pod_shape_note": "generic torus pod (RFold's --dim / --rsize)", "pod_shape_source": "assumption",
        "ocs": {
            "count": fig(3 * b * b, "ocs", text="one OCS unit per (dimension, face link), as TPU v4 (ocs.7)"),
            "ports": fig(2 * cubes, "ports", text="a '+' and a '-' port per block, no spares"),
            "ports_used": fig(2 * cubes, "ports", text="a '+' and a '-' port per block"),
            "links_per_face": fig(b * b, "links", text="one optical link per chip of a block face"),
            "switch_time": ocs_base.get("switch_time") or fig(0.01, "s", text="MEMS class (ocs.3)"),
            "reconfigure_time": ocs_base.get("reconfigure_time") or fig(10, "s", text="as TPU v4 (ocs.17)"),
        },
        "chips_per_host": fig(math.prod(host), "chips", text="2x2 chips per host (TPU v4's tray), 1 for odd blocks"),
        "ici_links_per_chip": fig(spec.ports_per_chip, "links"),
        "ici_link_bandwidth": fig(spec.link_gbps / 8 * per_link, "GB/s",
                                  text=f"{spec.link_gbps:g} Gb/s per port per direction" +
                                       (f", {per_link} parallel ports per neighbour" if per_link > 1 else "")),
    }
    for name in ("peak_bf16_tflops_per_chip", "hbm_per_chip", "hbm_bandwidth_per_chip", "ici_hop_latency",
                 "pcie_bandwidth_per_chip", "dcn_bandwidth_per_host", "nics_per_host", "power_per_chip",
                 "price_per_chip_hour"):
        out[name] = borrowed(name)
    return out


def torus_id(dims: str | tuple[int, int, int], block: int, ports_per_chip: int, link_gbps: float,
             base: str = DEFAULT_BASE) -> str:
    """The id of a generic torus pod (validated): `get_generation` builds it from the id."""
    return make_torus_spec(dims=dims, block=block, ports_per_chip=ports_per_chip, link_gbps=link_gbps, base=base).id


def torus_error(gen_id: str) -> PodsimError | None:
    """A one-line error for an id that looks like a torus id but is malformed (None otherwise)."""
    if gen_id.startswith("torus") and TORUS_ID.fullmatch(gen_id) is None:
        return PodsimError(f"generation {gen_id!r}: a generic torus is torus-<dims>-b<block>-p<ports>-<Gb/s>gbps, "
                           "e.g. torus-16x16x16-b4-p6-400gbps")
    return None
