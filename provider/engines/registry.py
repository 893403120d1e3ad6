"""Choose and build a write engine.

Engines are imported only when chosen, so a DAG that writes with delta-rs never imports PySpark.
:func:`build_engine` is the one place that turns a task's resolved settings into engine constructor
arguments.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deltaguard.engines.base import DeltaEngine

#: engine name -> ``module:Class``; a name not listed here may itself be a ``module:Class`` path.
ENGINES: dict[str, str] = {
    "delta-rs": "deltaguard.engines.deltars.engine:DeltaRsEngine",
    "spark": "deltaguard.engines.spark.engine:SparkEngine",
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


@dataclass(frozen=True)
class EngineSettings:
    """A task's resolved engine settings (operator arguments, ``delta`` connection, ``[deltaguard]``).

    :param storage_options: ``deltalake`` storage options (any engine whose constructor takes them).
    :param spark_conn_id: ``spark`` connection for Spark engines (their ``conn_id``).
    :param spark_connect_conn_id: ``spark_connect`` connection for Spark engines (their ``connect_conn_id``).
    """

    storage_options: Mapping[str, str] | None = None
    spark_conn_id: str | None = None
    spark_connect_conn_id: str | None = None


def build_engine(name: str, settings: EngineSettings | None = None) -> DeltaEngine:
    """Build the engine called ``name`` from a task's settings.

    Each setting goes to the constructor parameter of the same meaning when the constructor has it and the
    setting is given: ``storage_options`` to any engine; the Spark connections (``conn_id``,
    ``connect_conn_id``) only to engines named ``spark`` (:class:`~deltaguard.engines.spark.SparkEngine` and
    engines of users built on it), since another engine's ``conn_id`` would mean something else.

    :param name: an engine name, alias or ``module:Class`` path.
    :param settings: the resolved settings; ``None`` builds the engine with its defaults.
    """
    cls = engine_class(name)
    settings = settings or EngineSettings()
    offered: dict[str, Any] = {"storage_options": dict(settings.storage_options or {}) or None}
    if getattr(cls, "name", None) == "spark":
        offered["conn_id"] = settings.spark_conn_id
        offered["connect_conn_id"] = settings.spark_connect_conn_id
    accepted = _accepted_parameters(cls)
    return cls(**{key: value for key, value in offered.items() if key in accepted and value is not None})


@functools.cache  # a class's signature does not change; read once per process, not once per write
def _accepted_parameters(cls: type) -> frozenset[str]:
    """The named parameters ``cls(...)`` takes. A subclass whose ``__init__`` passes ``**kwargs`` on (a timed
    or instrumented engine) also takes what the classes up its MRO name, up to the first whose ``__init__``
    takes no ``**kwargs``; reading only its own signature would silently drop the Spark Connect connection
    and build a local Spark session instead. ``**kwargs`` that go elsewhere (to a hook, say) gain nothing:
    only named parameters count."""
    named: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        parameters = list(inspect.signature(init).parameters.values())[1:]  # without self
        named |= {
            p.name
            for p in parameters
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        }
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            break
    return frozenset(named)
