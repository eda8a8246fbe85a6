"""A data-centre network built in tiers, as data centres are: host NIC -> top-of-rack switch
(ToR) -> aggregation block -> spine block, the building blocks of Google's Jupiter Clos
([JUPITER15]); Jupiter's direct-connect fabric (jup.5) keeps the ToRs and blocks and joins the
blocks by OCS circuits instead of spine blocks.

Each tier is given as its radix (ports of one ToR, of one aggregation block, of one spine
block), its port speed and its oversubscription (down : up bandwidth); the spine tier also
says how many spine blocks there are. `tier_plan` derives the rest for a generation's hosts:
hosts per ToR (a port of G Gb/s carries G / g NICs of g Gb/s: breakout), ToRs per block (by
bandwidth), each ToR's and block's uplink bandwidth, and how many blocks the spine can reach
(its radix). Nothing is fitted: a job that spans more of the network crosses more of these
uplinks, and what it gets is what the max-min flow network gives it on them.

Presets, each figure with its source in shared/reference/hardware.md, live in
`podsim/data/dcn_tiers.yaml`; a user gives their own as a preset name, an inline spec
(`tor=40x200/33:7,aggregation=800x200,spine=800x200*20`) or a YAML file (`parse_tiers`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from podsim.errors import PodsimError, first_error
from podsim.quantities import OVERSUBSCRIPTION

TIER_NAMES = ("tor", "aggregation", "spine")
BITS = 8.0


def _ratio(value: Any) -> float:
    """An oversubscription as a number >= 1, from 3, 4.71 or '33:7'."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"oversubscription {value!r} is not a number; give e.g. 3 or '33:7'")
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(?::\s*([0-9]*\.?[0-9]+))?\s*", value)
        if not m:
            raise ValueError(f"oversubscription {value!r}: give a number >= 1 (3) or down:up ports ('33:7')")
        if m[2] is not None and float(m[2]) <= 0:
            raise ValueError(f"oversubscription {value!r}: the up side must be > 0 (down:up ports, e.g. '33:7')")
        value = float(m[1]) / float(m[2] or 1)
    value = float(value)
    if not (math.isfinite(value) and value >= 1.0):
        raise ValueError(f"oversubscription {value:g} must be >= 1 (down : up bandwidth)")
    return OVERSUBSCRIPTION.check(value, "oversubscription")


class DcnTier(BaseModel):
    """One tier's switches: `radix` ports of `gbps` each, `oversubscription` down : up of them
    (the ToR and aggregation tiers); the spine tier also has `count` spine blocks."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    radix: int = Field(..., ge=2, le=1_000_000, description="ports of one switch (ToR), of one aggregation block, of one spine block")
    gbps: float = Field(..., gt=0, le=1e6, description="port speed, Gb/s")
    oversubscription: float = Field(1.0, description="down : up bandwidth of the tier's switches, e.g. 3 or '33:7'")
    count: int | None = Field(None, ge=1, le=1_000_000, description="spine tier only: how many spine blocks")
    source: str = Field("user", description="where the figures come from (hardware.md row ids, or 'user')")

    _check_ratio = field_validator("oversubscription", mode="before")(classmethod(lambda cls, v: _ratio(v)))

    def ports(self, name: str) -> tuple[int, int]:
        """(down, up) ports: radix split by the oversubscription; one-line error unless whole."""
        down = self.radix * self.oversubscription / (1.0 + self.oversubscription)
        if abs(down - round(down)) > 1e-6 or round(down) >= self.radix:
            raise PodsimError(f"dcn tier {name}: radix {self.radix} does not split {self.oversubscription:g}:1 into whole "
                              f"down and up ports (down {down:.2f}); give a radix that does, or the ratio as down:up ports")
        return int(round(down)), self.radix - int(round(down))


class DcnTiers(BaseModel):
    """The tiers of a DCN: `tor` and `aggregation` always; `spine` on an EPS Clos (none on an OCS
    DCN, where circuits join the blocks)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    tor: DcnTier
    aggregation: DcnTier
    spine: DcnTier | None = None
    name: str = Field("user", description="preset name, or 'user'")

    @model_validator(mode="after")
    def _tiers(self) -> DcnTiers:
        for name in ("tor", "aggregation"):
            if getattr(self, name).count is not None:
                raise ValueError(f"{name}.count: only the spine tier has a count (of spine blocks)")
        if self.spine is not None:
            if self.spine.count is None:
                raise ValueError("spine.count: give the number of spine blocks (each block's uplinks spread over them)")
            if self.spine.oversubscription != 1.0:
                raise ValueError("spine.oversubscription: the spine is the top tier, all its ports face the aggregation blocks; leave it out")
        return self

    def describe(self) -> str:
        """One line, e.g. 'tor 40x200G 4.71:1, aggregation 800x200G 1:1, spine 20 x 40x200G'."""
        t, a, s = self.tor, self.aggregation, self.spine
        out = f"tor {t.radix}x{t.gbps:g}G {t.oversubscription:.3g}:1, aggregation {a.radix}x{a.gbps:g}G {a.oversubscription:.3g}:1"
        return out + (f", spine {s.count} x {s.radix}x{s.gbps:g}G" if s is not None else ", OCS above the blocks")


