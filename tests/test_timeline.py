"""Step timelines as Chrome trace-event JSON: valid against the format's schema, and true to the StepResult."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from podsim.engine import simulate_step
from podsim.engine.jobs import Job, place_slices
from podsim.engine.linkload import bytes_per_link, record_link_load
from podsim.engine.timeline import (
    PID_COLLECTIVES,
    PID_COMPUTE,
    PID_DCN,
    PID_LINKS,
    build_timeline,
    timeline_json,
)
from podsim.topology import DcnSpec, build_slice
from podsim.topology.fabric import LinkKind
from podsim.trace import StepTrace
from podsim.trace.model import Collective, Compute, SendRecv, parse_group
from tests.helpers import run_podsim
from tests.perfetto_json import import_json

SCHEMA = json.loads((Path(__file__).parent / "data" / "trace_event_schema.json").read_text())
MiB = 2**20


def check_schema(doc: dict) -> None:
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)


def small_trace() -> StepTrace:
    """Compute, then two collectives on different groups and a second compute all at once, then a permute."""
    return StepTrace((
        Compute("c1", 1e-3, name="fwd"),
        Collective("tp", "all_reduce", 64 * MiB, parse_group("x"), deps=("c1",)),
        Collective("fsdp", "all_gather", 64 * MiB, parse_group("y,z"), deps=("c1",)),
        Compute("c2", 2e-3, deps=("c1",), name="bwd"),
        Compute("c3", 0.5e-3, deps=("c1",), name="side"),
        SendRecv("pp", 8 * MiB, parse_group("z")[0], deps=("tp", "fsdp", "c2")),
    ), name="small")


def simulate(trace, built_or_job, fast_path=True):
    with record_link_load() as load:
        result = simulate_step(trace, built_or_job, fast_path=fast_path)
    return result, load.last


def xs(doc):
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def thread_names(doc) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}


@pytest.fixture(scope="module")
def small():
    built = build_slice("tpu-v4", "4x4x4")
    result, rec = simulate(small_trace(), built)
    return result, rec, build_timeline(result, link_load=rec, title="small")


def test_schema_rejects_what_it_should():
    """The schema is not a rubber stamp: events without a phase, X without dur, text counters fail."""
    for bad in ({"traceEvents": [{"pid": 1}]},
                {"traceEvents": [{"ph": "X", "pid": 1, "tid": 0, "name": "a", "ts": 0}]},
                {"traceEvents": [{"ph": "C", "pid": 1, "name": "a", "ts": 0, "args": {"v": "high"}}]},
                {"traceEvents": [{"ph": "M", "pid": 1, "name": "thread_name", "args": {"name": "t"}}]}):
        with pytest.raises(jsonschema.ValidationError):
            check_schema(bad)


def test_timeline_passes_the_trace_event_schema(small):
    _, _, doc = small
    check_schema(doc)
    check_schema(json.loads(timeline_json(doc)))
    assert doc["displayTimeUnit"] == "ns" and doc["otherData"]["title"] == "small"


def test_one_event_per_op_with_the_engine_times(small):
    result, _, doc = small
    events = xs(doc)
    assert len(events) == len(result.timeline) == 6
    by_id = {e["args"]["id"]: e for e in events}
    for op in result.timeline:
        e = by_id[op.id]
        assert e["ts"] == pytest.approx(op.start_s * 1e6, abs=1e-9) and e["dur"] == pytest.approx(op.duration_s * 1e6, rel=1e-12)
        assert e["cat"] == op.kind
        if op.kind != "compute":
            assert (e["args"]["bytes"], e["args"]["group"], e["args"]["algorithm"]) == (op.bytes, op.group, op.algorithm)
    # per-kind busy time adds up to the result's totals
    for kind, t in result.totals.items():
        assert sum(e["dur"] for e in events if e["cat"] == kind) / 1e6 == pytest.approx(t["time_s"], rel=1e-9)
    end = max(e["ts"] + e["dur"] for e in events) / 1e6
    assert end == pytest.approx(result.step_time_s, rel=1e-9)


def test_tracks_are_compute_streams_and_collective_groups_without_overlap(small):
    _, _, doc = small
    names = thread_names(doc)
    compute = sorted(n for (pid, _), n in names.items() if pid == PID_COMPUTE)
    groups = sorted(n for (pid, _), n in names.items() if pid == PID_COLLECTIVES)
    # c2 and c3 both start when c1 ends: two compute streams
    assert compute == ["stream 0", "stream 1"]
    assert groups == ["all_gather y,z", "all_reduce x", "send_recv z"]
    lanes: dict = {}
    for e in xs(doc):
        lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in lanes.values():  # within a track, events never overlap
        spans.sort()
        assert all(b[0] >= a[1] - 1e-9 for a, b in zip(spans, spans[1:], strict=False))


def test_link_counters_integrate_to_the_engine_link_bytes(small):
    """The utilisation counter of each shown link, integrated over time x capacity, gives the
    bytes the engine booked on that link when its flows were admitted (independent accounting)."""
    result, rec, doc = small
    shown = doc["otherData"]["links_shown"]
    assert shown and len(shown) <= 8
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["pid"] == PID_LINKS]
    for link in shown:
        pts = sorted((e["ts"] / 1e6, e["args"]["utilisation_pct"]) for e in counters if e["name"] == link["label"])
        assert pts[-1][1] == 0.0 and all(0 <= v <= 100 + 1e-6 for _, v in pts)
        carried = sum((b[0] - a[0]) * a[1] / 100 * link["capacity_bytes_per_s"] for a, b in zip(pts, pts[1:], strict=False))
        assert carried == pytest.approx(result.link_bytes[link["link"]], rel=1e-6)
        assert carried == pytest.approx(link["bytes"], rel=1e-6)
    assert [s["bytes"] for s in shown] == sorted((s["bytes"] for s in shown), reverse=True)
    assert max(bytes_per_link(rec).values()) == pytest.approx(shown[0]["bytes"])


def test_fast_path_and_full_simulation_draw_the_same_ops():
    built = build_slice("tpu-v4", "4x4x4")
    a, rec_a = simulate(small_trace(), built, fast_path=True)
    b, rec = simulate(small_trace(), built, fast_path=False)
    da, db = build_timeline(a, link_load=rec_a), build_timeline(b, link_load=rec)
    # the busiest links' bytes and how many links share them agree though the fast path simulates
    # only representatives
    shown = lambda d: [(round(s["bytes"]), s["links_alike"]) for s in d["otherData"]["links_shown"]]  # noqa: E731
    assert shown(da) == shown(db) and shown(da)[0][1] > 0
    assert [(e["args"]["id"], e["tid"]) for e in xs(da)] == [(e["args"]["id"], e["tid"]) for e in xs(db)]
    for ea, eb in zip(xs(da), xs(db), strict=True):
        assert ea["dur"] == pytest.approx(eb["dur"], rel=1e-6)
    check_schema(db)


def test_dcn_ops_and_load_get_their_own_track():
    fab, s = place_slices("tpu-v4", "4x4x4", 2, DcnSpec(hosts_per_leaf=16, spines=4))
    tr = StepTrace((Compute("c", 1e-4), Collective("ar", "all_reduce", 64 * MiB, parse_group("x,y,z,dcn"), deps=("c",)),
                    Collective("dp", "all_reduce", 16 * MiB, parse_group("dcn"), deps=("ar",))))
    result, rec = simulate(tr, Job(tr, fab, (s[0], s[1])))
    doc = build_timeline(result, link_load=rec)
    check_schema(doc)
    dcn_ops = sorted(e["args"]["id"] for e in xs(doc) if e["pid"] == PID_DCN)
    assert dcn_ops == ["ar", "dp"]
    load = sorted((e["ts"] / 1e6, e["args"]["GB_per_s"]) for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "DCN load")
    carried = sum((b[0] - a[0]) * a[1] * 1e9 for a, b in zip(load, load[1:], strict=False))
    on_dcn = fab.link_kind == int(LinkKind.DCN)
    assert carried == pytest.approx(float(result.link_bytes[on_dcn].sum()), rel=1e-6) and carried > 0


def test_cli_writes_a_gpt3_timeline(tmp_path, capsys):
    """`podsim steptime --trace ... --timeline`: a (2-layer) GPT-3 step, op counts as the summary says."""
    trace_file, out = tmp_path / "gpt3.json", tmp_path / "gpt3_timeline.json"
    code, _, err = run_podsim(capsys, "trace", "generate", "gpt3-175b", "--slice", "4x4x4", "-p", "fsdp=16,tensor=4",
                              "--set", "n_layers=2", "-o", str(trace_file))
    assert code == 0, err
    code, stdout, err = run_podsim(capsys, "steptime", "--trace", str(trace_file), "--generation", "tpu-v4",
                                   "--slice", "4x4x4", "--timeline", str(out), "--json")
    assert code == 0, err
    result, doc = json.loads(stdout), json.loads(out.read_text())
    check_schema(doc)
    check_perfetto_tracks(doc)
    events = xs(doc)
    kinds = result["tables"]["step_kinds"]
    comm_s = result["metrics"]["comm_s"]
    for i, kind in enumerate(kinds["kind"]):
        assert sum(e["cat"] == kind for e in events) == kinds["ops"][i]
        assert sum(e["dur"] for e in events if e["cat"] == kind) / 1e6 == pytest.approx(kinds["op_s"][i], rel=1e-9)
        assert kinds["busy_s"][i] <= kinds["op_s"][i] * (1 + 1e-12) and kinds["busy_s"][i] <= comm_s * (1 + 1e-12)
    step_s = result["metrics"]["step_time_s"]
    assert doc["otherData"]["step_time_s"] == pytest.approx(step_s)
    assert np.isclose(max(e["ts"] + e["dur"] for e in events) / 1e6, step_s, rtol=1e-9)
    code, _, err = run_podsim(capsys, "steptime", "--trace", str(trace_file), "--generation", "tpu-v4",
                              "--slice", "4x4x4", "--timeline", str(tmp_path / "t.txt"))
    assert code == 2 and "must end in .json" in err
    code, _, err = run_podsim(capsys, "steptime", "--generation", "tpu-v4", "--slice", "4x4x4", "--collective", "all-reduce",
                              "--bytes", "1MiB", "--timeline", str(out))
    assert code == 2 and "--timeline applies to a step (--trace FILE or --model MODEL)" in err


def check_perfetto_tracks(doc: dict) -> None:
    """As Perfetto imports the file: no problem (tid 0, a tid in two processes, bad nesting);
    every track with slices is named by a metadata event and holds one kind of op: a compute
    stream, or one collective kind on one group (its name, `#N` for an overlap lane)."""
    imp = import_json(doc)
    assert not imp.problems, imp.problems[:3]
    tracks = [t for t in imp.threads if t.slices]
    assert tracks and all(t.tid >= 1 and t.name for t in tracks)
    assert len({t.name for t in tracks}) == len(tracks)
    for t in tracks:
        kinds = {(e["cat"], e["args"].get("group", "")) for e in t.slices}
        assert len(kinds) == 1, (t.name, kinds)
        (kind, group), = kinds
        if kind == "compute":
            assert t.name.startswith("stream ") and t.pid == PID_COMPUTE
        else:
            assert t.name.split(" #")[0] == f"{kind} {group}".strip(), (t.name, kind, group)
    for (pid, _name), points in imp.counters.items():
        assert pid in (PID_LINKS, PID_DCN) and points


def test_perfetto_imports_one_named_track_per_kind_and_group(small):
    _, _, doc = small
    check_perfetto_tracks(doc)
    imp = import_json(doc)
    names = {t.name for t in imp.threads if t.slices}
    assert {"all_reduce x", "all_gather y,z", "send_recv z"} <= names
    assert imp.process_names == {PID_COMPUTE: "compute", PID_COLLECTIVES: "collectives", PID_LINKS: "links"}


def test_the_perfetto_reader_catches_shared_tids():
    """The reader is not a rubber stamp: tid 0, or one tid in two processes (the old timelines:
    every process counted its tracks from 0), is a problem; so is a slice crossing another's end."""
    doc = {"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": "stream 0"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": 0, "args": {"name": "all_reduce x"}},
        {"ph": "X", "name": "a", "cat": "compute", "pid": 1, "tid": 0, "ts": 0, "dur": 10, "args": {}},
        {"ph": "X", "name": "b", "cat": "all_reduce", "pid": 2, "tid": 0, "ts": 5, "dur": 10, "args": {}},
        {"ph": "X", "name": "c", "cat": "compute", "pid": 3, "tid": 7, "ts": 0, "dur": 10, "args": {}},
        {"ph": "X", "name": "d", "cat": "compute", "pid": 3, "tid": 7, "ts": 5, "dur": 10, "args": {}},
    ]}
    problems = import_json(doc).problems
    assert any("tid 0" in p for p in problems) and any("used by pid 1 and pid 2" in p for p in problems)
    assert any("not nested" in p for p in problems)


