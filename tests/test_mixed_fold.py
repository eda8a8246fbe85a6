"""Folding groups that mix in-slice axes with dcn (issue 23 item 1), and choosing algorithms
without building the flows of candidates that cannot win (item 2).

A pattern's split (which flows stay inside slices, which cross, which slices are alike) is
said in closed form by its builder; the tests check it against the flows themselves, then
that folded and unfolded steps agree on step time, every link's bytes and every link's peak
utilisation, under split and hashed ECMP, with the engine's validator on."""

from __future__ import annotations

import numpy as np
import pytest

from podsim.bounds import budgets
from podsim.collectives import choice as choice_mod
from podsim.collectives import plan_collective
from podsim.collectives.algorithms import applicable, build_schedule
from podsim.collectives.closed_form import schedule_bound_s, schedule_time_s
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.groups import group_layout
from podsim.collectives.patterns import (
    pairs_pattern,
    ring_pattern,
    shift_pattern,
    tree_pattern,
    xor_pattern,
)
from podsim.collectives.routes import RouterPool
from podsim.engine import build_job, simulate_step
from podsim.engine.validate import validating
from podsim.errors import PodsimError
from podsim.topology import DcnSpec
from podsim.trace import StepTrace, generate_trace
from podsim.trace.model import Collective, Compute, parse_group
from tests.helpers import flat_cross_slice


def _job(slices: int, sites: int = 1, shape: str = "4x4x4", ecmp: str = "split"):
    tr = StepTrace((Compute("c", duration_s=1e-3),), meta={"slices": slices})
    return build_job(tr, "tpu-v4", shape, slices, dcn=DcnSpec(sites=sites, ecmp=ecmp))


def _patterns(lay):
    pats = [ring_pattern(lay, None, 1), ring_pattern(lay, None, -1), pairs_pattern(lay, None), shift_pattern(lay, 3)]
    pats += [ring_pattern(lay, j, 1) for j in range(len(lay.grid))] + [pairs_pattern(lay, j) for j in range(len(lay.grid))]
    pats += [tree_pattern(lay, m, s) for m in (1, 2, 4, 16, 32) if m < lay.p for s in (True, False)]
    if all(g & (g - 1) == 0 for g in lay.grid):
        pats += [xor_pattern(lay, b) for b in range(int(np.log2(lay.p)))]
    return pats


@pytest.mark.parametrize("slices,sites,group", [(4, 1, "z,dcn"), (4, 1, "x,y,z,dcn"), (6, 2, "y:2,dcn"),
                                                (4, 2, "dcn"), (4, 1, "x,y"), (3, 1, "x:2:2,dcn")])
def test_pattern_split_is_what_the_flows_do(slices, sites, group):
    """Every builder's split (flows inside / across slices, per slice, per rank, which slices
    are alike) equals what its flows do, on groups with and without dcn, on one and two sites."""
    job = _job(slices, sites)
    placement = Placement(job.fabric, job.views)
    lay = group_layout(job.views, parse_group(group))
    where, local = placement.slice_of_chip, placement.local_of_chip
    rank = np.empty(job.fabric.n_chips, np.int64)
    rank[lay.members] = np.arange(lay.p)[None, :]
    for pat in _patterns(lay):
        sp = pat.split
        src, dst, w = pat.flows(None)
        w = np.ones(len(src)) if w is None else w
        inside = where[src] == where[dst]
        assert (sp.inside, sp.crossing) == (int(inside.sum()), int((~inside).sum())), pat.name
        assert np.array_equal(sp.slice_inside, np.bincount(where[src[inside]], minlength=slices)), pat.name
        per = lay.instances
        assert np.array_equal(sp.out_crossing * per, np.bincount(rank[src[~inside]], minlength=lay.p)), pat.name
        assert np.array_equal(sp.in_crossing * per, np.bincount(rank[dst[~inside]], minlength=lay.p)), pat.name
        flows_of = []
        for s in range(slices):
            sel = inside & (where[src] == s)
            flows_of.append(sorted(zip(local[src[sel]].tolist(), local[dst[sel]].tolist(), w[sel].tolist(), strict=True)))
        for a in range(slices):
            for b in range(slices):
                assert (sp.labels[a] == sp.labels[b]) == (flows_of[a] == flows_of[b]), (pat.name, a, b)