@dataclass(frozen=True)
class TierPlan:
    """What the tiers give for one generation's hosts (bandwidths in bytes/s, one direction)."""

    hosts_per_tor: int
    tors_per_block: int
    tor_uplink_bytes_per_s: float  # one full ToR's uplinks to its block
    block_uplink_bytes_per_s: float  # one full block's uplinks (to the spine blocks, or OCS circuits)
    spines: int  # spine blocks (0 on an OCS DCN)
    max_blocks: int  # blocks the spine tier can reach with its radix (0: no limit, OCS)
    tor_oversubscription: float  # NIC bandwidth under a full ToR : its uplinks
    block_oversubscription: float  # ToR uplinks under a full block : its uplinks

    @property
    def hosts_per_block(self) -> int:
        return self.hosts_per_tor * self.tors_per_block


def tier_plan(tiers: DcnTiers, host_bytes_per_s: float, nics_per_host: int, kind: str = "eps") -> TierPlan:
    """Hosts per ToR, ToRs per block and the uplinks of each, for hosts of `nics_per_host` NICs
    sharing `host_bytes_per_s`; one-line errors when a tier cannot hold what is under it."""
    if kind == "ocs" and tiers.spine is not None:
        raise PodsimError("dcn tiers: an OCS DCN joins the aggregation blocks by circuits (jup.5); leave the spine tier out")
    if kind == "eps" and tiers.spine is None:
        raise PodsimError("dcn tiers: an EPS Clos needs a spine tier (spine=RADIXxGBPS*COUNT)")
    t, a = tiers.tor, tiers.aggregation
    t_down, t_up = t.ports("tor")
    a_down, a_up = a.ports("aggregation")
    nic_gbps = host_bytes_per_s * BITS / 1e9 / nics_per_host
    per_port = math.floor(t.gbps / nic_gbps + 1e-9)
    if per_port < 1:
        raise PodsimError(f"dcn tier tor: its {t.gbps:g} Gb/s ports are slower than the hosts' {nic_gbps:g} Gb/s NICs; give faster ToR ports")
    hosts_per_tor = t_down * per_port // nics_per_host
    if hosts_per_tor < 1:
        raise PodsimError(f"dcn tier tor: {t_down} down ports hold no host of {nics_per_host} NICs; give a larger radix")
    tor_up_gbps = t_up * t.gbps
    tors = math.floor(a_down * a.gbps / tor_up_gbps + 1e-9)
    if tors < 1:
        raise PodsimError(f"dcn tier aggregation: {a_down} down ports of {a.gbps:g} Gb/s cannot take one ToR's "
                          f"{tor_up_gbps:g} Gb/s of uplinks; give a larger radix")
    block_up_gbps = a_up * a.gbps
    spines = max_blocks = 0
    if tiers.spine is not None:
        s = tiers.spine
        spines = s.count
        max_blocks = math.floor(s.radix * s.gbps * spines / block_up_gbps + 1e-9)
        if max_blocks < 1:
            raise PodsimError(f"dcn tier spine: {spines} spine blocks of {s.radix} x {s.gbps:g} Gb/s cannot take one "
                              f"aggregation block's {block_up_gbps:g} Gb/s of uplinks; give more or larger spine blocks")
    host_gbps = host_bytes_per_s * BITS / 1e9
    return TierPlan(hosts_per_tor, tors, tor_up_gbps * 1e9 / BITS, block_up_gbps * 1e9 / BITS, spines, max_blocks,
                    hosts_per_tor * host_gbps / tor_up_gbps, tors * tor_up_gbps / block_up_gbps)


