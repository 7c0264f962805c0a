# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/filter/json_line.py (the smoke check's result line)."""

from __future__ import annotations

import pytest

pytest.importorskip('ansible.errors')

from ansible.errors import AnsibleFilterError  # noqa: E402

from ansible_collections.ascend.vllm_pd.plugins.filter.json_line import FilterModule, json_line  # noqa: E402


def test_the_last_object_line_wins_over_library_chatter_and_earlier_lines():
    lines = ["[INFO] datasystem client init", '{"write": "old"}', "warning: {not json}",
             '  {"write": "ok", "read": "123", "error": ""}', "bye"]
    assert json_line(lines) == {"write": "ok", "read": "123", "error": ""}


def test_stdout_as_one_string_reads_like_its_lines():
    assert json_line('noise\n{"read": "x"}\n') == {"read": "x"}


@pytest.mark.parametrize("output", [None, [], "", ["Traceback (most recent call last):", "ImportError: yr"]])
def test_no_result_line_is_an_empty_dict(output):
    assert json_line(output) == {}


@pytest.mark.parametrize("line", ['{"write": ', "{]", '{"a": 1} trailing'])
def test_a_last_object_line_that_is_not_json_is_an_error(line):
    with pytest.raises(AnsibleFilterError, match="not JSON"):
        json_line(['{"write": "ok"}', line])


def test_lines_that_do_not_start_with_a_brace_are_not_results():
    assert json_line(["[1]", '"text"', "null"]) == {}


def test_bad_input_type_is_named():
    with pytest.raises(AnsibleFilterError, match="got int"):
        json_line(3)


def test_registered_under_its_name():
    assert FilterModule().filters() == {"json_line": json_line}


def test_the_bad_input_message_whole():
    with pytest.raises(AnsibleFilterError) as err:
        json_line({"stdout": "x"})
    assert err.value.message == "json_line: the input must be a command's stdout_lines, got dict"


def test_the_not_json_message_names_the_last_object_line_cut_at_200_characters():
    last = "{" + "x" * 249
    with pytest.raises(AnsibleFilterError) as err:
        json_line(['{"a": 1}', '{"b": 2}', "  " + last + "  ", "tail"])
    assert err.value.message == ("json_line: the last '{' line is not JSON (Expecting property name enclosed in double "
                                 "quotes: line 1 column 2 (char 1)): " + "{" + "x" * 199)
