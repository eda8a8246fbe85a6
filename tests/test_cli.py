"""The CLI as a user meets it: exit codes, one-line errors, JSON keys, a fast start."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest
import typer
from helpers import run_podsim

import podsim.cli
from podsim.errors import InternalError, PodsimError

HEAVY = ("ortools", "simpy", "duckdb", "plotly", "streamlit", "pyarrow", "dask", "pandas", "networkx")


def test_help_lists_commands():
    """The console script's path (`python -m podsim`), in a fresh process."""
    r = subprocess.run([sys.executable, "-m", "podsim", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    for name in podsim.cli.COMMANDS:
        assert f" {name} " in r.stdout


@pytest.mark.parametrize("name", list(podsim.cli.COMMANDS))
def test_every_command_shows_its_help(name, capsys):
    """`podsim NAME --help` (and each `podsim trace SUB --help`) exits 0 with its usage: an
    option's help is drawn as rich markup, where a bracket such as [/X] breaks the whole page."""
    r = run_podsim(capsys, name, "--help")
    assert r.code == 0 and "Usage: podsim " + name in r.out, r.err[-500:]
    if name == "trace":
        import podsim.cli.trace as cli_trace

        subs = typer.main.get_command(cli_trace.trace_app).commands
        assert {"generate", "import", "export", "show"} <= set(subs)
        for sub in subs:
            r = run_podsim(capsys, "trace", sub, "--help")
            assert r.code == 0 and f"Usage: podsim trace {sub}" in r.out, r.err[-500:]


@pytest.mark.parametrize("args", [("--help",), ("topology", "tpu-v4", "--json")])
def test_start_up_loads_no_heavy_library(args):
    """`podsim --help` lists commands without importing them; `podsim topology` needs only the
    topology package (benchmarks/bench_startup.py times both)."""
    code = ("import sys\nfrom podsim.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr.split() == []


@pytest.mark.parametrize("args", [
    ("steptime", "--generation", "tpu-v4", "--slice", "4x4x4", "--collective", "all_reduce", "--bytes", "1MiB"),
    ("steptime", "--model", "llama2-70b", "-p", "fsdp=16,tensor=4", "--generation", "tpu-v4", "--slice", "4x4x4",
     "--set", "n_layers=1", "--json")])
def test_a_simulation_loads_only_the_engine(args):
    """A collective or a step needs the engine (SimPy), not CP-SAT, pandas, DuckDB, plotly or
    networkx: the package faces import a name's module on first use (issue 23)."""
    code = ("import sys\nfrom podsim.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr.split()[-1:] == ["simpy"], r.stderr


def test_faces_keep_their_names():
    """A lazy face still has every name of its __all__, the function where a module of the same
    name was imported first (podsim.cluster.simulate), and dir() lists them."""
    code = ("import podsim.cluster.simulate, podsim.placement.place\n"
            "import podsim.cluster as c, podsim.placement as p\n"
            "print(callable(c.simulate) and callable(p.place))\n"
            "from podsim.cluster import simulate\nprint(type(simulate).__name__)\n"
            "import importlib\n"
            "for n in ('cluster','collectives','economics','engine','perf','placement','report','scenario','study',"
            "'sweep','topology','trace','validation','workload'):\n"
            "    m = importlib.import_module('podsim.' + n)\n"
            "    assert all(hasattr(m, a) for a in m.__all__) and set(m.__all__) <= set(dir(m)), n\n"
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["True", "function", "ok"], r.stderr


def test_command_summaries_are_the_commands_docstrings():
    """COMMANDS keeps each command's one-line summary so `--help` imports nothing; it must say
    what the command's own docstring says."""
    group = typer.main.get_group(podsim.cli.app)
    for name in podsim.cli.COMMANDS:
        group.get_command(None, name)  # imports the module: it registers the command
    built = typer.main.get_group(podsim.cli.app)
    assert set(built.commands) == set(podsim.cli.COMMANDS)
    for name, (module, summary) in podsim.cli.COMMANDS.items():
        assert module in sys.modules
        first = inspect.cleandoc(built.commands[name].help).split("\n\n")[0]
        assert " ".join(first.split()) == summary, name


def test_unknown_command_suggests_the_nearest(capsys):
    r = run_podsim(capsys, "topolgy", "tpu-v4")
    assert r.code == 2 and "No such command 'topolgy'. Did you mean 'topology'?" in r.err


def test_topology_json_keys_pod(capsys):
    r = run_podsim(capsys, "topology", "tpu-v4", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    for key in ("generation", "chips", "hosts", "cubes", "ocs", "ici_links", "bisection_bytes_per_s",
                "allreduce_bytes_per_s", "diameter_hops"):
        assert key in s
    assert (s["chips"], s["hosts"], s["cubes"], s["ocs"], s["ici_links"], s["diameter_hops"]) == (4096, 1024, 64, 48, 12288, 24)


def test_topology_json_slice_twisted(capsys):
    s = json.loads(run_podsim(capsys, "topology", "tpu-v4", "--slice", "4x4x8", "--twisted", "--json").out)
    assert (s["chips"], s["cubes"], s["topology"], s["diameter_hops"]) == (128, 2, "twisted torus", 6)


def test_topology_detail_lists_ids(capsys):
    s = json.loads(run_podsim(capsys, "topology", "tpu-v4", "--json", "--detail").out)
    d = s["detail"]
    assert len(d["hosts"]) == 1024 and len(d["cubes"]) == 64 and len(d["ocs"]) == 48
    assert d["hosts"][17]["cube"] == 1 and len(d["hosts"][17]["chips"]) == 4


@pytest.mark.parametrize("args,needle", [
    (("topology", "tpu-v9"), "unknown generation 'tpu-v9'; known:"),
    (("topology", "tpu-v4", "--slice", "4x4x6"), "multiple of 4"),
    (("topology", "tpu-v5e", "--slice", "4x4", "--twisted"), "no twisted tori"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, needle):
    r = run_podsim(capsys, *args)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.err


@pytest.mark.parametrize("exc,code,needle", [
    (PodsimError("--slice '4x4x6' is bad"), 2, "error: --slice '4x4x6' is bad"),
    (InternalError("chip 3 is given to two slices"), 1, "internal error, please report (podsim "),
    (KeyError("hosts"), 1, "internal error, please report (podsim "),
])
def test_internal_errors_are_not_user_errors(capsys, monkeypatch, exc, code, needle):
    """Bad input exits 2 with one line; a failed invariant (InvalidPlacement, an engine check)
    or any other exception is podsim's bug: traceback, a request to report it, exit 1."""
    import podsim.cli.topology as cmd

    def boom(*_, **__):
        raise exc

    monkeypatch.setattr(cmd, "topology_summary", boom)
    monkeypatch.delenv("PODSIM_TRACEBACK", raising=False)
    r = run_podsim(capsys, "topology", "tpu-v4")
    assert r.code == code and needle in r.err
    last = r.err.strip().splitlines()[-1]
    assert str(exc).strip("'") in last
    assert ("Traceback" in r.err) == (code == 1)
    if code == 1:  # the last line says it is a bug, and names the exception unless it is an InternalError
        assert last.startswith("internal error, please report")
        assert ("KeyError" in last) == isinstance(exc, KeyError)


def test_invariant_errors_are_internal():
    from podsim.engine.validate import EngineInvariantError
    from podsim.placement.validate import InvalidPlacement

    for cls in (InvalidPlacement, EngineInvariantError):
        assert issubclass(cls, InternalError) and not issubclass(cls, PodsimError)


@pytest.mark.slow
def test_demo_writes_output(tmp_path, capsys):
    """`make demo` runs the demo scenario end to end; its last line is the report's path."""
    r = run_podsim(capsys, "demo", "--out", str(tmp_path))
    assert r.code == 0, r.err
    last = r.out.strip().splitlines()[-1]
    assert last == f"demo report: {(tmp_path / 'report.html').resolve()}"
    assert (tmp_path / "report.html").stat().st_size > 1_000_000  # plotly.js inlined
    assert (tmp_path / "results.duckdb").exists() and (tmp_path / "timeseries.parquet").exists()


def test_version(capsys):
    """`podsim --version` prints the installed package's version and exits 0."""
    from importlib.metadata import version

    code, out, _ = run_podsim(capsys, "--version")
    assert code == 0 and out.strip() == f"podsim {version('podsim')}"
