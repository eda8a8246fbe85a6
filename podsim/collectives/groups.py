"""Collective groups on placed slices: which chips take part, in which rank order.

A group named by slice axes (`x`, `x,y`, `all`, `x:4[:stride]`, `dcn`; podsim.trace.model)
splits a job's chips into *instances* (e.g. every x-ring of the slice is one instance of
group `x`) of `p` members each. Members are ranked over a small *grid* — one grid axis per
named slice axis, plus `dcn` for the slices of a multislice job (and `site` for the data
centres they span, joined by the WAN) and `node` for the GPU nodes
of a switched slice — with the first grid axis varying fastest. Algorithms work on the grid:
rings along one grid axis, exchanges between ranks, hierarchies whose outer axis crosses the
data-centre network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from podsim._arrays import unique
from podsim.errors import PodsimError
from podsim.topology.slices import SliceView
from podsim.trace.model import DCN_AXIS, SLICE_AXES, AxisGroup, format_group, parse_group


@dataclass(frozen=True, eq=False)
class GroupLayout:
    """The instances of one group on one job's slices, ranked over a grid."""

    members: np.ndarray  # (instances, p) global chip ids; column r is rank r
    grid: tuple[int, ...]  # sizes of the grid axes; rank = ravel_multi_index(idx, grid, order="F")
    axes: tuple[str, ...]  # name of each grid axis: x, y, z, dcn or node
    dcn: tuple[bool, ...]  # the axis crosses the data-centre network (slices or GPU nodes)
    name: str = ""
    # Per slice axis (x, y, z): the chips one instance spans along it (0: not in the group).
    span: tuple[int, ...] = (0, 0, 0)
    slices: int = 1  # slices of the job the layout is on (a group without dcn has instances in each)
    # Per grid axis: its ranks lie on an open line of ICI links, no wraparound closing them (a
    # mesh axis, or a block of a longer axis); rings along it run folded (podsim.collectives.patterns).
    line: tuple[bool, ...] = ()
    cache: dict = field(default_factory=dict, repr=False)

    @property
    def p(self) -> int:
        return self.members.shape[1]

    @property
    def instances(self) -> int:
        return self.members.shape[0]

    @property
    def ici_axes(self) -> tuple[int, ...]:
        """Grid axes inside a slice (ICI), in grid order."""
        return tuple(j for j, d in enumerate(self.dcn) if not d)

    @property
    def dcn_axes(self) -> tuple[int, ...]:
        return tuple(j for j, d in enumerate(self.dcn) if d)

    def rank_index(self) -> np.ndarray:
        """(p, len(grid)) grid index of every rank."""
        if "rank_index" not in self.cache:
            idx = np.unravel_index(np.arange(self.p), self.grid, order="F")
            self.cache["rank_index"] = np.stack(idx, axis=1).astype(np.int64)
        return self.cache["rank_index"]

    def rank_of(self, idx: np.ndarray) -> np.ndarray:
        return np.ravel_multi_index(tuple(np.asarray(idx).T), self.grid, order="F")


SITE_AXIS = "site"
"""Grid axis of the sites (data centres) a multislice job spans; its rings cross the WAN."""

SLICE_GRID_AXES = (DCN_AXIS, SITE_AXIS)
"""Grid axes that index slices (outermost: rank = rank in the slice + p_slice x slice)."""


def slice_sites(views: Sequence[SliceView]) -> int:
    """How many sites the slices span (1 without a WAN). Several sites must hold equal numbers
    of the slices in site-major order, as `place_slices` puts them."""
    fab = views[0].fabric
    if fab.wan.shape[0] <= 1:
        return 1
    first = np.array([v.chips[0] for v in views])
    site = fab.site_of_leaf[fab.leaf_of_nic[fab.nic_of_chip[first] - fab.first_nic]]
    uniq = unique(site)
    if len(uniq) == 1:
        return 1
    per = len(views) // len(uniq)
    if len(views) % len(uniq) or not np.array_equal(np.searchsorted(uniq, site), np.repeat(np.arange(len(uniq)), per)):
        raise PodsimError("the slices of a job that spans sites must split evenly over them, site by site")
    return len(uniq)


def _pad3(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape) + (1,) * (3 - len(shape))


