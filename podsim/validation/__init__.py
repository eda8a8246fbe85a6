"""The validation table: published measured TPU step times next to podsim's prediction, each row
a step study (podsim.study) run on the engine. It sits above the engine: nothing below imports it.
Rows, sources and error rules: table.py and docs/validation.md."""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.validation.table import (
        CONSTANTS,
        ROWS,
        SERIES,
        SERIES_TOLERANCE,
        UPPER_BOUND_BAND,
        Row,
        Series,
        calibrate,
        error,
        fitting_study,
        fractions,
        predict,
        row_study,
        row_trace,
        run_table,
        series_table,
        summarise,
    )

__all__ = ["CONSTANTS", "ROWS", "SERIES", "SERIES_TOLERANCE", "UPPER_BOUND_BAND", "Row", "Series", "calibrate", "error",
           "fitting_study", "fractions", "predict", "row_study", "row_trace", "run_table", "series_table", "summarise"]

lazy_face(__name__)
