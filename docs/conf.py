"""Sphinx configuration of the deltaguard documentation (``make docs``; ``tests/test_docs.py`` builds it
with warnings as errors). Markdown pages are read by myst-parser; snippets are included from the tested
example DAGs in ``dags_examples/`` between ``# [START name]`` / ``# [END name]`` markers, as Airflow's own
provider docs include theirs."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks.config_reference, for the configuration page

# autodoc imports the operators, and so Airflow, which writes an airflow.cfg into AIRFLOW_HOME (~/airflow
# unless set): a build must not create one in the reader's home
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="deltaguard-docs-airflow-"))

from deltaguard import __version__  # noqa: E402

project = "deltaguard"
author = "deltaguard contributors"
copyright = "2026, deltaguard contributors"
version = release = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated/README.md"]
# `[text](#a-heading)` links between and within the Markdown pages resolve to headings up to this depth
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
# the API reference: reST docstrings with :param: fields, signatures with their type hints
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"undoc-members": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = False
# furo: maintained, light and dark (following the reader's system setting, with a toggle), a collapsible
# sidebar. Airflow's own sphinx-airflow-theme hard-codes Airflow's site header (its logo, links and event
# banner), which would present this provider as apache.org's.
html_theme = "furo"
html_theme_options = {
    "source_repository": "https://github.com/deltaguard/airflow-provider-deltaguard/",
    "source_branch": "main",
    "source_directory": "docs/",
    "sidebar_hide_name": False,
}
html_title = f"deltaguard {release}"
html_static_path = ["_static"]
html_css_files = ["wrap.css"]
# no network while building: nothing is fetched
intersphinx_mapping: dict[str, tuple[str, None]] = {}
# benchmarks.md jumps from its title to third-level headings; that is style, not a broken link or include
suppress_warnings = ["myst.header"]
