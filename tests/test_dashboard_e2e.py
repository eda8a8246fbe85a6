"""The dashboard in a real browser: `streamlit run app.py --server.headless true` on a free local
port, each page loaded in headless Chromium (Debian's package, see tests/browser.py), its title
and a key figure checked, one widget clicked, and a screenshot saved.

Set PODSIM_SCREENSHOTS=DIR to keep the screenshots (the README's come from `docs/`).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from browser import chromium_page
from test_dashboard import make_store

from podsim.cli.dashboard import streamlit_command
from podsim.topology import topology_summary
from podsim.units import format_rate

ROOT = Path(__file__).resolve().parents[1]
PAGES = [("", "Topology"), ("placement", "Placement"), ("steptime", "Step time"), ("cluster", "Cluster"),
         ("serving", "Serving"), ("capacity", "Capacity plan")]
CHARTS = {"": 1, "placement": 1, "steptime": 3, "cluster": 4, "serving": 3, "capacity": 9}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dashboard_server(store: Path):
    """The dashboard on a free loopback port, its Capacity plan page on `store`; yields its base
    URL once /_stcore/health says ok."""
    port = free_port()
    log = open(os.devnull, "w")  # noqa: SIM115
    proc = subprocess.Popen(streamlit_command(port, "127.0.0.1", headless=True), cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, env={**os.environ, "PODSIM_STORE": str(store)})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"streamlit exited with code {proc.returncode}"
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the dashboard did not answer /_stcore/health within 60 s"
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def metric_values(page) -> dict[str, str]:
    labels = page.locator('[data-testid="stMetricLabel"]').all_inner_texts()
    values = page.locator('[data-testid="stMetricValue"]').all_inner_texts()
    return {label.strip(): value.strip() for label, value in zip(labels, values, strict=True)}


def wait_idle(page, charts: int, timeout_ms: int = 60000) -> None:
    """Wait until the script has finished (no 'running' status) and `charts` plotly charts are drawn."""
    page.wait_for_selector("h1", timeout=timeout_ms)
    page.wait_for_function(
        "n => document.querySelectorAll('.js-plotly-plot').length >= n"
        " && !document.querySelector('[data-testid=\"stStatusWidget\"]')", arg=charts, timeout=timeout_ms)
    page.wait_for_timeout(800)  # let plotly finish drawing before a screenshot


@pytest.mark.e2e
def test_every_page_in_a_real_browser(tmp_path):
    keep = os.environ.get("PODSIM_SCREENSHOTS")
    bisection = format_rate(topology_summary("tpu-v4", "4x4x8")["bisection_bytes_per_s"])
    store = make_store(tmp_path)
    with dashboard_server(store) as base, chromium_page(1400, 1900) as (page, errors):
        outside, failed = [], []
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((base, "data:", "blob:")) else None)
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        shots = {}
        for path, title in PAGES:
            page.goto(f"{base}/{path}")
            wait_idle(page, charts=CHARTS[path])
            assert page.title() == title
            assert page.locator("h1").first.inner_text().strip() == title
            m = metric_values(page)
            if title == "Topology":
                assert m["OCS circuits"] == "96" and m["Diameter"] == "8 hops" and m["Bisection bandwidth"] == bisection
                shot = tmp_path / "topology.png"
                page.screenshot(path=str(shot))
                page.get_by_text("Twisted", exact=True).click()  # a real click on a real checkbox
                page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stMetricValue\"]')]"
                                       ".some(e => e.innerText.trim() === '6 hops')", timeout=30000)
                assert metric_values(page)["Diameter"] == "6 hops"
            else:
                if title == "Placement":
                    assert m["Placed"] == "4 of 5" and m["Chips placed"] == "3,716"
                elif title == "Step time":
                    assert re.fullmatch(r"[0-9.]+ (min|s|ms)", m["Step time"]), m
                    assert 0 < float(m["Model FLOPs utilisation"].rstrip("%")) < 100
                elif title == "Cluster":
                    assert re.fullmatch(r"\d+ of 300", m["Completed"]) and m["Utilisation (OCS)"].endswith("%")
                elif title == "Serving":
                    assert re.fullmatch(r"[0-9.]+ (s|ms)", m["TTFT p99"]) and m["Cost per M tokens"].startswith("$"), m
                else:
                    assert m["Runs"] == "10" and m["Sweeps"] == "2"
                shot = tmp_path / f"{path}.png"
                page.screenshot(path=str(shot))
                if title == "Capacity plan":
                    with page.expect_download() as download:
                        page.get_by_text("Download the HTML report").first.click()
                    html = Path(download.value.path()).read_text()
                    assert html.lstrip().lower().startswith("<!doctype html") and "tiny [heavy, pods=1]" in html
                    assert "Plotly.newPlot" in html or "plotly" in html.lower()
            shots[title] = shot
        assert not outside, f"the dashboard fetched from outside this machine: {outside[:3]}"
        # Streamlit's frontend first probes <page>/_stcore/... before the root's; nothing else may fail
        assert all(re.search(r"/[a-z]+/_stcore/(health|host-config)$", u) for u in failed), failed
        js_errors = [e for e in errors if not e.startswith("Failed to load resource")]
        assert not js_errors, js_errors
    for title, shot in shots.items():
        assert shot.stat().st_size > 50_000, f"{title}: screenshot looks empty"
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(keep) / f"dashboard-{shot.name}")
