"""A simulated step as Chrome trace-event JSON, the format Perfetto and chrome://tracing open.

`build_timeline(result, link_load=...)` -> a dict in the trace-event "JSON object format"
(`traceEvents` plus `displayTimeUnit` and `otherData`); timestamps and durations are in µs.
Tracks (processes, each with threads):

- **compute**: one thread per compute stream; ops that overlap in time go to separate streams
  (the first stream free when the op starts), so each stream is a plain sequence; the hosts'
  input pipeline (a step's next batch) on its own thread, `host input`;
- **collectives**: one thread per collective group (`all_reduce x`, `send_recv z:4` ...),
  split the same way when two ops of a group overlap (`x #2`);
- **DCN**: ops whose group spans the DCN (`dcn` axis), and, when link load was recorded
  without the symmetry fast path, a counter of the load on the DCN links (GB/s summed);
- **links**: a utilisation counter (% of capacity) for each of the busiest links, from the
  engine's recorded load (engine/linkload.py); links that carried the same bytes (symmetric
  rings) are shown once, labelled `+N alike` (N: the other links of the fabric with those bytes).

Each op is one complete ("X") event whose args carry its id, kind, bytes, group, algorithm and
closed-form time. Pure: no I/O; the CLI and the dashboard write the dict as JSON.

Track ids as Perfetto's JSON importer reads them (trace_processor's json_trace_parser): a thread
is its tid across the whole file (a tid is system-wide on Linux; a `thread_name` names the tid,
whatever its pid), and tid 0 is the idle "swapper" thread. So every track gets its own tid,
counted from 1 over the whole file, named by a `thread_name` metadata event; counters sit on
their own named thread of their process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np

from podsim.engine.linkload import LinkLoadRecorder, bytes_per_link, link_series
from podsim.engine.results import OpTiming, StepResult
from podsim.topology.fabric import LinkKind

US = 1e6  # trace-event timestamps are microseconds
PID_COMPUTE, PID_COLLECTIVES, PID_DCN, PID_LINKS = 1, 2, 3, 4
_PROCESSES = {PID_COMPUTE: "compute", PID_COLLECTIVES: "collectives", PID_DCN: "DCN", PID_LINKS: "links"}
DEFAULT_TOP_LINKS = 8


def _lanes(ops: Sequence[OpTiming]) -> list[int]:
    """Lane of each op (in the given order, sorted by start): the first lane free at its start."""
    ends: list[float] = []
    out = []
    for op in ops:
        for i, end in enumerate(ends):
            if end <= op.start_s:
                ends[i] = op.end_s
                out.append(i)
                break
        else:
            ends.append(op.end_s)
            out.append(len(ends) - 1)
    return out


def _track(op: OpTiming) -> tuple[int, str]:
    if op.kind == "compute":
        return PID_COMPUTE, "stream"
    if op.kind == "input":
        return PID_COMPUTE, "host input"
    dcn = any(part.split(":")[0].strip() == "dcn" for part in op.group.split(","))
    pid = PID_DCN if dcn else PID_COLLECTIVES
    return pid, f"{op.kind} {op.group}".strip()


def _meta(event: str, pid: int, tid: int | None = None, **args) -> dict:
    ev = {"name": event, "ph": "M", "pid": pid, "args": args}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _op_event(op: OpTiming, pid: int, tid: int) -> dict:
    args = {"id": op.id, "kind": op.kind, "step": op.step, "duration_s": op.duration_s}
    if op.layer:
        args["layer"] = op.layer
    if op.kind not in ("compute", "input"):
        args.update(bytes=op.bytes, group=op.group, algorithm=op.algorithm)
        if op.closed_form_s is not None:
            args["closed_form_s"] = op.closed_form_s
    # the slice ends at end_s * US itself, so an op that starts when another ends (a chunked matmul's
    # parts) starts where that one's slice ends, not a rounding error before it (nested, not overlapping)
    ts = op.start_s * US
    return {"name": op.name or op.id, "cat": op.kind, "ph": "X", "ts": ts, "dur": (op.start_s + op.duration_s) * US - ts,
            "pid": pid, "tid": tid, "args": args}


def _counter(name: str, pid: int, series: list[tuple[float, float, float]], key: str, scale: float, tid: int) -> list[dict]:
    """Counter events for piecewise-constant (t0, t1, value) intervals: a value at each change, 0 in gaps."""
    out: list[dict] = []
    last_end, last_value = None, None

    def emit(t: float, v: float) -> None:
        nonlocal last_value
        if v != last_value:
            out.append({"name": name, "ph": "C", "ts": t * US, "pid": pid, "tid": tid, "args": {key: v}})
            last_value = v

    for t0, t1, value in series:
        if last_end is not None and t0 > last_end:
            emit(last_end, 0.0)
        emit(t0, value * scale)
        last_end = t1
    if last_end is not None:
        emit(last_end, 0.0)
    return out


def _link_label(result: StepResult, k: int) -> str:
    """`link K: A x+ -> B (copper)` (fabric node ids); ICI links name the port they leave by."""
    fab = result.fabric
    src, dst = int(fab.link_src[k]), int(fab.link_dst[k])
    kind = LinkKind(int(fab.link_kind[k])).name.lower()
    port = ""
    if src < fab.n_chips:
        hit = np.flatnonzero(fab.port_link[src] == k)
        if len(hit):
            port = f" {'xyz'[hit[0] // 2]}{'+-'[hit[0] % 2]}"
    return f"link {k}: {src}{port} -> {dst} ({kind})"


def busiest_links(rec: LinkLoadRecorder, n: int) -> list[tuple[int, float, int]]:
    """The n recorded links that carried the most bytes, one per distinct byte count (the lowest
    id of each; on a symmetric slice many links carry the same): (link, bytes, how many other
    links carried the same bytes), most bytes first."""
    shown: list[list] = []
    for k, b in sorted(bytes_per_link(rec).items(), key=lambda kv: (-kv[1], kv[0])):
        twin = next((s for s in shown if math.isclose(s[1], b, rel_tol=1e-9)), None)
        if twin is not None:
            twin[2] += 1
        elif len(shown) < n:
            shown.append([k, b, 0])
    return [(k, b, same) for k, b, same in shown]


def build_timeline(result: StepResult, *, link_load: LinkLoadRecorder | None = None, top_links: int = DEFAULT_TOP_LINKS,
                   title: str = "", meta: dict | None = None) -> dict:
    """The step as trace-event JSON (a dict); see the module docstring for the tracks."""
    events: list[dict] = []
    ops = sorted(result.timeline, key=lambda t: (t.start_s, t.end_s, t.id))
    tracks: dict[tuple[int, str], list[OpTiming]] = {}
    for op in ops:
        tracks.setdefault(_track(op), []).append(op)
    names: list[dict] = []
    next_tid = 1  # unique over the file, never 0 (see the module docstring)

    def new_track(pid: int, label: str) -> int:
        nonlocal next_tid
        tid, next_tid = next_tid, next_tid + 1
        names.append(_meta("thread_name", pid, tid, name=label))
        names.append(_meta("thread_sort_index", pid, tid, sort_index=tid))
        return tid

    for (pid, name), group_ops in sorted(tracks.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        lanes = _lanes(group_ops)
        lane_tid = [new_track(pid, f"{name} {lane}" if pid == PID_COMPUTE else (name if lane == 0 else f"{name} #{lane + 1}"))
                    for lane in range(max(lanes) + 1)]
        events.extend(_op_event(op, pid, lane_tid[lane]) for op, lane in zip(group_ops, lanes, strict=True))
    counter_tid: dict[int, int] = {}

    def counter_track(pid: int) -> int:
        if pid not in counter_tid:
            counter_tid[pid] = new_track(pid, "counters")
        return counter_tid[pid]

    counters: list[dict] = []
    links_shown = []
    if link_load is not None:
        for k, carried, _ in busiest_links(link_load, top_links):
            cap = float(result.fabric.link_capacity_bytes_per_s[k])
            # links of the fabric (not only those simulated under the fast path) with these bytes
            same = int(np.isclose(result.link_bytes, result.link_bytes[k], rtol=1e-9, atol=0).sum()) - 1 if result.link_bytes[k] > 0 else 0
            label = _link_label(result, k) + (f" +{same} alike" if same else "")
            counters.extend(_counter(label, PID_LINKS, link_series(link_load, k), "utilisation_pct", 100.0 / cap,
                                     counter_track(PID_LINKS)))
            links_shown.append({"link": k, "label": label, "bytes": carried, "capacity_bytes_per_s": cap, "links_alike": same})
        kinds = result.fabric.link_kind
        # flows that cross slices are folded into classes (podsim.collectives.dcnfold): a
        # representative link's load counts once per link of its class
        if not result.fast_path or result.slices > 1:
            dcn = []
            alike = result.links_alike
            for t0, t1, links, load in link_load.intervals:
                on = np.isin(kinds[links], (int(LinkKind.DCN), int(LinkKind.TOR)))  # above the hosts' switch
                if on.any():
                    dcn.append((t0, t1, float((load[on] * (1 if alike is None else alike[links[on]])).sum())))
            if dcn:
                counters.extend(_counter("DCN load", PID_DCN, dcn, "GB_per_s", 1e-9, counter_track(PID_DCN)))
    used = {PID_COMPUTE, PID_COLLECTIVES} | {e["pid"] for e in events} | {e["pid"] for e in counters}
    procs = []
    for pid in sorted(used):
        procs.append(_meta("process_name", pid, name=_PROCESSES[pid]))
        procs.append(_meta("process_sort_index", pid, sort_index=pid))
    gen = result.fabric.generation
    other = {"title": title or result.job, "generator": "podsim steptime --timeline", "generation": gen.id,
             "step_time_s": result.step_time_s, "steps": result.steps, "compute_s": result.compute_s,
             "comm_s": result.comm_s, "exposed_comm_s": result.exposed_comm_s, "ops": len(result.timeline),
             "fast_path": result.fast_path, "links_shown": links_shown, **(meta or {})}
    return {"traceEvents": procs + names + events + counters, "displayTimeUnit": "ns", "otherData": other}


def timeline_json(timeline: dict) -> str:
    """The timeline as compact JSON text (strict: no NaN or infinity)."""
    return json.dumps(timeline, separators=(",", ":"), allow_nan=False)