def _mixed_step(algorithm: str, slices: int) -> StepTrace:
    ops = (Compute("c", duration_s=1e-4),
           Collective("ar", "all_reduce", 2**22, parse_group("z,dcn"), algorithm, deps=("c",)),
           Collective("ag", "all_gather", 2**20, parse_group("x,y"), deps=("c",)),
           Collective("ar2", "all_reduce", 2**16, parse_group("x,dcn"), algorithm, deps=("c",)),
           Collective("bc", "broadcast", 2**18, parse_group("y,z,dcn"), deps=("ar",)))
    return StepTrace(ops, name="mixed", meta={"slices": slices})


def _assert_same(job):
    """Folded == unfolded: step time and every link's bytes bit for bit, link peaks up to float
    rounding (sums of rates in another order: 7e-16 apart under hashed ECMP)."""
    with validating() as checked:
        fast, full = (simulate_step(None, job, fast_path=fp) for fp in (True, False))
    assert checked.count == 2
    assert fast.fast_path and not full.fast_path and fast.flows == full.flows
    assert fast.flows_simulated < full.flows_simulated
    assert fast.step_time_s == full.step_time_s
    np.testing.assert_array_equal(fast.link_bytes, full.link_bytes)
    np.testing.assert_allclose(fast.link_peak_utilisation, full.link_peak_utilisation, rtol=1e-12, atol=1e-15)
    for level in ("ici", "dcn"):
        assert fast.levels[level]["busy_s"] == pytest.approx(full.levels[level]["busy_s"], rel=1e-12)
    return fast, full


@pytest.mark.parametrize("algorithm,ecmp", [("auto", "split"), ("auto", "hash"), ("ring", "split"), ("ring", "hash"),
                                            ("direct", "split"), ("halving_doubling", "hash"), ("bidir_ring", "split"),
                                            ("auto", "tiered"), ("ring", "tiered")])
def test_mixed_groups_fold_to_the_full_step(algorithm, ecmp):
    """Groups over in-slice axes and dcn at once, under algorithms whose steps mix flows inside
    and across slices (the snake ring turns from slice to slice, all pairs, trees): folded ==
    unfolded on 4 slices of 64 chips (leaf-spine split or hashed; tiered, 4.7:1 at the ToR)."""
    dcn = DcnSpec(tiers="fat-tree-k40-4.7to1") if ecmp == "tiered" else DcnSpec(ecmp=ecmp)
    _assert_same(build_job(_mixed_step(algorithm, 4), "tpu-v4", "4x4x4", 4, dcn=dcn))


def test_mixed_groups_fold_across_sites():
    """Two sites joined by WAN links: the site axis is a slice axis like dcn."""
    _assert_same(build_job(_mixed_step("ring", 4), "tpu-v4", "4x4x4", 4, dcn=DcnSpec(sites=2, wan_latency_s=1e-3)))


def _mixed_plan(model: str, shape: str, plan: str, batch: int) -> StepTrace:
    tr = flat_cross_slice(generate_trace(model, shape, plan, generation="tpu-v4",
                                         overrides={"n_layers": 2, "global_batch": batch}))
    tr.validate()
    assert any(isinstance(op, Collective) and len(op.group) > 1 and op.group[-1].axis == "dcn" for op in tr.ops)
    return tr


@pytest.mark.parametrize("dcn", [DcnSpec(ecmp="split"), pytest.param(DcnSpec(ecmp="hash"), marks=pytest.mark.slow),
                                 pytest.param(DcnSpec(tiers="fat-tree-k40-4.7to1"), marks=pytest.mark.slow)],
                         ids=["split", "hash", "tiered"])
def test_generated_mixed_plan_folds_to_the_full_step_1024_chips(dcn):
    """A generated plan whose gradient all-reduce runs over `z:4:4,dcn` (data parallel inside
    the slice and across 4 slices of 256 chips, 1,024 chips): folded == unfolded, on a leaf-spine
    DCN split or hashed over the spines and on a tiered one (NIC -> ToR 4.7:1 -> block -> spine)."""
    tr = _mixed_plan("llama2-70b", "4x4x16", "dcn=4,data=4,fsdp=16,tensor=4", 256)
    fast, _ = _assert_same(build_job(tr, "tpu-v4", "4x4x16", 4, dcn=dcn))
    assert fast.flows_simulated < fast.flows / 50


