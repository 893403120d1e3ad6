"""Choose a write engine by name.

Engines are imported only when chosen, so a DAG that writes with delta-rs never imports PySpark.
"""

from __future__ import annotations

import importlib
from typing import Any

from deltaguard.engines.base import DeltaEngine

#: engine name -> ``module:Class``; a name not listed here may itself be a ``module:Class`` path.
ENGINES: dict[str, str] = {
    "delta-rs": "deltaguard.engines.deltars:DeltaRsEngine",
    "spark": "deltaguard.engines.spark:SparkEngine",
}

_ALIASES = {"deltars": "delta-rs", "delta_rs": "delta-rs", "deltalake": "delta-rs", "delta-spark": "spark"}


def canonical_engine_name(name: str) -> str:
    """``delta-rs`` or ``spark`` for any accepted spelling (an import path is returned unchanged).

    :param name: an engine name, alias or ``module:Class`` path.
    :raises ValueError: for an unknown name.
    """
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in ENGINES:
        return key
    if ":" in name:
        return name.strip()
    raise ValueError(
        f"unknown engine {name!r}; choose one of {sorted(ENGINES)} or give a 'module:Class' path"
    )


def engine_class(name: str) -> type[DeltaEngine]:
    """Import the engine class for ``name``.

    :param name: an engine name, alias or ``module:Class`` path.
    :raises ValueError: if the name is unknown or the path does not name a :class:`DeltaEngine`.
    :raises ImportError: if the engine's module (or its dependencies, such as PySpark) cannot be imported.
    """
    canonical = canonical_engine_name(name)
    path = ENGINES.get(canonical, canonical)
    module_name, _, class_name = path.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, DeltaEngine)):
        raise ValueError(f"{path!r} does not name a DeltaEngine subclass")
    return cls


def create_engine(name: str, **kwargs: Any) -> DeltaEngine:
    """Build the engine called ``name``.

    :param name: an engine name, alias or ``module:Class`` path.
    :param kwargs: constructor arguments (``storage_options`` for delta-rs; Spark session settings for spark).
    """
    return engine_class(name)(**kwargs)
