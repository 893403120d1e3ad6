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
    # the API reference is generated from the docstrings: a parameter's own words appear
    api = (tmp_path / "html" / "api" / "operators.html").read_text()
    assert "target_partition_values" in api and "which is what lets two" in api
    # the benchmark charts are shown, and copied with the site
    figures = (tmp_path / "html" / "benchmarks.html").read_text()
    for chart in ("orchestration_sweep.png", "simulation_bars.png", "orchestration_spark_gantt.png"):
        assert chart in figures
        assert (tmp_path / "html" / "_images" / chart).exists()


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt install chromium)")
def test_pages_fit_the_window(tmp_path: Path) -> None:
    """Long tables and lines wrap (or scroll inside their own box): no page is wider than the window."""
    from playwright.sync_api import sync_playwright
    from sphinx.cmd.build import build_main

    site = tmp_path / "html"
    assert build_main(["-q", "-E", "-b", "html", str(DOCS), str(site)]) == 0
    pages = ["configuration.html", "benchmarks.html", "deployment.html"]
    width = 1280

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            for name in pages:
                page.goto((site / name).as_uri())
                assert page.evaluate("document.documentElement.scrollWidth") <= width, name
        finally:
            browser.close()


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

    from deltaguard.engines.fencing import STORAGE_COORDINATION, deltars_coordination

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


def test_the_readme_is_short_and_shows_its_chart_on_the_first_screen() -> None:
    """A user's first page: at most 220 lines and 2,500 words, the headline chart in its first 30 lines."""
    text = (REPO / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 220 and len(text.split()) <= 2500
    first_screen = "\n".join(lines[:30])
    chart = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", first_screen)
    assert chart is not None and (REPO / chart.group(1)).is_file()
    assert "make demo" in first_screen + "\n".join(lines[30:40]) and "make test" in "\n".join(lines[:40])
