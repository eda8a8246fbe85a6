"""`podsim dashboard [--port N] [--address HOST] [--headless] [--store PATH] [--dry-run]`: start
the Streamlit dashboard (`app.py` beside the podsim package in a source checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer

from podsim.cli import app
from podsim.errors import PodsimError

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
    store: Path | None = typer.Option(None, "--store", help="results store the Capacity plan page opens (default out/demo/results.duckdb)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the streamlit command instead of running it"),
) -> None:
    """Start the dashboard: topology, placement, step time, cluster and capacity-plan pages."""
    cmd = streamlit_command(port, address, headless)
    env = dict(os.environ)
    if store is not None:
        env["PODSIM_STORE"] = str(store.resolve())
    if dry_run:
        print(("PODSIM_STORE=" + env["PODSIM_STORE"] + " " if store is not None else "") + " ".join(cmd))
        return
    print(f"podsim dashboard on http://{address}:{port} (Ctrl+C stops it)", file=sys.stderr)
    try:
        code = subprocess.call(cmd, cwd=app_path().parent, env=env)
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)
