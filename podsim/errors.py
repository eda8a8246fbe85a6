"""The two kinds of error: bad input (PodsimError: one line that names the field, the value
and what is allowed; exit 2) and a broken invariant inside podsim (InternalError: a bug to
report, never the user's fault; exit 1)."""


class PodsimError(ValueError):
    """Bad input. The CLI prints the message on one line and exits with code 2."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class PodsimWarning(UserWarning):
    """A result is fine but costly or partial in a way the user should hear about before
    waiting (a step podsim cannot fold); the CLI prints it as one `warning:` line."""


class InternalError(RuntimeError):
    """A check of podsim's own output failed (a solver or engine bug, not bad input). The CLI
    prints "internal error, please report" with the details and exits with code 1."""


def first_error(exc, default_loc: str = "value") -> tuple[str, str]:
    """(dotted field location, message) of a pydantic ValidationError's first error, with
    pydantic's 'Value error, ' prefix dropped and 'Extra inputs are not permitted' said plainly."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or default_loc
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    return where, msg


def first_duplicate(items):
    """The first item that appears a second time (in order), or None if all are distinct."""
    seen = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None
