"""Collective kind and algorithm spellings: one normaliser, used by the CLI, trace files and importers."""

from __future__ import annotations

import pytest

from podsim.collectives import ALGORITHMS, KINDS
from podsim.errors import PodsimError
from podsim.trace import load_trace
from podsim.trace.kinds import COLLECTIVE_KINDS, normalise_algorithm, normalise_kind
from tests.helpers import run_podsim

SPELLINGS = {
    "all_reduce": ["all_reduce", "all-reduce", "allreduce", "ALLREDUCE", "AllReduce", "ALL_REDUCE", "ncclAllReduce", "MPI_Allreduce", " All Reduce "],
    "all_gather": ["all-gather", "ALLGATHER", "AllGather", "ncclAllGather"],
    "reduce_scatter": ["reduce-scatter", "REDUCESCATTER", "ReduceScatter", "REDUCE_SCATTER_BLOCK"],
    "all_to_all": ["all-to-all", "alltoall", "ALLTOALL", "AllToAll", "MPI_Alltoallv"],
    "broadcast": ["Broadcast", "BROADCAST", "bcast", "MPI_Bcast"],
    "reduce": ["Reduce", "REDUCE", "ncclReduce"],
    "send_recv": ["send-recv", "SendRecv", "collective-permute", "ppermute"],
}


@pytest.mark.parametrize(("kind", "spelling"), [(k, s) for k, ss in SPELLINGS.items() for s in ss])
def test_every_spelling_names_one_kind(kind, spelling):
    assert normalise_kind(spelling) == kind


def test_canonical_names_are_fixed_points_and_lists_agree():
    assert KINDS == (*COLLECTIVE_KINDS, "send_recv")
    for k in KINDS:
        assert normalise_kind(k) == k
    for a in ALGORITHMS:
        assert normalise_algorithm(a) == a
    assert normalise_algorithm("AUTO") == "auto"
    assert normalise_algorithm("bidirectional-ring") == "bidir_ring"
    assert normalise_algorithm("halvingDoubling") == "halving_doubling"  # ASTRA-sim system config
    assert normalise_algorithm("Torus-All-Links") == "torus_all_links"


@pytest.mark.parametrize("bad", ["allreduc", "reduce_gather", "", "all", 3, None])
def test_unknown_kind_is_one_line_naming_field_value_and_choices(bad):
    with pytest.raises(PodsimError) as e:
        normalise_kind(bad, field="--collective")
    msg = str(e.value)
    assert "\n" not in msg and "--collective" in msg and repr(bad) in msg and "all_reduce" in msg


def test_send_recv_refused_where_only_collectives_fit():
    with pytest.raises(PodsimError, match="not a known collective"):
        normalise_kind("collective-permute", send_recv=False)
    with pytest.raises(PodsimError, match="auto, ring"):
        normalise_algorithm("spiral")


def test_cli_accepts_aliases_and_gives_the_same_answer(capsys):
    base = ("steptime", "--generation", "tpu-v4", "--slice", "4x4x4", "--bytes", "16MiB", "--json")
    code, canonical, err = run_podsim(capsys, *base, "--collective", "all_reduce", "--algorithm", "bidir_ring")
    assert code == 0, err
    code, alias, err = run_podsim(capsys, *base, "--collective", "AllReduce", "--algorithm", "Bidirectional-Ring")
    assert code == 0, err
    import json
    a, b = json.loads(canonical), json.loads(alias)
    assert (a["kind"], a["algorithm"], a["simulated_s"]) == (b["kind"], b["algorithm"], b["simulated_s"])
    code, _, err = run_podsim(capsys, *base, "--collective", "allreduc")
    assert code == 2 and "--collective 'allreduc'" in err


def test_native_trace_file_and_astra_workload_accept_aliases(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("podsim_trace: 1\nops:\n"
                 "  - {id: a, kind: All-Reduce, bytes: 1MiB, group: x, algorithm: BIDIR-RING}\n"
                 "  - {id: b, kind: ALLGATHER, bytes: 1MiB, group: y, deps: [a]}\n"
                 "  - {id: c, kind: collective-permute, bytes: 1MiB, axis: x, deps: [b]}\n")
    t = load_trace(p)
    assert [(op.id, getattr(op, "kind", "send_recv")) for op in t.ops] == [("a", "all_reduce"), ("b", "all_gather"), ("c", "send_recv")]
    assert t.ops[0].algorithm == "bidir_ring"
    p.write_text("podsim_trace: 1\nops:\n  - {id: a, kind: allreduc, bytes: 1MiB, group: x}\n")
    with pytest.raises(PodsimError, match="op 'a': unknown op kind 'allreduc'"):
        load_trace(p)
    w = tmp_path / "w.txt"
    w.write_text("DATA\n1\nl0 -1 10 NONE 0 10 NONE 0 10 all-reduce 1024 10\n")
    t = load_trace(w, shape=(4,))
    assert [op.kind for op in t.ops if hasattr(op, "kind")] == ["all_reduce"]
