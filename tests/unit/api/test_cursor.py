"""The conversation list's cursor: opaque, round-trips, and refuses anything it did not make."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.cursor import NO_REPLY_RANK, InvalidCursor, SortKey, decode_cursor, encode_cursor

keys = st.builds(
    SortKey,
    st.sampled_from([0, 1]),
    st.integers(-NO_REPLY_RANK, NO_REPLY_RANK),
    st.text(st.characters(blacklist_categories=("Z", "C"), blacklist_characters="/"), min_size=1, max_size=128),
)


@given(keys)
def test_a_cursor_round_trips_to_its_sort_key(key: SortKey) -> None:
    assert decode_cursor(encode_cursor(key)) == key


@pytest.mark.parametrize(
    "raw", ["", "%%%", "WzIsMSwieCJd", "WzAsMSwiIl0", "WzAsIjEiLCJ4Il0", "WzAsMV0", "eyJhIjoxfQ", "WzAsMWUzMCwieCJd"]
)
def test_a_cursor_this_api_did_not_make_is_refused(raw: str) -> None:
    with pytest.raises(InvalidCursor):
        decode_cursor(raw)