def group_layout(views: Sequence[SliceView], group: str | Sequence[str | AxisGroup]) -> GroupLayout:
    """Rank the chips of `views` (a job's slices, all of one shape) into instances of `group`.

    Slice axes the slice does not have count as length 1 (a 2-D slice is an X x Y x 1 torus),
    so `all` works on any slice. A sub-axis block `x:S[:T]` takes S chips spaced T apart; S x T
    must divide the axis length.
    """
    parsed = parse_group(group)
    views = list(views)
    if not views:
        raise PodsimError("a collective needs at least one slice")
    shape = _pad3(views[0].shape)
    if any(_pad3(v.shape) != shape for v in views):
        shapes = sorted({"x".join(map(str, v.shape)) for v in views})
        raise PodsimError(f"the slices of one job must have one shape; got {', '.join(shapes)}")
    by_axis = {g.axis: g for g in parsed}
    n_slices = len(views)
    gpu = views[0].slice.spec.kind == "gpu"

    # Per slice axis: instance key and rank index of every local chip.
    coords = np.zeros((views[0].n, 3), np.int64)
    coords[:, : views[0].coords.shape[1]] = views[0].coords
    inst_keys, inst_sizes, rank_idx, grid, names, dcn_flags, span, line = [], [], [], [], [], [], [], []
    wrap = tuple(views[0].slice.wrap) + (False,) * (3 - len(views[0].slice.wrap))
    for a, name in enumerate(SLICE_AXES):
        n = shape[a]
        c = coords[:, a]
        g = by_axis.get(name)
        if g is None:
            inst_keys.append(c)
            inst_sizes.append(n)
            span.append(0)
            continue
        size = n if g.size is None else g.size
        width = size * g.stride
        if width > n or n % width:
            raise PodsimError(f"group {g} needs {width} chips along {name} to divide its length; the slice has {n} along {name}")
        inst_keys.append((c // width) * g.stride + c % g.stride)
        inst_sizes.append((n // width) * g.stride)
        rank_idx.append((c % width) // g.stride)
        grid.append(size)
        names.append(name)
        dcn_flags.append(False)
        span.append(width)
        line.append(not gpu and g.stride == 1 and not (wrap[a] and width == n))

    # Length-1 grid axes carry no traffic: drop them (their rank index is always 0).
    live = [j for j, g in enumerate(grid) if g > 1]
    rank_idx = [rank_idx[j] for j in live]
    grid, names, dcn_flags = [grid[j] for j in live], [names[j] for j in live], [dcn_flags[j] for j in live]
    line = [line[j] for j in live]
    if gpu and names == ["x"]:
        # A switched slice: split the GPUs of one instance into (GPU in node, node).
        per_node = int(views[0].fabric.layout.chips_per_host)
        g = by_axis["x"]
        if g.stride == 1 and grid[0] > per_node and grid[0] % per_node == 0 and span[0] % per_node == 0:
            r = rank_idx[0]
            rank_idx = [r % per_node, r // per_node]
            grid = [per_node, grid[0] // per_node]
            names = ["x", "node"]
            dcn_flags = [False, True]
            line = [False, False]

    inst_local = np.ravel_multi_index(tuple(inst_keys), tuple(inst_sizes))
    n_inst_local = math.prod(inst_sizes)
    if DCN_AXIS in by_axis:
        g = by_axis[DCN_AXIS]
        if g.size not in (None, n_slices) or g.stride != 1:
            raise PodsimError(f"group axis {g} is not supported; dcn spans all {n_slices} slice(s) of the job")
    local_grid = grid[: len(rank_idx)]
    if rank_idx:
        local_rank = np.ravel_multi_index(tuple(rank_idx), tuple(local_grid), order="F")
    else:
        local_rank = np.zeros(views[0].n, np.int64)
    p_local = math.prod(local_grid)
    if DCN_AXIS in by_axis and n_slices > 1:
        sites = slice_sites(views)
        if sites > 1:  # slices site-major: (slice within its site, site), the site axis crosses the WAN
            grid += [n_slices // sites, sites]
            names += [DCN_AXIS, SITE_AXIS]
            dcn_flags += [True, True]
            line += [False, False]
        else:
            grid.append(n_slices)
            names.append(DCN_AXIS)
            dcn_flags.append(True)
            line.append(False)
    live = [j for j, g in enumerate(grid) if g > 1 or j < len(rank_idx)]
    grid, names, dcn_flags = [grid[j] for j in live], [names[j] for j in live], [dcn_flags[j] for j in live]
    line = [line[j] for j in live]
    p = p_local * (n_slices if DCN_AXIS in by_axis else 1)
    n_inst = n_inst_local * (1 if DCN_AXIS in by_axis else n_slices)
    members = np.empty((n_inst, p), np.int64)
    for s, view in enumerate(views):
        if DCN_AXIS in by_axis:
            members[inst_local, local_rank + s * p_local] = view.chips
        else:
            members[inst_local + s * n_inst_local, local_rank] = view.chips
    return GroupLayout(members, tuple(grid) or (1,), tuple(names) or ("x",), tuple(dcn_flags) or (False,),
                       name=format_group(parsed), span=tuple(span), slices=n_slices, line=tuple(line) or (False,))
