"""What an engine registers about the spec types: how it runs each, or why it cannot.

Spec types are declared once, in :mod:`deltaguard.engines.specs`, with their JSON name and checks; an engine
registers only a runner per spec class (:class:`Runners`). A spec class it has no runner for is refused with
:class:`~deltaguard.engines.errors.UnsupportedWriteError` before anything is written, with the reason the
engine gave (:class:`Unsupported`) or, for a spec type declared after the engine, "no runner".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from deltaguard.engines.errors import UnsupportedWriteError
from deltaguard.engines.specs import SPEC_TYPES, WriteSpec, write_name

R = TypeVar("R")


@dataclass(frozen=True)
class Unsupported:
    """An engine's explicit "I do not run this spec type", with the reason the DAG author reads.

    :param reason: why, and what to do instead.
    """

    reason: str


class Runners(Generic[R]):
    """An engine's runners by spec class (exact class: a subclass of a spec is not silently run as it).

    :param engine: the engine's name, for messages.
    :param runners: spec class -> the engine's runner, or :class:`Unsupported` with a reason.
    """

    def __init__(self, engine: str, runners: Mapping[type[WriteSpec], R | Unsupported]) -> None:
        self.engine = engine
        self._runners = dict(runners)

    def runner(self, spec: object) -> R:
        """The runner for ``spec``.

        :raises UnsupportedWriteError: when this engine has no runner for its class.
        """
        entry = self._runners.get(type(spec))  # type: ignore[arg-type]
        if entry is None or isinstance(entry, Unsupported):
            reason = entry.reason if isinstance(entry, Unsupported) else "it has no runner for it"
            raise UnsupportedWriteError(
                f"{write_name(spec, capital=True)} is not supported by {self.engine}: {reason}",
                engine=self.engine,
                spec_type=type(spec),
            )
        return entry

    def check(self, spec: object) -> None:
        """Raise :class:`UnsupportedWriteError` unless this engine runs ``spec`` (:meth:`runner`)."""
        self.runner(spec)

    def entry(self, spec_type: type[WriteSpec]) -> R | Unsupported | None:
        """What this engine registered for ``spec_type`` (``None``: nothing)."""
        return self._runners.get(spec_type)

    def unregistered(self) -> list[str]:
        """The JSON names of declared spec types this engine registered nothing for (neither a runner nor
        :class:`Unsupported`)."""
        return sorted(name for name, cls in SPEC_TYPES.items() if cls not in self._runners)

    @contextlib.contextmanager
    def overridden(self, spec_type: type[WriteSpec], entry: R | Unsupported) -> Iterator[None]:
        """Register ``entry`` for ``spec_type`` for the ``with`` block (a benchmark timing a runner)."""
        previous = self._runners.get(spec_type)
        self._runners[spec_type] = entry
        try:
            yield
        finally:
            if previous is None:
                del self._runners[spec_type]
            else:
                self._runners[spec_type] = previous
