# -*- coding: utf-8 -*-
"""The edge benchmark's load generator checks every answer (benchmarks/edge_fakes.py): a relay that drops, reorders
or garbles a token, loses the usage or the [DONE], or answers an error must count as an error, however the bytes
arrive and however a relay re-serializes the events."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import edge_fakes as F  # noqa: E402  pylint: disable=wrong-import-position


def stream_answer(n=5, usage=True):
    """The bytes a decode fake writes for a streamed chat answer of n tokens."""
    return b"".join(F.stream_blocks(True, n, usage))


def answers(data, pieces):
    """(status, body) of every answer an Answer protocol gathers from data, fed in `pieces` slices."""
    proto = F.Answer()
    step = max(1, len(data) // pieces)
    for i in range(0, len(data), step):
        proto.data_received(data[i:i + step])
    out = []
    while not proto.answers.empty():
        out.append(proto.answers.get_nowait())
    return out


def events_of(body):
    return [e for e in body.split(b"\n\n") if e.strip()]


@pytest.mark.parametrize("pieces", [1, 3, 17, 10_000])
def test_a_streamed_answer_is_gathered_and_right_however_it_is_split(pieces):
    got = answers(stream_answer(12), pieces)
    assert len(got) == 1
    status, body = got[0]
    assert status == 200 and body.endswith(b"data: [DONE]\n\n")
    assert F.check(status, body, True, 12) == 12


def test_two_answers_on_one_connection_are_two_answers():
    full = F.Fake.full({"model": "m"}, True, 3, "length", None)
    body = json.dumps(full).encode()
    one = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    got = answers(one + stream_answer(4), 7)
    assert [F.check(s, b, False, 3) for s, b in got[:1]] == [3]
    assert [F.check(s, b, True, 4) for s, b in got[1:]] == [4]


def test_an_unfinished_chunked_body_is_no_answer_yet():
    data = stream_answer(6)
    assert answers(data[:-3], 1) == []
    assert F.dechunk(bytearray(b"a\r\n0123"), 0) is None


def test_events_a_relay_rewrites_still_check():
    """vllm-router re-serializes an event it rewrites (its usage): other spacing and key order."""
    _status, body = answers(stream_answer(4), 1)[0]
    out = []
    for event in events_of(body):
        data = event[len(b"data: "):]
        if data != b"[DONE]":
            data = json.dumps(json.loads(data), separators=(",", ":"), sort_keys=True).encode()
        out.append(data)
    assert F.check(200, b"".join(b"data: " + d + b"\n\n" for d in out), True, 4) == 4


def mangle(body, how):
    events = events_of(body)
    if how == "swap":
        events[1], events[2] = events[2], events[1]
    elif how == "drop":
        del events[3]
    elif how == "no-done":
        events = events[:-1]
    elif how == "usage":
        events[-2] = events[-2].replace(b'"completion_tokens": 6', b'"completion_tokens": 5')
    elif how == "no-usage":
        del events[-2]
    elif how == "garbled-first":
        events[0] = events[0][:-2]
    elif how == "garbled-last":
        events[-2] = events[-2] + b"}"
    elif how == "piece":
        events[0] = events[0].replace(b'" w0"', b'" w9"')
    return b"".join(e + b"\n\n" for e in events)


@pytest.mark.parametrize("how", ["swap", "drop", "no-done", "usage", "no-usage", "garbled-first", "garbled-last",
                                 "piece"])
def test_a_wrong_stream_is_an_error(how):
    _status, body = answers(stream_answer(6), 1)[0]
    assert F.check(200, body, True, 6) == 6
    assert F.check(200, mangle(body, how), True, 6) is None


def test_an_error_status_or_an_empty_200_is_an_error():
    _status, body = answers(stream_answer(3), 1)[0]
    assert F.check(503, body, True, 3) is None
    assert F.check(200, b"", True, 3) is None
    assert F.check(200, b"", False, 3) is None


def test_a_wrong_non_stream_answer_is_an_error():
    right = F.Fake.full({"model": "m"}, True, 3, "length", None)
    assert F.check(200, json.dumps(right).encode(), False, 3) == 3
    short = F.Fake.full({"model": "m"}, True, 2, "length", None)
    assert F.check(200, json.dumps(short).encode(), False, 3) is None
    right["usage"]["completion_tokens"] = 4
    assert F.check(200, json.dumps(right).encode(), False, 3) is None
