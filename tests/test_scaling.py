"""The multislice weak-scaling study (issue 13 item 3)."""

from __future__ import annotations

import json

import pytest

from podsim.cli import main
from podsim.errors import PodsimError
from podsim.study import StepStudy
from podsim.study.scaling import COLUMNS, TIER_COLUMNS, scaling_study

SMALL = {"n_layers": 2}


def base(plan: str = "fsdp=16,tensor=4", **kw) -> StepStudy:
    return StepStudy("tpu-v4", "4x4x4", model="llama2-70b", plan=plan, model_overrides=SMALL, **kw)


def test_scaling_study_weak_scaling():
    s = scaling_study(base(), [4, 1, 2], 16)
    assert set(s) == {*COLUMNS, "tiers"} and s["slices"] == [1, 2, 4] and s["chips"] == [64, 128, 256]
    assert set(s["tiers"]) == set(TIER_COLUMNS) and {n for n in s["tiers"]["slices"]} == {1, 2, 4}
    assert s["global_batch"] == [16, 32, 64]
    assert s["parallel_efficiency"][0] == 1.0 and s["dcn_busy_s"][0] == 0.0
    assert all(b > 0 for b in s["dcn_busy_s"][1:])
    # the same per-slice work: the step can only grow by what the DCN exposes
    for i in (1, 2):
        assert s["step_time_s"][i] >= s["step_time_s"][0] * (1 - 1e-9)
        assert s["parallel_efficiency"][i] == pytest.approx(s["step_time_s"][0] / s["step_time_s"][i])
    assert s["mfu"][2] <= s["mfu"][0] * (1 + 1e-9)


def test_scaling_study_bad_input():
    with pytest.raises(PodsimError, match="leave dcn out"):
        scaling_study(base("fsdp=16,tensor=4,dcn=2"), [1, 2], 16)
    with pytest.raises(PodsimError, match="give whole numbers >= 1"):
        scaling_study(base(), [0, 2], 16)


def test_cli_scaling_json_and_plot(tmp_path, capsys, monkeypatch):
    """`--plot` draws with the report's scaling_figure (the CLI keeps no figure code of its own)."""
    import podsim.cli.scaling as cli_scaling
    from podsim.report import figures

    assert not hasattr(cli_scaling, "scaling_figure")
    real, drawn = figures.scaling_figure, []
    monkeypatch.setattr(figures, "scaling_figure", lambda study, title: drawn.append(study["slices"]) or real(study, title))
    plot = tmp_path / "s.html"
    try:
        main(["scaling", "llama2-70b", "--slice", "4x4x4", "-p", "fsdp=16,tensor=4", "--slices", "1,2",
              "--batch-per-slice", "16", "--set", "n_layers=2", "--plot", str(plot), "--json"])
    except SystemExit as exc:
        assert not exc.code
    out = json.loads(capsys.readouterr().out)
    assert out["slices"] == [1, 2] and drawn == [[1, 2]]
    html = plot.read_text()
    assert all(f'"name":"{t}"' in html for t in ("step time (s)", "DCN exposed (s)", "parallel efficiency", "MFU"))
