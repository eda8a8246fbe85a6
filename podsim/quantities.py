"""Pydantic field types that carry units: a config field typed `Duration` takes '3h', '90s' or
seconds, `Rate` takes '2/h', '48/d', '1/w' or arrivals per hour, `Fraction` takes '99.5%' or 0.995.
Each parses once, at validation, into podsim's base units (podsim.units) and says what is allowed
when it cannot. The scenario schema and the library's config models both use them."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

from podsim.units import duration_s, fraction, rate_per_h

Duration = Annotated[float, BeforeValidator(duration_s)]
Rate = Annotated[float, BeforeValidator(rate_per_h)]
Fraction = Annotated[float, BeforeValidator(fraction)]
