"""The documentation site builds with warnings as errors: every link between pages, every include of the
changelog or the configuration reference and every snippet from the example DAGs resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def test_the_docs_build_without_warnings(tmp_path: Path) -> None:
    from sphinx.cmd.build import build_main

    # -W: any warning fails the build (a missing page, heading, include file or snippet marker)
    code = build_main(["-q", "-W", "--keep-going", "-E", "-b", "html", str(DOCS), str(tmp_path / "html")])
    assert code == 0, "sphinx-build reported warnings: run `make docs` to see them"
    page = (tmp_path / "html" / "howto" / "dml.html").read_text()
    assert "DeltaMergeOperator" in page  # the snippet was included, not an empty block


def test_every_snippet_marker_is_in_its_example_dag() -> None:
    """Each ``literalinclude`` names markers that open and close once in the file it includes."""
    include = re.compile(
        r"```\{literalinclude\} (\S+)\n(?:.*\n)*?:start-after: \"(.*)\"\n:end-before: \"(.*)\""
    )
    found = 0
    for page in DOCS.rglob("*.md"):
        for path, start, end in include.findall(page.read_text()):
            source = (page.parent / path).resolve().read_text()
            assert source.count(start) == 1 and source.count(end) == 1, (page.name, start)
            assert source.index(start) < source.index(end)
            found += 1
    assert found >= 8


def _options() -> dict[str, dict]:
    from deltaguard.get_provider_info import get_provider_info

    return get_provider_info()["config"]["deltaguard"]["options"]


@pytest.mark.parametrize("option", sorted(_options()))
def test_the_readme_states_each_options_default(option: str) -> None:
    default = _options()[option]["default"]
    row = re.search(rf"^\| `{option}` \| (.*?) \|", (REPO / "README.md").read_text(), re.M)
    assert row is not None, f"README's configuration table has no row for {option}"
    assert row.group(1) == (f"`{default}`" if default else "empty")


def test_the_connection_example_keeps_the_stores_commit_guarantee() -> None:
    """The documented ``delta`` connection must not quietly make every write on its tables run alone."""
    import json

    from deltaguard.engines.commit_coordination import STORAGE_COORDINATION, deltars_coordination

    page = (DOCS / "connections.md").read_text()
    example = re.search(r"AIRFLOW_CONN_LAKE='(\{.*?\})'", page, re.S)
    assert example is not None
    conn = json.loads(example.group(1))
    options = conn["extra"]["storage_options"]
    assert deltars_coordination(conn["host"], options) == STORAGE_COORDINATION


def test_the_operators_deferrable_docstring_says_what_the_config_reads() -> None:
    """The ``deferrable`` argument's docstring names the sources :func:`default_deferrable` reads, in its
    order, and says that ``airflow.cfg``'s ``[operators] default_deferrable`` is not one of them."""
    from deltaguard.operators.base import DeltaWriteOperator

    doc = DeltaWriteOperator.__doc__ or ""
    text = " ".join(doc.split(":param deferrable:", 1)[1].split(":param ", 1)[0].split())
    order = [
        "AIRFLOW__DELTAGUARD__DEFERRABLE",
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE",
        "[deltaguard] deferrable",
    ]
    positions = [text.find(name) for name in order]
    assert -1 not in positions and positions == sorted(positions), text
    assert "is not read" in text
