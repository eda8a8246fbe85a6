"""Request streams for a serving simulation: arrival times and prompt and output lengths, drawn
from a seed or replayed from a trace (Azure's public LLM inference trace format).

Draws come from `numpy.random.default_rng(seed)` in a fixed order (arrivals, then prompts,
then outputs), so the same configuration and seed give the same requests.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from podsim.errors import PodsimError
from podsim.files import read_csv
from podsim.quantities import MAX_REQUESTS
from podsim.serving.spec import Lengths, RequestStream, check_request_count

SHIPPED = {"azure-conv": "conv_10min.csv", "azure-code": "code_10min.csv"}
TRACE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_EPOCH = dt.datetime(1970, 1, 1)  # naive: a trace's times are differences, whatever its zone


@dataclass(frozen=True, eq=False)
class Requests:
    """A request stream as arrays (seconds, tokens), sorted by arrival."""

    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    beams: int = 1
    source: str = ""

    def __len__(self) -> int:
        return len(self.arrival_s)


@dataclass(frozen=True, eq=False)
class RequestTrace:
    """A trace's requests: seconds from its first request, prompt and output tokens."""

    t_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    source: str


def _trace_path(trace: Path | str) -> tuple[Path, str]:
    if str(trace) in SHIPPED:
        ref = resources.files("podsim").joinpath("data/azure_llm_2023").joinpath(SHIPPED[str(trace)])
        return Path(str(ref)), f"{trace} (Azure LLM inference trace 2023, first 10 min; CC BY 4.0)"
    return Path(trace), str(trace)


def _timestamp(text: str, where: str) -> float:
    """'2023-11-16 18:15:46.6805900' (Azure's format; 7-digit fractions) or seconds -> seconds."""
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    head, _, frac = s.partition(".")
    try:
        t = dt.datetime.fromisoformat(head)
    except ValueError:
        raise PodsimError(f"{where}: TIMESTAMP {text!r} is neither a date-time (2023-11-16 18:15:46.68) nor seconds") from None
    if frac and not frac.isdigit():
        raise PodsimError(f"{where}: TIMESTAMP {text!r} has a fraction of a second that is not digits")
    return (t - _EPOCH).total_seconds() + (float("0." + frac) if frac else 0.0)


@cache
def load_request_trace(trace: Path | str) -> RequestTrace:
    """Read a request trace CSV with columns TIMESTAMP, ContextTokens, GeneratedTokens."""
    path, source = _trace_path(trace)
    header, rows = read_csv(path, "request trace")
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        raise PodsimError(f"{path.name}: request trace lacks column {missing[0]!r}; it needs {', '.join(TRACE_COLUMNS)}")
    t, p, o = [], [], []
    for line, row in rows:
        where = f"{path.name} line {line}"
        t.append(_timestamp(row["TIMESTAMP"], where))
        for col, out in (("ContextTokens", p), ("GeneratedTokens", o)):
            try:
                v = int(row[col])
            except ValueError:
                raise PodsimError(f"{where}: {col} {row[col]!r} is not a whole number of tokens") from None
            if not 1 <= v <= 10_000_000:
                raise PodsimError(f"{where}: {col} {v} must be between 1 and 10,000,000 tokens")
            out.append(v)
        if len(t) > MAX_REQUESTS:
            raise PodsimError(f"{path.name}: more than {MAX_REQUESTS:,} requests")
    if not t:
        raise PodsimError(f"{path.name}: the request trace has no requests")
    ts = np.asarray(t)
    if np.any(np.diff(ts) < 0):
        i = int(np.argmax(np.diff(ts) < 0))
        raise PodsimError(f"{path.name}: request {i + 2} arrives before request {i + 1}; a trace must be in time order")
    return RequestTrace(ts - ts[0], np.asarray(p, dtype=np.int64), np.asarray(o, dtype=np.int64), source)


def _lengths(spec: Lengths, n: int, rng: np.random.Generator, column: np.ndarray | None, what: str) -> np.ndarray:
    if spec.kind == "fixed":
        return np.full(n, int(round(spec.mean)), dtype=np.int64)
    if spec.kind == "uniform":
        return rng.integers(spec.low, spec.high + 1, size=n)
    if spec.kind == "lognormal":  # mean m, coefficient of variation cv: sigma^2 = ln(1 + cv^2)
        s2 = math.log1p(spec.cv**2)
        mu = math.log(spec.mean) - s2 / 2
        return np.clip(np.rint(rng.lognormal(mu, math.sqrt(s2), size=n)), spec.low, spec.high).astype(np.int64)
    if column is None:  # pragma: no cover - RequestStream requires a trace for kind trace
        raise PodsimError(f"{what} lengths come from a trace, but none is given")
    return np.clip(column, spec.low, spec.high).astype(np.int64)


def draw_requests(stream: RequestStream, duration_s: float, seed: int) -> Requests:
    """The requests of `stream` arriving in [0, duration_s) (offline: `requests` at time 0)."""
    rng = np.random.default_rng(seed)
    arr = stream.arrivals
    trace = load_request_trace(stream.trace) if stream.trace is not None else None
    cap = stream.requests or MAX_REQUESTS
    if arr.kind == "trace":
        assert trace is not None
        t = trace.t_s / arr.time_scale
        keep = t < duration_s
        idx = np.flatnonzero(keep)[:cap]
        t, rows = t[idx], idx
    elif arr.kind == "offline":
        t = np.zeros(cap)
        rows = None
    else:
        rate = arr.rate_per_s
        expected = rate * duration_s
        check_request_count(rate, duration_s)
        n = int(expected + 10 * math.sqrt(expected) + 10)
        if arr.kind == "poisson":
            gaps = rng.exponential(1.0 / rate, size=n)
        else:  # Gamma gaps of mean 1/rate and coefficient of variation cv: shape 1/cv^2
            shape = 1.0 / arr.cv**2
            gaps = rng.gamma(shape, 1.0 / (rate * shape), size=n)
        t = np.cumsum(gaps)
        t = t[t < duration_s][:cap]
        rows = None
    n = len(t)
    if trace is not None and rows is None:  # lengths drawn from the trace's rows, with replacement
        rows = rng.integers(0, len(trace.t_s), size=n)
    prompt_col = trace.prompt[rows] if trace is not None else None
    output_col = trace.output[rows] if trace is not None else None
    prompt = _lengths(stream.prompt, n, rng, prompt_col, "prompt")
    output = _lengths(stream.output, n, rng, output_col, "output")
    return Requests(np.asarray(t, dtype=float), prompt, output, stream.beams,
                    source=trace.source if trace is not None else arr.kind)
