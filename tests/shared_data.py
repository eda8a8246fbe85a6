"""Where the shared data folder (`../shared/data` beside the project) is, from any worktree."""

from pathlib import Path


def shared_data(*parts: str) -> Path:
    """The path under the nearest ancestor's `shared/data/` (the project may sit in a worktree
    one level deeper than the main checkout); the first candidate if none exists."""
    here = Path(__file__).resolve().parent
    candidates = [p / "shared" / "data" / Path(*parts) for p in here.parents]
    return next((c for c in candidates if c.exists()), candidates[1])
