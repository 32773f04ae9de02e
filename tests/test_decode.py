"""tracker.decode: every way json and tomllib cannot read a text is one Undecodable (a ValueError)
saying why in words, which every reader of a user's file, an artifact or an outbox file says in its line."""

from __future__ import annotations

import pytest

from tracker.decode import Undecodable, loads_json, loads_toml


@pytest.mark.parametrize(("text", "said"), [
    ("{", "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    ("[" * 100_000, "JSON nested too deeply to read"),  # a RecursionError, no ValueError: past `except ValueError`
    ("[1" + "0" * 5000 + "]", "a whole number of more than 4,300 digits (more than Python reads)"),
    (b"[\xe9]", "not UTF-8 text (byte 1: b'\\xe9'); JSON is UTF-8 text"),
    # json tells UTF-16 by its first bytes: the bytes are said in that encoding, not as UTF-8
    (b"\xff\xfe[", "not UTF-16-LE text (byte 2: b'['); JSON is UTF-8 text"),
])
def test_json_that_cannot_be_read_is_one_value_error_saying_why(text: str | bytes, said: str) -> None:
    with pytest.raises(Undecodable) as info:
        loads_json(text)
    assert isinstance(info.value, ValueError) and str(info.value) == said


@pytest.mark.parametrize(("text", "said"), [
    ("a = ", "not valid TOML (Invalid value (at end of document))"),
    ("a = " + "[" * 100_000, "TOML nested too deeply to read"),
    ("a = " + "{b = " * 100_000, "TOML nested too deeply to read"),
    ("a = 1" + "0" * 5000, "a whole number of more than 4,300 digits (more than Python reads)"),
])
def test_toml_that_cannot_be_read_is_one_value_error_saying_why(text: str, said: str) -> None:
    with pytest.raises(Undecodable) as info:
        loads_toml(text)
    assert isinstance(info.value, ValueError) and str(info.value) == said


def test_what_can_be_read_is_read_as_json_and_tomllib_read_it() -> None:
    assert loads_json(b'\xef\xbb\xbf{"a": [1, 2.5]}') == {"a": [1, 2.5]}  # bytes with a byte-order mark, as json reads them
    assert loads_toml("[m]\nx = [1, {y = 2}]\n") == {"m": {"x": [1, {"y": 2}]}}
