"""`podsim dashboard [--port N] [--address HOST] [--headless] [--store PATH] [--dry-run]`: start
the Streamlit dashboard (`app.py` beside the podsim package in a source checkout)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import typer

from podsim.cli import app
from podsim.errors import PodsimError
from podsim.files import check_store

MAX_UPLOAD_MB = 20  # the pages refuse larger files too (app_pages/common.py)


def app_path() -> Path:
    """The dashboard's entry script: app.py in the checkout that holds the podsim package."""
    path = Path(__file__).resolve().parents[2] / "app.py"  # podsim/cli/dashboard.py -> the checkout
    if not path.is_file():
        raise PodsimError(f"the dashboard's app.py is not at {path}; it ships with podsim's source checkout "
                          "(install with `pip install -e .` from the checkout)")
    return path


def streamlit_command(port: int, address: str = "localhost", headless: bool = True) -> list[str]:
    """`streamlit run app.py` with podsim's server settings (no usage statistics sent anywhere)."""
    if not 0 < port < 65536:
        raise PodsimError(f"--port {port} is not a TCP port (1..65535)")
    return [sys.executable, "-m", "streamlit", "run", str(app_path()),
            "--server.headless", str(headless).lower(), "--server.port", str(port), "--server.address", address,
            "--server.maxUploadSize", str(MAX_UPLOAD_MB), "--browser.gatherUsageStats", "false"]


@app.command("dashboard")
def dashboard_cmd(
    port: int = typer.Option(8501, "--port", help="local TCP port to serve on"),
    address: str = typer.Option("localhost", "--address", help="address to bind (localhost: this machine only)"),
    headless: bool = typer.Option(False, "--headless", help="do not open a browser window"),
    store: str | None = typer.Option(None, "--store", help="results store the Capacity plan page opens and adds runs to (default out/demo/results.duckdb)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the streamlit command instead of running it"),
) -> None:
    """Start the dashboard: topology, placement, step time, cluster and capacity-plan pages."""
    cmd = streamlit_command(port, address, headless)
    env = dict(os.environ)
    if store is not None:  # the page reads it and may write runs into it: what is there must be a store's
        env["PODSIM_STORE"] = str(check_store(store, read_only=False).resolve())
    if dry_run:
        print(("PODSIM_STORE=" + env["PODSIM_STORE"] + " " if store is not None else "") + " ".join(cmd))
        return
    print(f"podsim dashboard on http://{address}:{port} (Ctrl+C stops it)", file=sys.stderr)
    raise typer.Exit(serve(cmd, app_path().parent, env))


class _Stop(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def serve(cmd: list[str], cwd: Path, env: dict, grace_s: float = 10.0) -> int:
    """Run the server until it exits, or until this process gets SIGINT or SIGTERM: then stop
    the server (SIGTERM to its process group, SIGKILL after `grace_s`) and return 0, so no
    Streamlit process outlives the command. The server runs in its own session, so the signal
    reaches it only through here, once."""
    def stop(signum, _frame):
        raise _Stop(signum)

    proc = subprocess.Popen(cmd, cwd=cwd, env=env, start_new_session=True)
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return proc.wait()
    except _Stop:
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc.poll() is None:
            _terminate(proc, grace_s)


def _terminate(proc: subprocess.Popen, grace_s: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue
