"""Every number podsim reads has one physical range, stated here once, with why it is there.

A `Quantity` is a range in a base unit (bytes, seconds, bytes/s, a plain count): the scenario
schema, the file readers (traces, requests, failures, networks, job and failure CSVs) and the
CLI options all check against the same object, so `podsim validate` refuses what `podsim run`
would and an option refuses what the file field refuses. Out of range is one line naming the
field or flag, the value and the allowed range. Booleans are never numbers (YAML's `true` is not
the integer 1).

- `Q.check(value, name)`: the value if it is a finite number in range, else a PodsimError;
- `Q.option(flag, scale=...)`: a typer callback (a flag may be in another unit: `--wan-latency-ms`
  is seconds x 1e3);
- `Q.type` / `Q.duration`: pydantic field types (a number; a duration with units, '3h').

`Duration`, `Rate` and `Fraction` are the unit-carrying field types ('3h', '2/h', '99.5%'),
parsed once at validation into base units (podsim.units); `NoBoolNumbers` is the pydantic base
that refuses a boolean wherever a field's type does not admit one, and anything but a boolean
(`true`/`false`, or that text from a KEY=VALUE option) where a field is a boolean: pydantic
would take 1, 'yes' or 'on' as true.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, replace
from functools import cache, cached_property
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ValidationInfo,
    field_validator,
)

from podsim.errors import PodsimError
from podsim.units import duration_s, format_seconds, fraction, rate_per_h

# Sizes of the world podsim models, each past anything published or deployed -------------------
DAY_S, YEAR_S = 86400.0, 365.25 * 86400.0
MAX_SEED = 2**63 - 1  # numpy's SeedSequence takes any int; CP-SAT's random_seed and DuckDB's BIGINT take int64
MAX_PRIORITY = 1000  # ranks, not weights: a request's CP-SAT weight is chips x (1 + priority) in int64
MAX_JOBS = 1_000_000  # a job stream of a million jobs is ~1 GB of scheduler state; past any public trace
MAX_FLEET_CHIPS = 2**22  # 4.2 M chips (1,024 v4 pods): state arrays per chip and per link stay under ~1 GB
MAX_HORIZON_S = 100 * 365.25 * 86400.0  # a century: past any capacity plan
MIN_HORIZON_S = 1.0  # a second: below it no job runs (an OCS reconfiguration alone takes 10 s); 1 ns is a typo
MAX_SAMPLES = 1_000_000  # time-series points over the horizon (each samples every pod)
MAX_SWEEP_POINTS = 100_000  # points of one sweep: each is a scenario run and a store row
MAX_OP_BYTES = 1e15  # a petabyte per op: 30x a v4 pod's HBM; no collective moves more
MAX_OP_FLOPS = 1e21  # per chip and op: 40 days of a 275 TFLOP/s chip; a step's op is under a second of it
MAX_OP_S = 7 * 86400.0  # a week per op: a step of a training run is seconds
MAX_WEIGHT = 1e12  # a mix or priority weight: relative, so any scale works; a million of them still sum finitely


def _no_bool(value: Any, what: str = "") -> Any:
    if isinstance(value, bool):
        raise PodsimError(f"{what + ' ' if what else ''}{value!r} is a boolean; a number is expected")
    return value


def _show(x: float, unit: str) -> str:
    if unit == "s":
        if abs(x) >= YEAR_S:
            n = x / YEAR_S
            return f"{n:.4g} year{'' if n == 1 else 's'}"
        return "0 s" if x == 0 else format_seconds(x)
    if unit == "B":
        return f"{x:.4g} B"
    if isinstance(x, int) or (x == int(x) and abs(x) < 1e15):
        text = f"{int(x):,}"
    else:
        text = f"{x:.4g}"
    return f"{text} {unit}" if unit else text


@dataclass(frozen=True)
class Quantity:
    """A physical range [low, high] (or open at an end) in `unit`, and why it is where it is."""

    what: str
    low: float
    high: float
    unit: str = ""
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    why: str = ""

    def allowed(self, scale: float = 1.0, unit: str | None = None) -> str:
        """'[1, 1,000]', '(0, 1]', '[1 s, 365.2 d]' in the unit the value is given in."""
        u = self.unit if unit is None else unit
        lo, hi = (self.low, self.high) if scale == 1 else (self.low / scale, self.high / scale)
        text = f"{'(' if self.low_open else '['}{_show(lo, u)}, {_show(hi, u)}{')' if self.high_open else ']'}"
        return text + (" (whole numbers)" if self.integer else "")

    def inside(self, x: float) -> bool:
        lo = x > self.low if self.low_open else x >= self.low
        hi = x < self.high if self.high_open else x <= self.high
        return lo and hi

    def check(self, value: Any, name: str = "", *, scale: float = 1.0, unit: str | None = None) -> Any:
        """`value` (in units of `scale` base units) if it is a number in range; else one line."""
        label = f"{name} " if name else ""
        _no_bool(value, name)
        if not isinstance(value, (int, float)):
            raise PodsimError(f"{label}{value!r} is not a number; {self.what} is {self.allowed(scale, unit)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise PodsimError(f"{label}{value!r} is not a finite number; {self.what} is {self.allowed(scale, unit)}")
        if self.integer and not float(value).is_integer():
            raise PodsimError(f"{label}{value!r} is not a whole number; {self.what} is {self.allowed(scale, unit)}")
        try:
            base = value if scale == 1 else value * scale  # an int stays exact (2^63 - 1 is not a float)
        except OverflowError:
            base = math.inf
        if not self.inside(base):
            why = f" ({self.why})" if self.why else ""
            u = self.unit if unit is None else unit
            shown = _show(value, u) if u in ("s", "B") else f"{value:,}" if isinstance(value, int) and abs(value) < 10**30 else f"{value:.4g}"
            if u and u not in ("s", "B"):
                shown += f" {u}"
            raise PodsimError(f"{label}{shown} is out of range: {self.what} is {self.allowed(scale, unit)}{why}")
        return int(value) if self.integer else value

    def option(self, flag: str, scale: float = 1.0, unit: str | None = None):
        """A typer option callback checking the flag's value (None: the option was not given)."""
        def check(value):
            return None if value is None else self.check(value, flag, scale=scale, unit=unit)
        return check

    @cached_property
    def type(self) -> Any:
        """A pydantic field type: a number (int if `integer`) in range, booleans refused."""
        base = int if self.integer else float
        return Annotated[base, BeforeValidator(_no_bool), AfterValidator(self.check)]

    @cached_property
    def duration(self) -> Any:
        """A pydantic field type: a duration ('3h', '90s' or seconds) in range."""
        return Annotated[float, BeforeValidator(duration_s), AfterValidator(self.check)]


