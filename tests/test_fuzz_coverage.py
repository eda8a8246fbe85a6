"""The fuzz tier's reach, in the quick tier (the tier itself is slow): every verb has a
generator in tests/test_fuzz_tier.py and every option of every verb is given by one, so a new
command or option is fuzzed from the day it lands."""

from __future__ import annotations

import test_fuzz_tier


def _commands():
    """(name, click command) of every leaf command: sub-commands of `podsim trace` included."""
    import typer

    from podsim.cli import COMMANDS, app

    group = typer.main.get_group(app)
    for name in COMMANDS:
        cmd = group.get_command(None, name)
        subs = getattr(cmd, "commands", None)
        yield from ((f"{name} {s}", c) for s, c in subs.items()) if subs else [(name, cmd)]


def test_the_fuzz_tier_covers_every_verb_and_option():
    """A new command or option reaches the generators: each verb has one, and each option of it
    is given by some generator (by any of its names)."""
    import inspect

    source = inspect.getsource(test_fuzz_tier)
    missing = []
    for name, cmd in _commands():
        assert name in test_fuzz_tier.VERBS, f"no fuzz generator for podsim {name}: add one to tests/test_fuzz_tier.py's VERBS"
        for p in cmd.params:
            if p.param_type_name == "option" and "--help" not in p.opts:
                if not any(f'"{o}"' in source for o in (*p.opts, *p.secondary_opts)):
                    missing.append(f"{name} {max(p.opts, key=len)}")
    assert not missing, f"options no generator gives (add each to its verb's g_* in tests/test_fuzz_tier.py): {missing}"