def test_recording_inside_a_validating_block_still_checks_the_engine():
    from podsim.engine.validate import validating

    with validating() as v, record_link_load() as load:
        simulate_step(small_trace(), build_slice("tpu-v4", "4x4x4"))
    assert v.count == 1 and load.last.check and load.last.finished_flows == load.last.flows > 0
    with record_link_load() as load:
        simulate_step(small_trace(), build_slice("tpu-v4", "4x4x4"))
    assert not load.last.check and load.last.finished_flows == load.last.flows


def test_recording_is_per_thread():
    """A recording block in one thread does not catch another thread's simulation (dashboard sessions)."""
    import threading

    built = build_slice("tpu-v4", "4x4x4")
    seen = {}

    def other():
        with record_link_load() as load:
            simulate_step(small_trace(), built)
        seen["other"] = len(load.runs)

    with record_link_load() as mine:
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen["other"] == 1 and mine.runs == []


@pytest.mark.parametrize("routing", ["shortest_paths", "adaptive"])
def test_link_counters_weigh_multipath_shares(routing):
    """Under multipath routing a flow puts only a fraction of its bytes on each link: the
    recorded load, integrated, still equals the engine's bytes per link."""
    built = build_slice("tpu-v4", "4x4x8", twisted=True)
    with record_link_load() as load:
        result = simulate_step(small_trace(), built, routing=routing)
    per_link = bytes_per_link(load.last)
    assert per_link
    for link, carried in per_link.items():
        assert carried == pytest.approx(result.link_bytes[link], rel=1e-6)
