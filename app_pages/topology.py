"""Topology: a generation and a slice; its chips and cables in 3-D, its OCS circuits, its figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_pages.common import colour, inline_errors, pick_generation
from podsim.topology import build_slice, format_shape, parse_shape, topology_summary
from podsim.topology.cables import chip_cubes, circuit_rows, slice_cables
from podsim.topology.shapes import is_twistable
from podsim.topology.summary import summary_rows
from podsim.units import format_rate

DRAW_MAX_CHIPS = 4096  # a v4 pod draws in about a second; larger pods are summarised only


@st.cache_data(max_entries=32, show_spinner="Wiring the slice...")
def slice_data(gen: str, shape: str | None, twisted: bool, ocs: bool) -> dict:
    """Everything the page shows of one slice, from the library (cached per input)."""
    built = build_slice(gen, shape, twisted=twisted, ocs=ocs)
    view = built.view
    lay = built.fabric.layout
    return {
        "summary": topology_summary(gen, shape, twisted=twisted, ocs=ocs),
        "coords": view.coords, "chips": view.chips, "cubes": chip_cubes(view),
        "hosts": lay.host_of_chip[view.chips], "cables": slice_cables(view),
        "circuits": circuit_rows(lay, built.slice.circuits),
    }


def _segments(p: np.ndarray, q: np.ndarray) -> dict[str, np.ndarray]:
    """x, y, z of line segments p[i] -> q[i], separated by gaps (NaN), for go.Scatter3d."""
    gap = np.full((len(p), 1, 3), np.nan)
    pts = np.concatenate([p[:, None, :], q[:, None, :], gap], axis=1).reshape(-1, 3)
    return {"x": pts[:, 0], "y": pts[:, 1], "z": pts[:, 2]}


def torus_figure(d: dict) -> go.Figure:
    """Chips at their slice coordinates coloured by cube; copper and optical cables apart.

    A wraparound cable is drawn as two short stubs leaving the slice; the full wraparound
    lines (where a twisted torus shows its twist) can be switched on in the legend."""
    coords = np.zeros((len(d["coords"]), 3))
    coords[:, : d["coords"].shape[1]] = d["coords"]
    cubes, chips, hosts = d["cubes"], d["chips"], d["hosts"]
    fig = go.Figure()
    cube_ids = list(dict.fromkeys(cubes.tolist()))
    groups = [(c, cubes == c) for c in cube_ids] if len(cube_ids) <= 16 else [(None, np.ones(len(cubes), bool))]
    for c, sel in groups:
        label = "chips" if c is None or c < 0 else f"cube {c}"
        colours = [colour(cube_ids.index(v)) for v in cubes[sel]]
        text = [f"chip {ch}<br>slice {tuple(int(v) for v in xyz)}<br>cube {cb}<br>host {h}"
                for ch, xyz, cb, h in zip(chips[sel], d["coords"][sel], cubes[sel], hosts[sel], strict=True)]
        fig.add_trace(go.Scatter3d(x=coords[sel, 0], y=coords[sel, 1], z=coords[sel, 2], mode="markers", name=label,
                                   marker={"size": 5 if len(chips) <= 512 else 3, "color": colours},
                                   hovertext=text, hoverinfo="text"))
    cab = d["cables"]
    a, b, dim = coords[cab["a"]], coords[cab["b"]], cab["dim"]
    step = np.zeros_like(a)
    step[np.arange(len(dim)), dim] = 0.45
    optical = "optical ICI via OCS" if d["summary"]["ocs_wiring"] else "optical ICI (fixed fibers)"
    styles = {"copper": ("#7f7f7f", "copper ICI"), "optical": ("#F58518", optical)}
    for kind, (col, label) in styles.items():
        inner = (cab["kind"] == kind) & ~cab["wrap"]
        wrap = (cab["kind"] == kind) & cab["wrap"]
        if inner.any():
            fig.add_trace(go.Scatter3d(**_segments(a[inner], b[inner]), mode="lines", name=f"{label}: {int(inner.sum())} cables",
                                       line={"color": col, "width": 3 if kind == "optical" else 2}, hoverinfo="skip"))
        if wrap.any():
            p = np.concatenate([a[wrap], b[wrap]])
            q = np.concatenate([a[wrap] + step[wrap], b[wrap] - step[wrap]])
            fig.add_trace(go.Scatter3d(**_segments(p, q), mode="lines", name=f"{label} wraparound: {int(wrap.sum())} cables",
                                       line={"color": col, "width": 3, "dash": "dot"}, hoverinfo="skip"))
            fig.add_trace(go.Scatter3d(**_segments(a[wrap], b[wrap]), mode="lines", visible="legendonly",
                                       name=f"{label} wraparound, full length", line={"color": col, "width": 1},
                                       hoverinfo="skip"))
    fig.update_layout(height=680, margin={"l": 0, "r": 0, "t": 10, "b": 0},
                      legend={"itemsizing": "constant", "orientation": "h", "y": -0.02},
                      scene={"aspectmode": "data", "xaxis_title": "x", "yaxis_title": "y", "zaxis_title": "z",
                             "camera": {"eye": {"x": 1.5, "y": -1.7, "z": 0.9}}})
    return fig


def circuits_frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    return df.rename(columns={"ocs": "OCS", "dim": "dimension", "face_index": "face link", "port_a": "port A",
                              "cube_a": "cube A", "face_a": "face A", "port_b": "port B", "cube_b": "cube B",
                              "face_b": "face B"})


def no_circuits_reason(gen, spec_kind: str, ocs: bool) -> str:
    if gen.ocs is None or not gen.cube_shape:
        return f"{gen.name} pods are statically wired: no OCS."
    if not ocs:
        return "Static wiring: the cubes are joined by fixed fibers in their home arrangement, no circuits are set."
    return "A sub-cube slice lives inside one cube on copper: it needs no OCS circuits."


st.title("Topology")
st.caption("A slice of a pod: its chips and ICI cables (copper inside a cube, optical through the OCS "
           "between cubes), the OCS circuits that close its torus, and its bandwidth figures.")

c1, c2, c3, c4, c5 = st.columns([1.3, 1.2, 0.8, 0.8, 0.8])
gen_id, gen = pick_generation(c1)
default_shape = "4x4x8" if gen.cube_shape else "8x8"
whole = c3.checkbox("Whole pod", value=False, key="whole_pod")
shape_text = c2.text_input("Slice shape", value=default_shape, key=f"shape_{gen_id}", disabled=whole,
                           help="chips along each axis, e.g. 4x4x8 (v4) or 8x16 (v5e)")
with inline_errors():
    shape = None if whole else format_shape(parse_shape(shape_text, gen.dims))
twistable = shape is not None and is_twistable(parse_shape(shape))
ocs = c4.toggle("OCS", value=bool(gen.ocs and gen.cube_shape), key="ocs", disabled=not (gen.ocs and gen.cube_shape),
                help="off: the cubes stay in their home arrangement on fixed fibers (the v4 paper's baseline)")
twistable = twistable and ocs
twisted = c5.checkbox("Twisted", value=False, key="twisted", disabled=not twistable,
                      help="k x k x 2k or k x 2k x 2k slices can be twisted tori (OCS only)") and twistable

with inline_errors():
    data = slice_data(gen_id, shape, twisted, ocs)
    other = slice_data(gen_id, shape, not twisted, ocs) if twistable else None
s = data["summary"]

st.subheader(f"{s['name']}: {s['scope']} {s['shape']}, {s['topology']}")
left, right = st.columns([3, 2])
with right:
    m = [c for _ in range(3) for c in st.columns(2)]
m[0].metric("Chips", f"{s['chips']:,}")
m[1].metric("Cubes", s["cubes"])
m[2].metric("OCS circuits", s["ocs_circuits"])
delta_bis = delta_diam = None
if other is not None:
    o = other["summary"]
    vs = "plain" if twisted else "twisted"
    delta_bis = f"{(s['bisection_bytes_per_s'] / o['bisection_bytes_per_s'] - 1):+.0%} vs {vs}" if o["bisection_bytes_per_s"] else None
    delta_diam = f"{s['diameter_hops'] - o['diameter_hops']:+d} vs {vs}"
m[3].metric("Bisection bandwidth", format_rate(s["bisection_bytes_per_s"]), delta=delta_bis)
m[4].metric("All-reduce bandwidth", format_rate(s["allreduce_bytes_per_s"]))
m[5].metric("Diameter", f"{s['diameter_hops']} hops", delta=delta_diam, delta_color="inverse")

with left:
    if s["chips"] <= DRAW_MAX_CHIPS:
        st.plotly_chart(torus_figure(data), key="torus")
    else:
        st.info(f"{s['chips']:,} chips: the 3-D view draws slices of up to {DRAW_MAX_CHIPS:,} chips.")
with right:
    st.markdown("**Figures** (bisection: links cut by the best halving plane x one-way link bandwidth; "
                "all-reduce: every chip's ICI egress)")
    st.dataframe(pd.DataFrame(summary_rows(s), columns=["figure", "value"]), hide_index=True)

st.subheader("OCS circuits")
if data["circuits"]:
    units = len({r["ocs"] for r in data["circuits"]})
    st.caption(f"{len(data['circuits'])} circuits on {units} OCS units: each joins one cube's '+' face link to the "
               f"'-' face link with the same index of the next cube along that dimension (port 2c is cube c '+', 2c+1 its '-').")
    st.dataframe(circuits_frame(data["circuits"]), hide_index=True, height=300)
else:
    st.info(no_circuits_reason(gen, s["topology"], ocs))
