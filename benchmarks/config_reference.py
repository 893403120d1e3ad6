"""Write the ``[deltaguard]`` configuration reference of docs/deployment.md from the provider info.

Run ``.venv/bin/python benchmarks/config_reference.py`` after changing an option in
``deltaguard.config.OPTIONS``; ``tests/test_deployment_doc.py`` fails while the document and the provider
info disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "deployment.md"
BEGIN = "<!-- config-reference:begin (benchmarks/config_reference.py writes this part) -->"
END = "<!-- config-reference:end -->"


def render() -> str:
    """The reference as a Markdown table: one row per option of ``get_provider_info()["config"]``."""
    from deltaguard.get_provider_info import get_provider_info

    section = get_provider_info()["config"]["deltaguard"]
    lines = [
        "| Option | Type | Default | Sensitive | Environment variable | Description |",
        "|---|---|---|---|---|---|",
    ]
    for name, option in section["options"].items():
        default = option["default"]
        description = " ".join(str(option["description"]).split()).replace("|", "\\|")
        lines.append(
            f"| `{name}` | {option['type']} | {f'`{default}`' if default else '(empty)'} | "
            f"{'yes' if option.get('sensitive') else 'no'} | `AIRFLOW__DELTAGUARD__{name.upper()}` | "
            f"{description} |"
        )
    return "\n".join(lines)


def current(doc: str) -> str:
    """The reference as the document has it now (between the markers)."""
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    return doc[start:end].strip("\n")


def main() -> int:
    doc = DOC.read_text()
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    DOC.write_text(f"{doc[:start]}\n{render()}\n{doc[end:]}")
    print(f"wrote the [deltaguard] reference into {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