def count(what: str, low: int, high: float, why: str = "") -> Quantity:
    return Quantity(what, low, high, integer=True, why=why)


def seconds(what: str, low: float, high: float, why: str = "", low_open: bool = False) -> Quantity:
    return Quantity(what, low, high, "s", low_open=low_open, why=why)


# The ranges ------------------------------------------------------------------------------------
# Identity, counts and sizes of a fleet
SEED = count("a seed", 0, MAX_SEED, "seeds are 64-bit: 0 .. 2^63-1")
PRIORITY = count("a priority", 0, MAX_PRIORITY, "ranks, not weights: CP-SAT weighs chips x (1 + priority) in int64")
JOBS = count("a job count", 1, MAX_JOBS, "a million jobs is ~1 GB of scheduler state")
PODS = count("a pod count", 1, MAX_FLEET_CHIPS // 64, "the fleet bound is 4,194,304 chips")
PLACE_PODS = count("pods of one placement batch", 1, 64, "CP-SAT's model grows with pods x cubes")
SITES = count("a site count", 1, 64, "data centres joined by WAN links")
JOB_SLICES = count("slices of one job", 1, 4096, "a multislice job past 4,096 slices is past any fleet's pods")
REQUEST_SLICES = count("slices of one multislice request", 1, 1024, "bounds the request's CP-SAT weight")
BLOCK_CUBES = count("cubes per DCN aggregation block", 1, MAX_FLEET_CHIPS // 64, "at most a fleet's cubes")
WORKERS = count("a worker count", 1, 256, "threads or processes on one machine")
BATCH_WINDOW = count("queued jobs offered to CP-SAT per decision", 1, 10_000, "the requests budget of one decision")
SCHEDULE_DEPTH = count("queued jobs a scheduling pass looks at", 1, 1_000_000, "at most the job bound")
REPLICATES = count("a replicate count", 1, 1000, "each replicate is a whole simulation")
SAMPLES = count("time-series samples", 2, 20_000, "points drawn over the horizon")
TRACE_JOBS = count("a job limit", 1, MAX_JOBS, "the simulation's job bound")
RANK = count("a rank", 0, MAX_FLEET_CHIPS - 1, "one per chip of the largest fleet")
REPORT_RUNS = count("runs in one report", 1, 1000, "one column each")
PORT = count("a TCP port", 1, 65535)
HOSTS_PER_LEAF = count("hosts under one leaf", 1, 4096, "a leaf switch has at most a few hundred ports")
SPINES = count("spine switches", 1, 4096, "past any Clos built")
TRAINING_STEPS = Quantity("training steps", 1, 1e9, why="a billion steps: past any training run (~10^6)")
TRAINING_STEPS_INT = replace(TRAINING_STEPS, integer=True)  # the same range, whole numbers (a scenario's step count)
STEPS_SIGMA = Quantity("a lognormal sigma of steps", 0, 10, why="sigma 10 spans e^±30: past any job-length spread")
DURATION_SIGMA = Quantity("a lognormal sigma of durations", 0, 10, why="sigma 10 spans e^±30: past any job-length spread")
WEIGHT = Quantity("a weight", 0, MAX_WEIGHT, why="weights are relative: any scale works, and they sum finitely")

# Bytes, FLOPs and times of one op (step traces: native, Chakra, ASTRA-sim)
OP_BYTES = Quantity("bytes of one op", 0, MAX_OP_BYTES, "B", why="a petabyte per op: 30x a v4 pod's HBM")
OP_FLOPS = Quantity("FLOPs of one op per chip", 0, MAX_OP_FLOPS, why="40 days of a 275 TFLOP/s chip")
OP_SECONDS = seconds("an op's duration", 0, MAX_OP_S, "a week per op: a training step takes seconds")
MATMUL_DIM = Quantity("a matmul dimension or count", 0, 2**40, why="a dimension of 10^12 elements is past any tensor")
SHIFT = count("a send/recv shift", -MAX_FLEET_CHIPS, MAX_FLEET_CHIPS, "a step along one axis of the largest fleet")
EFFICIENCY = Quantity("a fraction of peak FLOP/s", 1e-3, 1, why="below 0.1% of peak an op is not modelled but broken")
CLOCK_HZ = Quantity("a compute clock", 1e6, 1e12, "Hz", why="1 MHz to 1 THz")
CLOCK_GHZ = Quantity("a compute clock", 1e-3, 1e3, "GHz", why="1 MHz to 1 THz")

# Networks (ASTRA-sim configs, DCN and WAN options, scenario dcn:)
NPUS_PER_DIM = count("NPUs of one network dimension", 2, 65536, "a dimension of one NPU has no links; 65,536 is past any pod")
LINK_GBYTES_PER_S = Quantity("a link bandwidth", 0, 1e5, "GB/s", low_open=True, why="100 TB/s per link: past any link built")
LINK_LATENCY_NS = Quantity("a link latency", 0, 1e6, "ns", why="1 ms per hop is 200 km of fibre")
OVERSUBSCRIPTION = Quantity("an oversubscription (NIC : uplink bandwidth)", 1, 1000, why="past 1000:1 the uplinks carry nothing")
WAN_LATENCY = seconds("a one-way WAN latency", 0, 1.0, "light takes 0.07 s halfway round the Earth; 1 s is past any WAN")
WAN_GBPS = Quantity("a WAN capacity per site pair", 0, 1e6, "Gb/s", low_open=True, why="1 Pb/s: past any deployed WAN")
SWITCH_LATENCY = seconds("a switch latency", 0, 1e-3, "switches forward in 0.3-0.6 us (eps.11); 1 ms is a broken switch")
PORT_GBPS = Quantity("a port or host bandwidth", 0, 1e5, "Gb/s", low_open=True, why="100 Tb/s per port: past any optics")

# Failures, restarts and time (cluster options, scenario failures:/policy:/horizon)
HORIZON = seconds("a horizon", MIN_HORIZON_S, MAX_HORIZON_S, "a second to a century")
MTBF = seconds("an MTBF", 60.0, 1e7 * 3600.0, "optics are rated ~10^6 h; a minute is a part that never works")
MTTR = seconds("an MTTR", 1.0, YEAR_S, "a second to a year")
WEIBULL_SHAPE = Quantity("a Weibull shape", 0.1, 20, why="published fits run 0.5-3; below 0.1 the mean overflows")
AVAILABILITY = Quantity("an availability", 0, 1, low_open=True, high_open=True, why="1 is a part that never fails: leave failures out")
CHECKPOINT_INTERVAL = seconds("a checkpoint interval", 1.0, YEAR_S, "a second to a year of run time")
RESTART_OVERHEAD = seconds("a restart overhead", 0, 7 * DAY_S, "a restart longer than a week is a job lost")
RECONFIGURE = seconds("an OCS reconfiguration time", 0, 3600.0, "OCS reconfigure in ~10 s (ocs.17)")
JOB_GAP = seconds("an inter-arrival gap", 0, MAX_HORIZON_S, "within a century")
ARRIVAL_RATE = Quantity("an arrival rate", 0, 1e7, "/h", low_open=True, why="10^7 jobs an hour is ~2,800 a second")
JOB_DURATION = seconds("a job duration", 1.0, MAX_HORIZON_S, "a second to a century")
ARRIVAL_TIME = seconds("an arrival time", -MAX_HORIZON_S, MAX_HORIZON_S, "within a century of now")
EVENT_TIME = seconds("an event time", 0, MAX_HORIZON_S, "within a century")
REPAIR_TIME = seconds("a repair time", 0, YEAR_S, "at most a year")
ARRIVAL_SCALE = Quantity("an arrival-time scale", 1e-6, 1e6, why="a million times faster or slower")
DEGRADED_SLOWDOWN = Quantity("a degraded-slice slowdown", 1, 100, why="1 is compute-bound; 100 is a slice that barely runs")
# CP-SAT limits are deterministic time units (work, ~1 s of one core each), not seconds
SOLVER_TIME_LIMIT = Quantity("a CP-SAT time limit", 0, DAY_S, low_open=True,
                             why="deterministic units, not seconds: a day's work per solve")
DECISION_TIME_LIMIT = Quantity("a CP-SAT limit per decision", 0, 3600.0, low_open=True,
                               why="deterministic units, not seconds: an hour's work per scheduling decision")
SLO_TTFT = seconds("a time-to-first-token target", 0, DAY_S, "a day: offline batches wait hours, no one waits longer", low_open=True)
SLO_TPOT = seconds("a time-per-output-token target", 0, 3600.0, "an hour per token: a decode step takes milliseconds", low_open=True)

# Serving fleets (podsim serve, a scenario's serving:; podsim.serving.spec)
MAX_REQUESTS = 5_000_000  # requests of one serving run: per-request records are ~100 bytes each (~0.5 GB)
SERVE_REQUESTS = count("a request count", 1, MAX_REQUESTS, "per-request records are ~100 bytes each (~0.5 GB)")
TENSOR_CHIPS = count("a tensor-parallel chip count", 1, MAX_FLEET_CHIPS, "at most the largest fleet's chips")
EXPERT_GROUPS = count("an expert-parallel group count", 1, 65536, "past any published mixture of experts")
SERVE_REPLICAS = count("a replica count", 1, 100_000, "each replica holds a slice: past any fleet's slices")
BEAMS = count("a beam count per request", 1, 64, "beam search runs a few; 64 is past any published width")
CLIENTS = count("a load-generator client count", 1, 1_000_000, "client threads of one harness")
TOKEN_BUDGET = count("a token budget per continuous-batching step", 1, 2**20, "a million tokens a step: past any server's budget")
STEP_SEQS = count("a sequence count per step", 1, 65536, "past any server's batch")
STATIC_BATCH = count("a static batch size", 1, 65536, "past any server's batch")
LIVE_BATCHES = count("a live-batch count of Saxml's batcher", 1, 4096, "Saxml's MAX_LIVE_BATCHES is 4 by default")
BATCHER_DEPTH = count("a batcher depth (batches live past Saxml's batcher)", 1, 64, "Saxml's rule gives 1 or 2")
PAGE_TOKENS = count("a KV-cache page size in tokens", 1, 4096, "vLLM's pages hold 16 tokens by default")
CAPACITY_REPLICATES = count("a run count per probed fleet size", 1, 100, "each is a whole serving simulation")
BURST_CV = Quantity("a coefficient of variation of the gaps", 0.01, 100,
                    why="Gamma gaps of shape 1/cv^2: cv 0.01 is a clock ticking within 1%, past 100 the gaps are one burst")
HBM_RESERVE = Quantity("a share of HBM the runtime keeps", 0, 1, why="a fraction, as a scenario's hbm_reserve (units.fraction)")

# Model and step options (trace generate, scenario step/scaling)
MICROBATCHES = count("micro-batches per step", 1, 65536, "one op set each")
GRAD_BYTES = count("bytes per element", 1, 8, "fp64 is the widest element a step moves")
REPLICAS_PER_CHIP = count("replicas per chip", 1, 2, "a chip has at most two TensorCores")
BN_GROUP = count("a batch-norm group", 1, MAX_FLEET_CHIPS, "at most the largest fleet's chips")
INPUT_RATE = Quantity("a host input rate", 0, 1e12, "/s", low_open=True, why="images or tokens per second one host feeds: 10^12 is past any pipeline")
CAPACITY_FACTOR = Quantity("an MoE capacity factor", 1, 64, why="below 1 tokens are dropped; 64 holds every token of 64 experts")
BATCH = count("a batch size", 1, 2**24, "16 M sequences or images: past any published batch")
N_LAYERS = count("a layer count", 1, 1000, "the deepest published models have ~130 layers")
WIDTH = count("a model width", 1, 2**20, "a million: past any published d_model or d_ff")
HEADS = count("a head count", 1, 65536, "past any published model")
VOCAB = count("a vocabulary", 1, 2**24, "16 M tokens: past any published vocabulary")
SEQ_LEN = count("a sequence length", 1, 2**24, "16 M tokens: past any published context")
IMAGE_SIZE = count("an image size", 1, 65536, "pixels per side")
EXPERTS = count("an expert count", 1, 65536, "past any published mixture of experts")

# A generation's figures as a scenario overrides them, by the figure's unit
FIGURE_RANGES: dict[str, Quantity] = {
    "TFLOP/s": Quantity("a peak rate", 0, 1e5, "TFLOP/s", low_open=True, why="100 PFLOP/s per chip: past any chip"),
    "GiB": Quantity("an HBM capacity", 0, 1e5, "GiB", low_open=True, why="100 TiB per chip: past any chip"),
    "GB/s": Quantity("a bandwidth", 0, 1e6, "GB/s", low_open=True, why="1 PB/s per chip or link: past any link"),
    "us": Quantity("a latency", 0, 1e6, "us", why="a second per hop"),
    "ms": Quantity("a switching time", 0, 1e6, "ms", why="at most 1,000 s"),
    "s": Quantity("a reconfiguration time", 0, 3600, "s", why="at most an hour"),
    "W": Quantity("a power", 0, 1e5, "W", low_open=True, why="100 kW per chip: past any chip"),
    "USD/h": Quantity("a price", 0, 1e4, "USD/h", why="$10,000 per chip-hour: past any accelerator's rent"),
    "chips": count("a chip count", 1, 4096, "chips per host or pod"),
    "cubes": count("a cube count", 1, 65536, "cubes of a slice"),
    "links": count("a link count", 1, 1024, "links per chip or face"),
    "ports": count("a port count", 1, 65536, "ports of an OCS"),
    "ocs": count("an OCS count", 1, 65536, "OCS units of a pod"),
    "nics": count("a NIC count", 1, 1024, "NICs per host"),
    "hosts": count("a host count", 1, 65536, "hosts"),
}

# Spine economics: prices and powers of optics and switch ports
USD = Quantity("a price", 0, 1e9, "USD", low_open=True, why="past any part's price")
WATTS = Quantity("a power", 0, 1e6, "W", low_open=True, why="past any part's power")
USD_PER_GBPS = Quantity("a price per Gb/s", 0, 1e6, "USD/Gbps", low_open=True)
W_PER_GBPS = Quantity("a power per Gb/s", 0, 1e4, "W/Gbps", low_open=True)
SPINE_FIGURE = Quantity("a spine-model figure", 0, 1e12, low_open=True, why="prices, powers and ratios are finite")

# Work budgets (podsim.bounds.Budget, --max-ops ...): how far a flag may raise one, past the
# defaults (~20x the largest shipped case) to where the work itself no longer fits one machine
BUDGETS: dict[str, Quantity] = {
    "ops": count("an ops budget", 1, 10**9, "a billion ops of one step: days of engine time at ~0.15 ms each"),
    "flows": count("a flows budget", 1, 10**9, "a billion flows of one pattern, each holding its route's links in memory"),
    "requests": count("a requests budget", 1, 10**7, "ten million requests of one batch: hours of CP-SAT model at ~8 s per 10,000"),
    "events": count("an events budget", 1, 10**9, "a billion failure events at ~200 B each: 200 GB of scheduler state"),
    "files": count("a files budget", 1, MAX_FLEET_CHIPS, "one file per rank of the largest fleet"),
    "input_bytes": Quantity("an input-size budget", 1, 2**40, "B", integer=True, why="1 TiB: past what one machine reads into memory"),
}

# Types for pydantic fields ---------------------------------------------------------------------
Duration = Annotated[float, BeforeValidator(duration_s)]
Rate = Annotated[float, BeforeValidator(rate_per_h)]
Fraction = Annotated[float, BeforeValidator(fraction)]
Seed = SEED.type
Priority = PRIORITY.type
JobCount = JOBS.type
Weight = WEIGHT.type


def _admits_bool(tp: Any) -> bool:
    """Whether a field annotation accepts a boolean as itself (bool, Any, a union with bool)."""
    if tp is bool or tp is Any or tp is object:
        return True
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _admits_bool(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_admits_bool(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return any(isinstance(a, bool) for a in typing.get_args(tp))
    return False


def _number_type(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _number_type(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_number_type(a) for a in typing.get_args(tp) if a is not type(None))
    return tp in (int, float)


def find_bool(value: Any, tp: Any, path: tuple = ()) -> tuple | None:
    """The path of a boolean inside `value` where `tp` wants a number there, else None."""
    if _admits_bool(tp):
        return None
    if isinstance(value, bool):
        return path if _number_type(tp) else None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return find_bool(value, args[0], path)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return find_bool(value, inner[0], path) if len(inner) == 1 else None
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        for k, v in value.items():
            hit = find_bool(k, args[0], (*path, k)) or find_bool(v, args[1], (*path, k))
            if hit is not None:
                return hit
    if origin in (list, tuple) and args and isinstance(value, (list, tuple)):
        elem = [args[0]] * len(value) if (origin is list or (len(args) == 2 and args[1] is Ellipsis)) else list(args)
        for i, (v, t) in enumerate(zip(value, elem, strict=False)):
            hit = find_bool(v, t, (*path, i))
            if hit is not None:
                return hit
    return None


def _bool_only(tp: Any) -> bool:
    """Whether a field annotation is a boolean (or an optional one) and nothing else."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _bool_only(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return len(inner) == 1 and _bool_only(inner[0])
    return tp is bool


def is_boolean(value: Any) -> bool:
    """True or false, as YAML and JSON write them or as the text of a KEY=VALUE option."""
    return isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false"))


@cache
def _fields_of(tp: Any) -> dict[str, Any] | None:
    """A nested model's or dataclass's field annotations (None for a NoBoolNumbers model: it
    checks its own fields)."""
    if not isinstance(tp, type):
        return None
    if issubclass(tp, NoBoolNumbers):
        return None
    if issubclass(tp, BaseModel):
        return {k: f.annotation for k, f in tp.model_fields.items()}
    if dataclasses.is_dataclass(tp):
        return typing.get_type_hints(tp, include_extras=True)
    return None


def find_nonbool(value: Any, tp: Any, path: tuple = ()) -> tuple[tuple, Any] | None:
    """(path, value) of something that is not a boolean where `tp` wants one, looking into the
    fields of a nested model or dataclass given as a mapping; else None."""
    if _bool_only(tp):
        return None if value is None or is_boolean(value) else (path, value)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return find_nonbool(value, args[0], path)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return find_nonbool(value, inner[0], path) if len(inner) == 1 else None
    fields = _fields_of(tp) if isinstance(value, dict) else None
    for k, v in (fields and value.items()) or ():
        hit = find_nonbool(v, fields[k], (*path, k)) if k in fields else None
        if hit is not None:
            return hit
    return None


class NoBoolNumbers(BaseModel):
    """A pydantic base: a boolean where a field wants a number is refused (pydantic would read
    `true` as 1), and so is anything but true or false where a field wants a boolean (pydantic
    would read 1, 'yes' or 'on' as true); containers (dict[int, float], tuples of numbers) and
    nested models given as mappings are looked into."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name) if info.field_name else None
        if field is None:
            return value
        if isinstance(value, (bool, dict, list, tuple)):
            hit = find_bool(value, field.annotation)
            if hit is not None:
                where = ".".join(str(p) for p in hit)
                raise PodsimError(f"{where + ': ' if where else ''}a boolean where a number is expected")
        if not isinstance(value, bool):
            bad = find_nonbool(value, field.annotation)
            if bad is not None:
                where = ".".join(str(p) for p in bad[0])
                raise PodsimError(f"{where + ': ' if where else ''}{bad[1]!r} is not a boolean; give true or false")
        return value
