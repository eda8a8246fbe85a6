"""Training-step traces: the op DAG model (model.py), and later generators and importers."""

from podsim.trace.model import (
    COLLECTIVE_KINDS,
    AxisGroup,
    Collective,
    Compute,
    Op,
    SendRecv,
    StepTrace,
    format_group,
    parse_group,
)

__all__ = ["COLLECTIVE_KINDS", "AxisGroup", "Collective", "Compute", "Op", "SendRecv", "StepTrace", "format_group", "parse_group"]
