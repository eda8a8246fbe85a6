"""HTML capacity-planning reports of scenario runs (jinja2 + plotly, viewable offline).

    from podsim.report import render_report
    html = render_report(result)                      # one RunResult: the full plan
    html = render_report([a, b], labels=["OCS", "static"])   # side by side
"""

from podsim.report.render import render_report

__all__ = ["render_report"]
