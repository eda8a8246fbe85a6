"""Test helpers: the shared data folder from any worktree, and the CLI run in-process."""

import json
import math
import os
from pathlib import Path
from typing import NamedTuple

from podsim.cli import main
from podsim.placement import PodState
from podsim.topology import PodLayout, get_generation


def shared_data(*parts: str) -> Path:
    """The path under the nearest ancestor's `shared/data/` (the project may sit in a worktree
    one level deeper than the main checkout); the first candidate if none exists."""
    here = Path(__file__).resolve().parent
    candidates = [p / "shared" / "data" / Path(*parts) for p in here.parents]
    return next((c for c in candidates if c.exists()), candidates[1])


def astra_samples() -> Path:
    """The ASTRA-sim samples: the workplace's shared copy when present, else the project's own
    (tests/data/astra-sim, checked equal to the shared one), so no test skips for want of it."""
    shared = shared_data("astra-sim")
    return shared if shared.is_dir() else Path(__file__).resolve().parent / "data" / "astra-sim"


class CliRun(NamedTuple):
    code: int
    out: str
    err: str


def run_podsim(capsys, *args: str) -> CliRun:
    """Run the CLI in-process (the console script's entry point): exit code, stdout, stderr.
    The one CLI runner of the tests; a subprocess only where the process itself is tested."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return CliRun(code, out.out, out.err)


def assert_close_tree(got, want, where: str, *, rel_tol: float, abs_tol: float) -> None:
    """`got` matches the golden `want` (JSON: dicts, lists, scalars) key for key; floats within
    the tolerances, everything else exactly. `where` names the first mismatch."""
    if isinstance(want, dict):
        assert set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_close_tree(got[k], want[k], f"{where}.{k}", rel_tol=rel_tol, abs_tol=abs_tol)
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close_tree(g, w, f"{where}[{i}]", rel_tol=rel_tol, abs_tol=abs_tol)
    elif isinstance(want, float) and not isinstance(got, bool):
        assert got is not None and math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol), f"{where}: {got} != {want}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def v4_fleet(usable: list[int]) -> PodState:
    """v4 pods; pod p has only its first usable[p] cubes healthy (multislice placement tests)."""
    state = PodState(PodLayout(get_generation("tpu-v4"), pods=len(usable)))
    per = state.layout.cubes_per_pod
    state.fail(cubes=[p * per + c for p, n in enumerate(usable) for c in range(n, per)])
    return state


def check_golden(got, path: Path, name: str, *, rel_tol: float, abs_tol: float) -> None:
    """`got` (JSON-able key figures) equals the golden file `path`; with PODSIM_UPDATE_GOLDEN=1
    the file is rewritten first (after a deliberate model change)."""
    got = json.loads(json.dumps(got))
    if os.environ.get("PODSIM_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert path.exists(), f"no expected file {path}; run with PODSIM_UPDATE_GOLDEN=1"
    assert_close_tree(got, json.loads(path.read_text()), name, rel_tol=rel_tol, abs_tol=abs_tol)


def ask(model_impl, model: str, generation, shape, twisted: bool = False, *, slices: int = 1, sites: int = 1, **study):
    """A step-time model's estimate of one job's step: the study of (model, shape, twist, slices,
    sites) with `study`'s other fields (compute_efficiency, plan, dcn, ...)."""
    from podsim.study import StepStudy
    from podsim.topology import DcnSpec

    dcn = study.pop("dcn", DcnSpec())
    return model_impl.estimate(StepStudy(generation, tuple(shape), model=model, twisted=twisted, slices=slices,
                                         dcn=dcn.model_copy(update={"sites": sites}), **study))


def flat_cross_slice(trace):
    """A generated step with each cross-slice gradient all-reduce as one collective over its
    in-slice group and dcn together (`z:4:4,dcn`), as an importer gives a framework's process
    group over data x slices: the generator splits it (reduce-scatter inside, all-reduce of the
    shard across, all-gather inside), a Chakra or native trace need not. The flat all-reduce
    takes the all-gather's place and id, so the ops after it keep their dependencies."""
    from podsim.trace import StepTrace
    from podsim.trace.model import Collective

    ops = {op.id: op for op in trace.ops}
    flat, gone = {}, set()
    for op in trace.ops:
        base = op.id[:-3]
        if (isinstance(op, Collective) and op.id.endswith(".ar") and [g.axis for g in op.group] == ["dcn"]
                and base + ".rs" in ops and base + ".ag" in ops):
            rs = ops[base + ".rs"]
            flat[base + ".ag"] = Collective(base + ".ag", "all_reduce", rs.bytes, (*rs.group, *op.group), "auto",
                                            rs.deps, rs.name, rs.layer)
            gone.update({base + ".rs", op.id})
    return StepTrace(tuple(flat.get(op.id, op) for op in trace.ops if op.id not in gone), name=trace.name, meta=trace.meta)


SMALL_SCENARIO = {"name": "small", "topology": {"generation": "tpu-v5e", "wiring": "static"},
                  "workload": {"synthetic": {"jobs": 5, "rate": "2/h", "mix": {"2x2": 1}}}, "horizon": "6h"}


def small_scenario(**changes) -> str:
    """The hostile-input tests' small cluster scenario as JSON, with `a__b=value` set at a.b (None removes it)."""
    out = json.loads(json.dumps(SMALL_SCENARIO))
    for dotted, value in changes.items():
        node = out
        *head, last = dotted.split("__")
        for k in head:
            node = node.setdefault(k, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return json.dumps(out)
