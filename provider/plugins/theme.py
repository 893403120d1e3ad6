"""The pages take Airflow's brand colours from ``[api] theme`` (Airflow 3.2+), read on every page.

Airflow's UI is themed through a JSON of Chakra UI tokens; its ``tokens.colors.brand`` scale (``50`` to
``950``) is the only part with a documented meaning, so the pages use it for their header, links and
buttons and keep their own neutral palette otherwise. Values other than plain colour functions are ignored,
since they are written into a ``<style>`` element.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: a colour value safe to place in CSS: oklch(), rgb(), hsl() with numbers, or a hex colour
_COLOUR = re.compile(r"^(?:(?:oklch|rgb|rgba|hsl|hsla)\([0-9.,%\s/-]+\)|#[0-9a-fA-F]{3,8})$")
#: which shade of the brand scale each page element takes
_SHADES = {"header": "800", "header_link": "100", "accent": "700"}


def brand_colours(theme_json: str | None) -> dict[str, str]:
    """The header, header link and accent colours of a ``[api] theme`` value (``{}`` when it names none).

    :param theme_json: the option's text, or ``None`` when unset.
    """
    if not theme_json or not theme_json.strip():
        return {}
    try:
        theme: Any = json.loads(theme_json)
    except json.JSONDecodeError:
        return {}
    brand = _dig(theme, ("tokens", "colors", "brand"))
    if not isinstance(brand, Mapping):
        return {}
    found: dict[str, str] = {}
    for role, shade in _SHADES.items():
        entry = brand.get(shade)
        value = entry.get("value") if isinstance(entry, Mapping) else None
        if isinstance(value, str) and _COLOUR.match(value.strip()):
            found[role] = value.strip()
    return found


def _dig(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def theme_css() -> str:
    """CSS overriding the pages' header and accent with the configured brand colours (or nothing)."""
    from airflow.sdk import conf

    colours = brand_colours(conf.get("api", "theme", fallback=None))
    rules = []
    if "header" in colours:
        rules.append(f"header{{background:{colours['header']}}}")
    if "header_link" in colours:
        rules.append(f"header a{{color:{colours['header_link']}}}")
    if "accent" in colours:
        rules.append(f"a{{color:{colours['accent']}}}")
    return "".join(rules)
