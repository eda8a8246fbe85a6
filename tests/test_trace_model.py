"""The step-trace DAG model: groups, validation, topological order."""

import pytest

from podsim.errors import PodsimError
from podsim.trace import StepTrace
from podsim.trace.model import AxisGroup, Collective, Compute, parse_group


def test_parse_group_forms():
    assert parse_group("x,y") == (AxisGroup("x"), AxisGroup("y"))
    assert parse_group("all") == (AxisGroup("x"), AxisGroup("y"), AxisGroup("z"))
    assert parse_group(["z", "x:4:2"]) == (AxisGroup("x", 4, 2), AxisGroup("z"))
    with pytest.raises(PodsimError, match="names an axis twice"):
        parse_group("x,x")
    with pytest.raises(PodsimError, match="not understood"):
        parse_group("w")


def test_topological_order_and_errors():
    a = Compute("a", duration_s=1.0)
    b = Collective("b", "all_reduce", 1024, parse_group("x"), deps=("a",))
    c = Compute("c", flops=1e12, deps=("b", "a"))
    order = [op.id for op in StepTrace((c, b, a)).topological_order()]
    assert order == ["a", "b", "c"]
    with pytest.raises(PodsimError, match="cycle through op"):
        StepTrace((Compute("p", deps=("q",)), Compute("q", deps=("p",)))).topological_order()
    with pytest.raises(PodsimError, match="depends on 'zz'"):
        StepTrace((Compute("p", deps=("zz",)),)).validate()
    with pytest.raises(PodsimError, match="bytes -5 is negative"):
        StepTrace((Collective("n", "all_gather", -5, parse_group("x")),)).validate()
    with pytest.raises(PodsimError, match="group axis 'z' is not an axis"):
        StepTrace((Collective("n", "all_gather", 5, parse_group("z")),)).validate(axes=("x", "y"))
