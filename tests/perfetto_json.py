"""Read a trace-event JSON file into tracks the way Perfetto's trace processor imports it.

The rules are those of google/perfetto's JSON importer
(src/trace_processor/importers/json/json_trace_parser_impl.cc at 0ba84ac33c245c00dee49c08b929dcea1808dcd7,
and the ProcessTracker it calls), for the event types podsim writes:

- every event's thread is `UpdateThread(tid, pid)` with tid defaulting to pid: a thread is its
  tid (tids are system-wide); the same tid under another pid is another thread that takes the
  tid over, and tid 0 is the idle "swapper" thread;
- `M` thread_name names the thread that currently has the tid, whatever pid the event names;
  process_name names the pid;
- `X` events are slices on their thread's track; a slice that starts inside another on the same
  track but ends after it is not properly nested (Perfetto drops or misplaces it);
- `C` events are counters of the thread's process, one per (name, arg key): "NAME KEY".

Used by tests/test_timeline.py; no Perfetto binary is needed (the `perfetto` package downloads
trace_processor at run time, which tests may not do).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Thread:
    utid: int
    tid: int
    pid: int
    name: str = ""
    slices: list[dict] = field(default_factory=list)


@dataclass
class Imported:
    threads: list[Thread]
    process_names: dict[int, str]
    counters: dict[tuple[int, str], list[tuple[float, float]]]  # (pid, "NAME KEY") -> (ts, value)
    problems: list[str]

    def named(self) -> dict[str, Thread]:
        return {t.name: t for t in self.threads if t.slices or t.name}


def import_json(trace: dict) -> Imported:
    """Tracks, names and counters of a trace-event dict as Perfetto would import them, plus the
    problems Perfetto would have with them (tid 0, a tid shared by two processes, improperly
    nested slices)."""
    events = trace["traceEvents"]
    threads: list[Thread] = []
    current: dict[int, Thread] = {}  # tid -> the thread that has it now
    problems: list[str] = []
    procs: dict[int, str] = {}
    counters: dict[tuple[int, str], list[tuple[float, float]]] = {}

    def update_thread(tid: int, pid: int) -> Thread:
        t = current.get(tid)
        if t is None or t.pid != pid:
            if tid == 0:
                problems.append(f"tid 0 (Perfetto's idle swapper thread) used by pid {pid}")
            if t is not None:
                problems.append(f"tid {tid} used by pid {t.pid} and pid {pid}: Perfetto starts a new thread")
            t = Thread(len(threads), tid, pid)
            threads.append(t)
            current[tid] = t
        return t

    # the tokenizer sorts by timestamp; metadata events carry none (ts 0), so they come first
    for ev in sorted(events, key=lambda e: float(e.get("ts", 0.0))):
        pid = int(ev.get("pid", 0))
        tid = int(ev.get("tid", pid))
        ph = ev["ph"]
        if ph == "M":
            if ev["name"] == "thread_name":
                t = current.get(tid) or update_thread(tid, pid)
                t.name = ev["args"]["name"]
            elif ev["name"] == "process_name":
                procs[pid] = ev["args"]["name"]
            continue
        t = update_thread(tid, pid)
        if ph == "X":
            t.slices.append(ev)
        elif ph == "C":
            for key, value in ev["args"].items():
                counters.setdefault((pid, f"{ev['name']} {key}"), []).append((float(ev["ts"]), float(value)))
    for t in threads:
        stack: list[float] = []
        for ev in sorted(t.slices, key=lambda e: (float(e["ts"]), -float(e["dur"]))):
            start, end = float(ev["ts"]), float(ev["ts"]) + float(ev["dur"])
            while stack and stack[-1] <= start + 1e-6:  # ends where this starts, to float rounding (Perfetto: whole ns)
                stack.pop()
            if stack and end > stack[-1] + 1e-6:
                problems.append(f"thread {t.name or t.tid}: slice {ev['name']!r} at {start} us is not nested in the one before")
            stack.append(end)
    return Imported(threads, procs, counters, problems)
