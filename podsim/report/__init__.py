"""HTML capacity-planning reports of scenario runs (jinja2 + plotly, viewable offline).

    from podsim.report import render_report
    html = render_report(result)                      # one RunResult: the full plan
    html = render_report([a, b], labels=["OCS", "static"])   # side by side
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.report.render import render_report

__all__ = ["render_report"]

lazy_face(__name__)
