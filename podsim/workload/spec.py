"""`--synthetic SPEC`: a synthetic job stream written as a YAML file or as KEY=VALUE pairs.

A YAML (or JSON) file holds the fields of `SyntheticSpec` (nested `arrival`, `duration`,
`steps`). The short form is comma-separated KEY=VALUE pairs; lists inside a value use `;`:

    jobs=500,rate=6/h,duration=lognormal,median=3h,sigma=1,max=7d,priorities=0:3;2:1
    jobs=200,gaps=10min;1h,duration=fixed,median=2h,mix=4x4x4:2;8x8x8:1;4x4x8_T:1
    jobs=100,rate=2/h,models=gpt3-175b:1;llama2-70b:1,steps=20000,steps_sigma=0.3

keys: jobs; rate (per hour, or with /h, /d, /w: podsim.units.rate_per_h); gaps (durations, cycled); duration (lognormal,
exponential, fixed, uniform) with median, sigma, mean, low, high, max (durations); mix (`v4`,
the TPU v4 paper's popularity table, the default, or SHAPE[_T|_NT]:WEIGHT;...); priorities
(PRIORITY:WEIGHT;...); models (PRESET:WEIGHT;...) with steps (median), steps_sigma,
steps_kind (lognormal, fixed, uniform), steps_low, steps_high; slices (SLICES:WEIGHT;...,
multislice jobs: e.g. slices=1:3;4:1) with span_sites (true/false).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from podsim.errors import PodsimError, first_error
from podsim.files import read_structured
from podsim.units import parse_duration, rate_per_h
from podsim.workload.popularity import V4_SLICE_POPULARITY
from podsim.workload.synthetic import SyntheticSpec

KEYS = ("jobs", "rate", "gaps", "duration", "median", "sigma", "mean", "low", "high", "max", "mix",
        "priorities", "models", "steps", "steps_sigma", "steps_kind", "steps_low", "steps_high", "slices", "span_sites")


def _pairs(value: str, key: str, example: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in value.split(";"):
        name, sep, weight = item.rpartition(":")
        if not sep or not name.strip() or not weight.strip():
            raise PodsimError(f"--synthetic {key}={value!r}: use NAME:WEIGHT;NAME:WEIGHT (e.g. {example})")
        if name.strip() in out:
            raise PodsimError(f"--synthetic {key}={value!r}: {name.strip()!r} is given twice; the last would silently win")
        out[name.strip()] = weight.strip()
    return out


def _number(text: str, key: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise PodsimError(f"--synthetic {key}={text!r}: a number is expected") from None
    if not math.isfinite(value):
        raise PodsimError(f"--synthetic {key}={text!r}: a finite number is expected")
    return value


def _whole(text: str, key: str) -> int:
    """A whole number (2.5 is refused, not truncated to 2)."""
    value = _number(text, key)
    if not value.is_integer():
        raise PodsimError(f"--synthetic {key}={text!r}: a whole number is expected")
    return int(value)


def _rate(text: str) -> float:
    try:
        return rate_per_h(text)
    except PodsimError as exc:
        raise PodsimError(f"--synthetic rate={text!r}: {exc}") from None


def parse_synthetic_pairs(text: str) -> dict[str, Any]:
    """The KEY=VALUE form as a nested dict of SyntheticSpec fields (validated by the caller)."""
    kv: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not value.strip():
            raise PodsimError(f"--synthetic {part!r} is not KEY=VALUE; keys: {', '.join(KEYS)}")
        if key not in KEYS:
            raise PodsimError(f"--synthetic key {key!r} is not known; keys: {', '.join(KEYS)}")
        if key in kv:
            raise PodsimError(f"--synthetic key {key!r} is given twice ({key}={kv[key]}, {key}={value.strip()}); "
                              "the last would silently win")
        kv[key] = value.strip()
    spec: dict[str, Any] = {}
    if "jobs" in kv:
        spec["jobs"] = _whole(kv["jobs"], "jobs")
    if "rate" in kv and "gaps" in kv:
        raise PodsimError("--synthetic: give rate (Poisson arrivals) or gaps (given inter-arrival gaps), not both")
    if "rate" in kv:
        spec["arrival"] = {"kind": "poisson", "rate_per_h": _rate(kv["rate"])}
    if "gaps" in kv:
        spec["arrival"] = {"kind": "given", "gaps_s": [parse_duration(g) for g in kv["gaps"].split(";")]}
    duration: dict[str, Any] = {}
    if "duration" in kv:
        duration["kind"] = kv["duration"]
    for key, field in (("median", "median_s"), ("mean", "mean_s"), ("low", "low_s"), ("high", "high_s"), ("max", "max_s")):
        if key in kv:
            duration[field] = parse_duration(kv[key])
    if "sigma" in kv:
        duration["sigma"] = _number(kv["sigma"], "sigma")
    if duration:
        spec["duration"] = duration
    if "mix" in kv:
        if kv["mix"].lower() == "v4":
            spec["slice_mix"] = dict(V4_SLICE_POPULARITY)
        else:
            spec["slice_mix"] = {k: _number(v, "mix") for k, v in _pairs(kv["mix"], "mix", "4x4x4:2;4x4x8_T:1").items()}
    if "priorities" in kv:
        pairs = _pairs(kv["priorities"], "priorities", "0:3;2:1")
        spec["priorities"] = {_whole(k, "priorities"): _number(v, "priorities") for k, v in pairs.items()}
    if "slices" in kv:
        pairs = _pairs(kv["slices"], "slices", "1:3;4:1")
        spec["slices"] = {_whole(k, "slices"): _number(v, "slices") for k, v in pairs.items()}
    if "span_sites" in kv:
        spec["span_sites"] = kv["span_sites"]
    if "models" in kv:
        spec["models"] = {k: _number(v, "models") for k, v in _pairs(kv["models"], "models", "gpt3-175b:1").items()}
    steps: dict[str, Any] = {}
    for key, field in (("steps", "median"), ("steps_sigma", "sigma"), ("steps_low", "low"), ("steps_high", "high")):
        if key in kv:
            steps[field] = _number(kv[key], key)
    if "steps_kind" in kv:
        steps["kind"] = kv["steps_kind"]
    if steps:
        if "models" not in spec:
            raise PodsimError("--synthetic: steps need models=PRESET:WEIGHT (which model's step time to use)")
        spec["steps"] = steps
    return spec


def _validated(raw: Any, source: str) -> SyntheticSpec:
    if not isinstance(raw, dict):
        raise PodsimError(f"{source}: expected a mapping of synthetic job-stream fields ({', '.join(SyntheticSpec.model_fields)})")
    try:
        return SyntheticSpec.model_validate(raw)
    except ValidationError as exc:
        where, msg = first_error(exc, "spec")
        raise PodsimError(f"{source} field '{where}': {msg}") from None


def parse_synthetic(spec: str, generation: str) -> SyntheticSpec:
    """A SyntheticSpec for `generation` from a YAML/JSON file path or the KEY=VALUE form."""
    text = spec.strip()
    path = Path(text)
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        raw = read_structured(path, "synthetic job-stream")
        source = str(path)
    else:
        if not text:
            raise PodsimError("--synthetic is empty; give KEY=VALUE pairs (e.g. jobs=500,rate=6/h) or a YAML file")
        raw = parse_synthetic_pairs(text)
        source = "--synthetic"
    if isinstance(raw, dict):
        raw = {**raw, "generation": generation}
    return _validated(raw, source)
