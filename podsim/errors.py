"""User-facing errors: one line that names the field, the value, and what is allowed."""


class PodsimError(ValueError):
    """Bad input. The CLI prints the message on one line and exits with code 2."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
