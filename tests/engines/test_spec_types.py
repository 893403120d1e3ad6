"""Each spec type carries its JSON name; the JSON codec knows exactly the types of the ``WriteSpec`` union."""

from __future__ import annotations

import typing

from deltaguard.engines import specs
from deltaguard.engines.spec_json import spec_from_json, spec_to_json


def test_every_spec_type_is_registered_once_by_the_name_it_carries() -> None:
    union = set(typing.get_args(specs.WriteSpec))
    assert set(specs.SPEC_TYPES.values()) == union
    assert all(specs.SPEC_TYPES[cls.json_name] is cls for cls in union)


def test_json_kind_is_the_carried_name() -> None:
    spec = specs.DeleteSpec(predicate="p = 1")
    payload = spec_to_json(spec)
    assert payload["kind"] == specs.DeleteSpec.json_name == "delete"
    assert spec_from_json(payload) == spec