# ---------------------------------------------------------------------------------------------
# Presets and the user's own figures


_SPEC = re.compile(r"\s*(?P<tier>[a-z]+)\s*=\s*(?P<radix>\d+)\s*x\s*(?P<gbps>[0-9]*\.?[0-9]+)\s*(?:g|gb|gbps)?"
                   r"\s*(?:/\s*(?P<over>[0-9]*\.?[0-9]+(?::[0-9]*\.?[0-9]+)?))?\s*(?:\*\s*(?P<count>\d+))?\s*", re.I)
_ALIASES = {"tor": "tor", "leaf": "tor", "aggregation": "aggregation", "agg": "aggregation", "block": "aggregation",
            "spine": "spine"}
SPEC_EXAMPLE = "tor=40x200/33:7,aggregation=800x200,spine=800x200*20"
# no square brackets: --help draws option help as rich markup, where "[/OVERSUB]" is a closing tag
TIERS_HELP = (f"a preset (fat-tree-k64, fat-tree-k40-4.7to1), a spec TIER=RADIXxGBPS, optionally /OVERSUB and *COUNT, "
              f"for tor, aggregation and spine (e.g. {SPEC_EXAMPLE}), or a YAML file of the three")


@cache
def tier_presets() -> dict[str, DcnTiers]:
    """The presets of podsim/data/dcn_tiers.yaml by name (validated at first use)."""
    raw = yaml.safe_load(resources.files("podsim").joinpath("data/dcn_tiers.yaml").read_text())
    return {name: DcnTiers.model_validate({**body, "name": name}) for name, body in raw["presets"].items()}


def _model(data: Any, where: str) -> DcnTiers:
    try:
        return DcnTiers.model_validate(data)
    except ValidationError as exc:
        loc, msg = first_error(exc)
        raise PodsimError(f"{where}: {loc}: {msg}") from None


def parse_spec(text: str) -> DcnTiers:
    """Tiers from an inline spec: TIER=RADIXxGBPS[/OVERSUB][*COUNT], comma-separated, e.g.
    `tor=40x200/33:7,aggregation=800x200,spine=800x200*20` (oversubscription 1 when left out)."""
    tiers: dict[str, dict] = {}
    for part in text.split(","):
        m = _SPEC.fullmatch(part)
        name = _ALIASES.get((m["tier"] if m else "").lower())
        if not m or name is None:
            raise PodsimError(f"--dcn-tiers {text!r}: part {part.strip()!r} is not TIER=RADIXxGBPS[/OVERSUB][*COUNT] "
                              f"with TIER one of tor, aggregation, spine; e.g. {SPEC_EXAMPLE}")
        if name in tiers:
            raise PodsimError(f"--dcn-tiers {text!r}: tier {name} is given twice")
        tiers[name] = {"radix": int(m["radix"]), "gbps": float(m["gbps"])}
        if m["over"]:
            tiers[name]["oversubscription"] = m["over"]
        if m["count"]:
            tiers[name]["count"] = int(m["count"])
    return _model(tiers, f"--dcn-tiers {text!r}")


def parse_tiers(value: str | dict | DcnTiers) -> DcnTiers:
    """DCN tiers from a preset name, an inline spec, a YAML file of `tor`/`aggregation`/`spine`
    (path ending .yaml or .yml), or a mapping of the same; one-line errors otherwise."""
    if isinstance(value, DcnTiers):
        return value
    if isinstance(value, dict):
        return _model(value, "dcn tiers")
    text = str(value).strip()
    presets = tier_presets()
    if text in presets:
        return presets[text]
    if text.lower().endswith((".yaml", ".yml")):
        from podsim.files import read_yaml  # file reading at the edge

        data = read_yaml(Path(text), "DCN tiers file")
        if not isinstance(data, dict):
            raise PodsimError(f"{text}: a DCN tiers file is a mapping of tor, aggregation and spine")
        return _model(data, text)
    if "=" not in text:
        raise PodsimError(f"--dcn-tiers {text!r} is not a preset ({', '.join(presets)}), a .yaml file or a spec like {SPEC_EXAMPLE}")
    return parse_spec(text)
