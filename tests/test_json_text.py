"""JSON text as the AWS clients and the store write it (agents_core/json_text.py): orjson's,
and the standard library's for what orjson refuses, so nothing that was stored before fails now."""

from __future__ import annotations

import base64
import json

import pytest
from agents_core import json_text


@pytest.mark.parametrize(
    "value",
    [
        {"text": "un caf\u00e9 \u2615", "n": [1, 2.5, None, True]},
        {"lone": "a \ud800 surrogate, as a JSON escape in a request can make one"},
        {"big": 2**70, "negative": -(2**65)},
    ],
)
def test_every_value_is_written_as_json_that_reads_back_the_same(value):
    text = json_text.dumps(value)
    assert json.loads(text) == value
    assert json_text.dumps_str(value) == text.decode()


def test_text_is_compact_utf8_and_bytes_go_through_the_default():
    def blob(value):
        return base64.b64encode(value).decode()

    text = json_text.dumps({"B": b"\x00\xff", "s": "\u00e9"}, default=blob)
    assert text == '{"B":"AP8=","s":"\u00e9"}'.encode()


def test_loads_reads_bytes_and_str_and_refuses_what_is_not_json():
    assert json_text.loads(b'{"a":[1]}') == json_text.loads('{"a":[1]}') == {"a": [1]}
    with pytest.raises(ValueError):
        json_text.loads(b"{nope")
