"""docs/deployment.md's ``[deltaguard]`` reference is the provider info's ``config`` section."""

from __future__ import annotations

from benchmarks.config_reference import DOC, current, render


def test_configuration_reference_matches_provider_info() -> None:
    assert current(DOC.read_text()) == render(), (
        "docs/deployment.md is out of date: run .venv/bin/python benchmarks/config_reference.py"
    )


def test_every_option_is_in_the_reference() -> None:
    from deltaguard.config import OPTIONS

    reference = current(DOC.read_text())
    for name in OPTIONS:
        assert f"| `{name}` |" in reference
