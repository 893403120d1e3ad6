"""What a lease manager remembers between calls, so a busy store is asked less.

* table configurations: the newest one offered or loaded per table (reused for ``config_ttl_s``), and
  stored configuration texts decoded once;
* verdicts of the model for one operation beside a table's sole holder: compatible (the store may then
  grant in one call, ADR 0009) or conflicting with its wait answer (the store may then queue in one call,
  ADR 0010) - each keyed by the exact operation, configuration and profile texts, so it is reused only for
  exactly the same question;
* the tables of the requests this manager answered, so a release needs no read (a request's tables and
  operations never change).

Every map is bounded: past 10 000 entries it is cleared, which costs only a store read or a model call.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from deltaguard.core.admission import LeaseRequest, TableClaim, Waiting
from deltaguard.core.meaning import judged_by_partition_types
from deltaguard.core.oracle import Unconfirmed
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases import codec
from deltaguard.leases.store import LeaseRow, WaiterRow
from deltaguard.leases.wait_texts import WaitShape, wait_shape

log = logging.getLogger("deltaguard.leases")

#: Loads a table's current configuration (e.g. from its Delta log).
ConfigLoader = Callable[[str], TableConfig]
#: Attaches an engine's evaluator of partition predicates to a configuration read back from the store
#: (:func:`deltaguard.engines.sources.attach_oracle`; the lease layer cannot make one itself, ADR 0037).
OracleLoader = Callable[[TableConfig], TableConfig]
#: What a read-back configuration's partition separations are refused with when no evaluator can be had.
NO_EVALUATOR = (
    "no evaluator of the engine's where this configuration was read back from the lease store, so no "
    "partition separation is confirmed"
)
#: (operation text, configuration text, profile): the exact question a verdict answered
VerdictKey = tuple[str, str, EngineProfile]
#: past this many entries a map is cleared (bounded memory for managers that see many tables)
MAX_ENTRIES = 10_000


def newer(offered: TableConfig, known: TableConfig) -> bool:
    """Whether ``offered`` was read at a later table version than ``known`` (unknown versions are not newer)."""
    return offered.version is not None and (known.version is None or offered.version > known.version)


def sole_holder(
    uri: str, request_id: str, leases: Sequence[LeaseRow], waiters: Sequence[WaiterRow]
) -> LeaseRow | None:
    """The table's only live lease other than the request's own, if nothing is queued on it: the one
    situation whose verdict the manager remembers (ADR 0009, 0010)."""
    if any(w.uri == uri for w in waiters):
        return None
    found: LeaseRow | None = None
    for x in leases:
        if x.uri == uri and x.lease_id != request_id:
            if found is not None:
                return None  # two: stop reading a long table here
            found = x
    return found


class DecisionMemo:
    """The memory of one :class:`~deltaguard.leases.manager.LeaseManager`.

    :param config_ttl_s: how long a loaded table configuration is reused without reloading.
    :param config_loader: loads a table's configuration when a request carries none.
    :param oracle_loader: attaches the engine's evaluator to a configuration read back from the store;
        ``None``: none can be had here (see :meth:`read_back`).
    """

    def __init__(
        self,
        config_ttl_s: float = 30.0,
        config_loader: ConfigLoader | None = None,
        oracle_loader: OracleLoader | None = None,
    ) -> None:
        self.config_ttl_s = config_ttl_s
        self.config_loader = config_loader
        self.oracle_loader = oracle_loader
        self.loaded: dict[str, tuple[TableConfig, float]] = {}  # uri -> (config, loaded_at)
        self._parsed: dict[tuple[str, str], TableConfig] = {}  # (uri, stored json) -> config
        # (uri, config read back) -> it with its evaluator: one evaluator, and its answers, per configuration
        self._read_back: dict[tuple[str | None, TableConfig], TableConfig] = {}
        self._lock = threading.Lock()
        # request id -> (its tables, those whose metadata it changes, granted?), for requests answered here
        self._known_tables: dict[str, tuple[list[str], list[str], bool]] = {}
        # Values are replaced, never mutated, so readers need no lock.
        self.compatible: dict[VerdictKey, frozenset[str]] = {}
        self.conflicting: dict[VerdictKey, Mapping[str, WaitShape]] = {}

    # --- configurations ---------------------------------------------------------------------------------
    def loaded_config(self, claim: TableClaim, now: float) -> TableConfig | None:
        """The claim's own configuration, or the loader's (cached for ``config_ttl_s``)."""
        with self._lock:
            cached = self.loaded.get(claim.uri)
        if claim.config is not None:
            # A claim's statistics are of the snapshot its write pins: keep them over a copy of that
            # snapshot read without them (ADR 0020).
            same_with_stats = (
                cached is not None
                and claim.config.file_stats is not None
                and claim.config.version == cached[0].version
            )
            if cached is None or newer(claim.config, cached[0]) or same_with_stats:
                with self._lock:
                    self.loaded[claim.uri] = (claim.config, now)
                return claim.config
            return cached[0] if now - cached[1] < self.config_ttl_s else claim.config
        if self.config_loader is None:
            return cached[0] if cached else None
        if cached is None or now - cached[1] >= self.config_ttl_s:
            config = self.config_loader(claim.uri)
            with self._lock:
                self.loaded[claim.uri] = (config, now)
            return config
        return cached[0]

    def stored_config(self, uri: str, text: str | None) -> TableConfig | None:
        """A stored configuration text, decoded once."""
        if text is None:
            return None
        key = (uri, text)
        config = self._parsed.get(key)
        if config is None:
            config = self.read_back(codec.config_from_json(json.loads(text)))
            if len(self._parsed) > MAX_ENTRIES:
                self._parsed.clear()
            self._parsed[key] = config
        return config

    def read_back(self, config: TableConfig) -> TableConfig:
        """A configuration read back from the store (its text carries no evaluator), as a decision may judge
        it: with the engine's evaluator from :attr:`oracle_loader`; where none can be had and one could judge
        the table (partitioned, partition types known), with an :class:`~deltaguard.core.oracle.Unconfirmed`
        one, so a partition separation the engine never confirmed does not grant (ADR 0036, 0037): such a
        decision is never less conservative than the one the writer's own process made with the evaluator.
        """
        if config.meaning is not None:
            return config
        key = (config.uri, config)
        with self._lock:
            found = self._read_back.get(key)
        if found is not None:
            return found
        judged, why = config, NO_EVALUATOR
        if self.oracle_loader is not None:
            try:
                judged = self.oracle_loader(config)
            except Exception as exc:  # closed world: an evaluator that cannot be made confirms nothing
                log.warning("no evaluator for %s (%s); its partitions are not told apart", config.uri, exc)
                judged, why = config, f"the engine's evaluator could not be made ({exc})"
        if judged.meaning is None and judged_by_partition_types(config):
            judged = dataclasses.replace(config, meaning=Unconfirmed(why))
        with self._lock:
            if len(self._read_back) > MAX_ENTRIES:
                self._read_back.clear()
            self._read_back[key] = judged
        return judged

    def read_back_request(self, request: LeaseRequest) -> LeaseRequest:
        """A request decoded from its stored payload, each claim's configuration :meth:`read_back`."""
        claims = tuple(
            c if c.config is None else dataclasses.replace(c, config=self.read_back(c.config))
            for c in request.claims
        )
        return dataclasses.replace(request, claims=claims)

    def forget_config(self, uri: str) -> None:
        """Drop the table's remembered configuration (a released write changed its metadata)."""
        with self._lock:
            self.loaded.pop(uri, None)

    # --- verdicts beside a sole holder ----------------------------------------------------------------
    def learn_compatible(
        self,
        request: LeaseRequest,
        op_texts: Mapping[str, str],
        config_texts: Mapping[str, str],
        leases: Sequence[LeaseRow],
        waiters: Sequence[WaiterRow],
    ) -> None:
        """Remember, per table, a sole live holder beside which the model just granted (no queued request):
        the verdict for exactly that pair under exactly that configuration, which the store may reuse to
        grant in one call (ADR 0009). Tables with more holders are not remembered: the model has rules over
        several running operations, so pairs do not add up."""
        for claim in request.claims:
            holder = sole_holder(claim.uri, request.request_id, leases, waiters)
            if holder is None:
                continue
            key = (op_texts[claim.uri], config_texts[claim.uri], claim.profile)
            known = self.compatible.get(key, frozenset())
            if holder.op_json not in known:
                if len(self.compatible) > MAX_ENTRIES:
                    self.compatible.clear()
                self.compatible[key] = known | {holder.op_json}

    def learn_conflicting(
        self,
        request: LeaseRequest,
        op_texts: Mapping[str, str],
        config_texts: Mapping[str, str],
        leases: Sequence[LeaseRow],
        waiters: Sequence[WaiterRow],
        result: Waiting,
    ) -> None:
        """Remember the model's wait answer for a new one-table request behind the table's sole live
        holder, nothing queued: the verdict for exactly that pair under exactly that configuration, which
        the store may reuse to queue the same operation behind the same holder operation in one call
        (ADR 0010)."""
        if len(request.claims) != 1:
            return
        claim = request.claims[0]
        holder = sole_holder(claim.uri, request.request_id, leases, waiters)
        if holder is None or [b.id for b in result.blockers] != [holder.lease_id]:
            return
        shape = wait_shape(result)
        if shape is None:
            return
        key = (op_texts[claim.uri], config_texts[claim.uri], claim.profile)
        known = self.conflicting.get(key, {})
        if known.get(holder.op_json) != shape:
            if len(self.conflicting) > MAX_ENTRIES:
                self.conflicting.clear()
            self.conflicting[key] = {**known, holder.op_json: shape}

    # --- requests answered here ------------------------------------------------------------------------
    def remember(
        self, request_id: str, uris: Sequence[str], claims: Sequence[TableClaim], granted: bool
    ) -> None:
        """Keep a committed answer's tables (and those whose metadata it changes) so releasing the lease or
        withdrawing the queued request needs no read."""
        reset = [c.uri for c in claims if c.operation.changes_metadata]
        with self._lock:
            if len(self._known_tables) > MAX_ENTRIES:  # a forgotten entry only costs a read
                self._known_tables.clear()
            self._known_tables[request_id] = (list(uris), reset, granted)

    def take_known(self, request_id: str) -> tuple[list[str], list[str], bool] | None:
        """The remembered (tables, tables to reset, granted?) of a request, forgotten from now on."""
        with self._lock:
            return self._known_tables.pop(request_id, None)