@pytest.mark.slow
@pytest.mark.parametrize("ecmp", ["split", "hash"])
def test_generated_mixed_plan_folds_to_the_full_step_4096_chips(ecmp):
    """The same at 4,096 chips (4 slices of 8x8x16, data over `z:8:2,dcn`)."""
    tr = _mixed_plan("llama2-70b", "8x8x16", "dcn=4,data=8,fsdp=64,tensor=2", 2048)
    _assert_same(build_job(tr, "tpu-v4", "8x8x16", 4, dcn=DcnSpec(ecmp=ecmp)))


@pytest.mark.slow
@pytest.mark.parametrize("ecmp", ["split", "hash"])
def test_generated_mixed_moe_plan_folds_to_the_full_step(ecmp):
    """A MoE plan (Mixtral, expert=8, data=4 across 4 slices of 256 chips): its data-parallel
    all-reduces over `z:4:4,dcn` beside the expert all-to-alls inside the slices."""
    moe = _mixed_plan("mixtral-8x7b", "4x4x16", "dcn=4,data=4,expert=8,fsdp=8", 1024)
    _assert_same(build_job(moe, "tpu-v4", "4x4x16", 4, dcn=DcnSpec(ecmp=ecmp)))


# --- algorithm choice ------------------------------------------------------------------------

def _exhaustive(kind, lay, size, pool):
    """Every applicable algorithm priced in full (what auto chose before issue 23)."""
    out = {}
    for alg, why in applicable(kind, lay).items():
        if not why:
            try:
                out[alg] = schedule_time_s(s := build_schedule(kind, lay, size, alg), pool.router(s.patterns()))
            except PodsimError:
                continue
    return out


@pytest.mark.parametrize("rank_flows", [choice_mod.RANK_FLOWS, 64])
@pytest.mark.parametrize("kind,group,size", [("all_reduce", "z,dcn", 2**10), ("all_reduce", "x,y,z,dcn", 2**20),
                                             ("all_reduce", "x,y,z,dcn", 2**30), ("all_to_all", "y,dcn", 2**16),
                                             ("reduce_scatter", "x,dcn", 2**24), ("broadcast", "dcn", 2**12)])
def test_auto_is_the_fastest_by_closed_form(monkeypatch, rank_flows, kind, group, size):
    """auto takes what pricing every candidate would take, even when every candidate is over
    the ranking budget (64 flows: all ranked by their lower bounds first), and each lower
    bound is at most the closed form it bounds."""
    monkeypatch.setattr(choice_mod, "RANK_FLOWS", rank_flows)
    job = _job(4)
    pool = RouterPool(Placement(job.fabric, job.views))
    lay = group_layout(job.views, parse_group(group))
    plan = plan_collective(kind, lay, size, "auto", pool)
    full = _exhaustive(kind, lay, size, pool)
    best = min(full.values())
    assert plan.closed_form_s == best and plan.schedule.algorithm == next(a for a, t in full.items() if t == best)
    assert plan.why.startswith(f"{plan.schedule.algorithm}: fastest by closed form")
    for alg, bound in plan.bounds_s.items():
        assert bound <= full[alg] * (1 + 1e-12) and bound > best, alg
    for alg, t in plan.candidates_s.items():
        assert t == full[alg]
        s = build_schedule(kind, lay, size, alg)
        assert schedule_bound_s(s, pool.router(s.patterns()), 16) <= t * (1 + 1e-12)


def test_a_candidate_that_cannot_win_is_never_built():
    """A 1 MiB all-reduce over 4 x 4,096 chips: `direct` would route 201 M flows (every pair
    across slices); its bound rules it out without building them, and the one line says so."""
    job = _job(4, shape="16x16x16")
    pool = RouterPool(Placement(job.fabric, job.views))
    lay = group_layout(job.views, parse_group("x,y,z,dcn"))
    pairs = pairs_pattern(lay, None)
    built = []
    make = pairs.make
    object.__setattr__(pairs, "make", lambda lay_, keep: built.append(keep is None or int(keep.sum())) or make(lay_, keep))
    plan = plan_collective("all_reduce", lay, 2**20, "auto", pool)
    assert plan.schedule.algorithm == "hierarchical"
    assert "direct" in plan.bounds_s and "direct" not in plan.candidates_s
    n = pool.router([pairs]).flows_to_route(pairs)
    assert n > 16384 * 12288 and "direct ruled out by its bound" in plan.why and f"({n:,} flows not built)" in plan.why
    assert built and all(k is not True and k <= 64 for k in built)  # only the flows of a few chips


