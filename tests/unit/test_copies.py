"""replaced(record, update) is record.model_copy(update=update): the same type, fields, fields-set and bytes, for
random records of every plain model (the fold's, among them) and random updates of their fields."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import PrivateAttr

from schemas.base import Id, Record
from schemas.codec import encode_record
from schemas.copies import replaced
from tests.unit.test_codec import PLAIN, _values, instances


def _same_copy(copied: Record, expected: Record) -> None:
    assert type(copied) is type(expected)
    assert copied.__dict__ == expected.__dict__
    assert list(copied.__dict__) == list(expected.__dict__)  # the order the encoder writes them in
    assert copied.model_fields_set == expected.model_fields_set
    assert copied.__pydantic_extra__ == expected.__pydantic_extra__
    assert copied.__pydantic_private__ == expected.__pydantic_private__
    assert encode_record(copied) == encode_record(expected)


@pytest.mark.parametrize("model", PLAIN, ids=lambda m: m.__name__)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_replaced_is_model_copy_with_the_update(model: type[Record], data: st.DataObject) -> None:
    record = data.draw(instances(model))
    names = data.draw(st.lists(st.sampled_from(sorted(model.model_fields)), unique=True, max_size=4))
    update = {name: data.draw(_values(model.model_fields[name].annotation)) for name in names}
    _same_copy(replaced(record, update), record.model_copy(update=update))


class _Named(Record):
    name: Id = "first"


def test_replaced_does_not_share_the_fields_set_with_the_record() -> None:
    record = _Named()
    copied = replaced(record, {"name": "other"})
    assert record.model_fields_set == set()
    assert copied.model_fields_set == {"name"}
    assert record.name == "first"


def test_a_model_with_private_attributes_is_copied_by_model_copy() -> None:
    class Private(Record):
        name: Id
        _cache: dict = PrivateAttr(default_factory=dict)

    record = Private(name="first")
    record._cache["k"] = 1
    _same_copy(replaced(record, {"name": "other"}), record.model_copy(update={"name": "other"}))
