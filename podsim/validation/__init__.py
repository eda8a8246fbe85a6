"""The validation table: published measured TPU step times next to podsim's prediction, each row
a step study (podsim.study) run on the engine. It sits above the engine: nothing below imports it.
Rows, sources and error rules: table.py and docs/validation.md."""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.validation.table import ROWS, SERIES, run_table, series_table

__all__ = ["ROWS", "SERIES", "run_table", "series_table"]

lazy_face(__name__)
