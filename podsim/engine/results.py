"""What a simulation returns: plain frozen records, and their JSON-ready dicts."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from podsim.topology.fabric import Fabric, LinkKind
from podsim.topology.slices import SliceView
from podsim.trace.model import StepTrace


@dataclass(frozen=True)
class OpTiming:
    """One op of one step on the timeline (times in seconds from the start of the run)."""

    step: int
    id: str
    kind: str  # compute, input (host input pipeline), send_recv or a collective kind
    start_s: float
    end_s: float
    name: str = ""
    layer: str = ""
    bytes: float = 0.0
    group: str = ""
    algorithm: str = ""
    closed_form_s: float | None = None
    level: str = ""  # ici, dcn or wan for communication, "" for compute
    tier: str = ""  # the highest DCN tier its flows climb to (leaf/tor, aggregation, spine/ocs, wan); "" off the DCN

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, eq=False)
class StepResult:
    """A job's step: time, where it went, which links were busy, what the engine spent.

    Times are per step (means over the job's `steps`); `link_bytes` is this job's bytes per
    fabric link per step; `link_peak_utilisation` the highest load / capacity each link saw
    (all jobs together) while the simulation ran. `levels[level]` (ici, dcn, wan): `busy_s`, the
    time ops of that level are in flight, and `exposed_s`, the part of it no compute overlaps
    (levels may overlap each other, so their exposed times can add up to more than
    `exposed_comm_s`). An op counts whole at the highest level it reaches (a hierarchical
    all-reduce across slices at dcn, across sites at wan). `tiers[tier]` (the fabric's DCN tiers,
    `Fabric.dcn_tiers`): `busy_s` and `exposed_s` of the ops whose flows climb no higher than that
    tier (an op counts at its highest), and `link_busy_s`, the time the tier's busiest link needs
    for this job's bytes on it per step (bytes / capacity: what that tier alone asks of the step),
    with `links`, how many of its links carry any.
    """

    job: str
    steps: int
    step_time_s: float
    step_times_s: tuple[float, ...]
    compute_s: float
    comm_s: float
    exposed_comm_s: float
    timeline: tuple[OpTiming, ...]
    totals: dict[str, dict[str, float]]
    link_bytes: np.ndarray = field(repr=False)
    link_peak_utilisation: np.ndarray = field(repr=False)
    fabric: Fabric = field(repr=False)
    engine_wall_s: float = 0.0
    events: int = 0
    flows: int = 0
    flows_simulated: int = 0
    fast_path: bool = False
    levels: dict[str, dict[str, float]] = field(default_factory=dict)
    tiers: dict[str, dict[str, float]] = field(default_factory=dict)
    slices: int = 1
    input_s: float = 0.0  # the hosts' input pipeline busy per step (beside the chips)
    input_wait_s: float = 0.0  # the part of the step the chips wait for it (> 0: input-bound)
    # per fabric link, how many links the load recorded on it stands for under the fast path
    # (a representative link: its orbit or class; others 0); None when every link was simulated
    links_alike: np.ndarray | None = field(default=None, repr=False)
    # per distinct collective ("all_reduce z,dcn 1.5 GiB"), its algorithm and why (one line)
    algorithm_choices: dict[str, str] = field(default_factory=dict)
    fold: str = ""  # flows simulated and why not fewer, one line
    # what a study added to the engine's step for running on several slices (podsim.study.multislice:
    # straggler wait, ECMP collisions; the DCN tail already in exposed_comm_s); {} for the engine alone
    multislice: dict = field(default_factory=dict)
    trace: StepTrace | None = field(default=None, repr=False)  # the job's step trace (its meta: plan, FLOPs, HBM)
    views: tuple[SliceView, ...] = field(default=(), repr=False)  # the job's slices on the fabric

    def hot_links(self, n: int = 5) -> list[dict]:
        """The n links that carried the most of this job's bytes."""
        fab = self.fabric
        order = np.argsort(-self.link_bytes, kind="stable")[:n]
        return [{"link": int(k), "src": int(fab.link_src[k]), "dst": int(fab.link_dst[k]),
                 "kind": LinkKind(int(fab.link_kind[k])).name.lower(), "bytes": float(self.link_bytes[k]),
                 "peak_utilisation": float(self.link_peak_utilisation[k])}
                for k in order if self.link_bytes[k] > 0]

    def to_dict(self) -> dict:
        return {
            "job": self.job, "steps": self.steps, "step_time_s": self.step_time_s, "step_times_s": list(self.step_times_s),
            "compute_s": self.compute_s, "comm_s": self.comm_s, "exposed_comm_s": self.exposed_comm_s,
            "totals": self.totals, "timeline": [vars(t) for t in self.timeline], "hot_links": self.hot_links(),
            "link_peak_utilisation_max": float(self.link_peak_utilisation.max(initial=0.0)),
            "engine_wall_s": self.engine_wall_s, "events": self.events, "flows": self.flows,
            "flows_simulated": self.flows_simulated, "fast_path": self.fast_path, "levels": self.levels,
            "tiers": self.tiers, "slices": self.slices, "algorithm_choices": self.algorithm_choices, "fold": self.fold,
            "input_s": self.input_s, "input_wait_s": self.input_wait_s, "multislice": self.multislice,
        }


@dataclass(frozen=True, eq=False)
class CollectiveResult:
    """One collective on one slice: simulated vs closed-form time and nccl-tests bandwidths."""

    kind: str
    algorithm: str
    group: str
    group_size: int
    instances: int
    size_bytes: float
    simulated_s: float
    closed_form_s: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    engine_wall_s: float
    events: int
    flows: int
    flows_simulated: int
    fast_path: bool
    candidates_s: dict[str, float]
    step: StepResult = field(repr=False)
    algorithm_choice: str = ""  # the algorithm and why, one line

    def to_dict(self) -> dict:
        out = {k: v for k, v in vars(self).items() if k != "step"}
        out["hot_links"] = self.step.hot_links()
        return out