def test_no_simulable_candidate_names_its_largest_pattern(monkeypatch):
    """When every candidate has a pattern over the flows budget (--max-flows), the one-line error names the largest
    pattern of one of them, its group and its flow count (not its first pattern)."""
    monkeypatch.setattr(choice_mod, "RANK_FLOWS", 0)
    job = _job(4)
    pool = RouterPool(Placement(job.fabric, job.views))
    lay = group_layout(job.views, parse_group("x,y,z,dcn"))
    with budgets(flows=0), pytest.raises(PodsimError) as err:
        plan_collective("all_reduce", lay, 2**20, "auto", pool)
    msg = str(err.value)
    alg = msg.split(" of ", 1)[1].split(" on group", 1)[0]
    sched = build_schedule("all_reduce", lay, 2**20, alg)
    router = pool.router(sched.patterns())
    n, name = max((router.flows_to_route(p), p.name) for p in sched.patterns())
    assert msg.startswith(f"{name} of {alg} on group {lay.name}: {n:,} flows, more than the 0 ")
    assert "\n" not in msg


# --- saying what cannot be folded, and why this algorithm -------------------------------------

def test_a_step_that_cannot_fold_is_said_before_it_runs(monkeypatch, tmp_path, capsys):
    """A twisted torus routed dimension-order has no translation symmetry: over the threshold
    the engine warns before simulating (flows to simulate, and why), and the CLI prints it as
    one `warning:` line; the step result keeps the same line (`fold`)."""
    import json

    import podsim.engine.core as core
    from podsim.errors import PodsimWarning
    from podsim.topology import build_slice
    from tests.helpers import run_podsim

    monkeypatch.setattr(core, "NOTE_FLOWS", 1000)
    tr = StepTrace((Collective("ar", "all_reduce", 2**20, parse_group("x,y,z"), "ring"),), name="tw")
    with pytest.warns(PodsimWarning, match=r"job 'job': [0-9,]+ flows to simulate \(a twisted torus routed dimension-order"):
        r = simulate_step(tr, build_slice("tpu-v4", "4x4x8", twisted=True))
    assert r.fold.startswith(f"{r.flows_simulated:,} flows to simulate (a twisted torus")
    path = tmp_path / "tw.json"
    path.write_text(json.dumps({"podsim_trace": 1, "name": "tw", "ops": [
        {"id": "ar", "kind": "all_reduce", "bytes": 2**20, "group": "x,y,z", "algorithm": "ring"}]}))
    run = run_podsim(capsys, "steptime", "--trace", str(path), "--generation", "tpu-v4", "--slice", "4x4x8", "--twisted", "--json")
    assert run.code == 0, run.err
    lines = [ln for ln in run.err.splitlines() if ln.startswith("warning:")]
    assert len(lines) == 1 and "flows to simulate (a twisted torus routed dimension-order" in lines[0]
    metrics = json.loads(run.out)["metrics"]
    assert metrics["fold"].startswith(f"{metrics['flows_simulated']:,} flows to simulate (a twisted torus")
    assert metrics["algorithm_choices"].startswith("all_reduce x,y,z 1 MiB: ring: as asked") and "\n" not in metrics["algorithm_choices"]


def test_the_chosen_algorithm_and_why_in_one_json_line(capsys):
    """`podsim steptime --collective ... --json` says the algorithm auto took and why, on one line."""
    import json

    from tests.helpers import run_podsim

    run = run_podsim(capsys, "steptime", "--generation", "tpu-v4", "--slice", "4x4x4", "--collective", "all_reduce",
                     "--bytes", "1MiB", "--json")
    assert run.code == 0, run.err
    out = json.loads(run.out)
    why = out["algorithm_choice"]
    assert "\n" not in why and why.startswith(f"{out['algorithm']}: fastest by closed form")
    assert min(out["candidates_s"], key=out["candidates_s"].get) == out["algorithm"]
