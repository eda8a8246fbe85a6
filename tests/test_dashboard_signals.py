"""`podsim dashboard` stops its Streamlit server when it gets SIGINT or SIGTERM (issue 25): the
command exits and nothing answers on its port any more."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from test_dashboard_e2e import ROOT, free_port

pytestmark = pytest.mark.e2e  # starts a server


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
            return r.read() == b"ok"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_dashboard_stops_its_server_on_a_signal(sig, tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "podsim", "dashboard", "--headless", "--port", str(port),
                             "--address", "127.0.0.1", "--store", str(tmp_path / "none.duckdb")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not _healthy(port):
            assert proc.poll() is None, f"podsim dashboard exited early with code {proc.returncode}"
            assert time.monotonic() < deadline, "the dashboard did not answer /_stcore/health within 60 s"
            time.sleep(0.2)
        os.kill(proc.pid, sig)  # the podsim process only, as a service manager or `kill` does
        assert proc.wait(timeout=20) == 0
        deadline = time.monotonic() + 10
        while _healthy(port):  # the server went with it
            assert time.monotonic() < deadline, f"the Streamlit server still answers on port {port} after {sig.name}"
            time.sleep(0.2)
    finally:  # whatever is left in the command's process group (a server that outlived it) goes too
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
