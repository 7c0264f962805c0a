# -*- coding: utf-8 -*-
"""What every validation rule shares (_validation.base) and the checks an option's declaration gives
(_validation.spec_rules), on declarations written here: the value readers, the host's messages, the run's context,
the flag and environment-name checks, the folding of one message per host into one line, and the full wording of
every type, bound, list, path and emptiness message."""
from __future__ import annotations

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _specs as S
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _validation as V
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import base as B
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import spec_rules as R


# --- declarations and value readers ----------------------------------------------------------------------------


def test_side_names_writes_each_side_once():
    assert B.side_names() == ()
    assert B.side_names("a3_x", "vllm_<side>_tp_size", "vllm_<side>_<side>") == (
        "a3_x", "vllm_prefill_tp_size", "vllm_decode_tp_size", "vllm_prefill_prefill", "vllm_decode_decode")


def test_reads_marks_the_function_and_returns_it():
    def rule(h, ctx):
        return (h, ctx)

    marked = B.reads("a3_x", "vllm_<side>_kv_port", choices={"k": ["x", "y"], "j": ("z",)},
                     types=("vllm_<side>_kv_port",))(rule)
    assert marked is rule and marked(1, 2) == (1, 2)
    assert marked.reads == ("a3_x", "vllm_prefill_kv_port", "vllm_decode_kv_port")
    assert marked.choices == {"k": ("x", "y"), "j": ("z",)}
    assert marked.types == ("vllm_prefill_kv_port", "vllm_decode_kv_port")
    bare = B.reads()(lambda: None)
    assert (bare.reads, bare.choices, bare.types) == ((), {}, ())


def test_the_rules_types_are_what_they_declare():
    assert {"a3_business_ip", "a3_nic_name", "vllm_dp_address", "proxy_api_keys", "proxy_admin_token",
            "vllm_api_key", "monitoring_prometheus_web_users", "vllm_prefill_lookup_rpc_port",
            "vllm_decode_dp_groups", "a3_npus_per_node", "proxy_admin_port"} <= V.OWN_TYPES
    assert "vllm_health_timeout" not in V.OWN_TYPES


@pytest.mark.parametrize("value,text", [(B.SECRET, "(not shown)"), (None, "not set"), ("x", "'x'"), (5, "5"),
                                        ([1], "[1]"), (False, "False")])
def test_show(value, text):
    assert B.show(value) == text


@pytest.mark.parametrize("value,expected", [("{{ x }}", True), ("a {% if x %}", True), ("{ x }", False),
                                            ("{# c #}", False), (5, False), (None, False), ("", False)])
def test_templated(value, expected):
    assert B.templated(value) is expected


@pytest.mark.parametrize("value,expected", [
    (True, None), (False, None), (5, 5), (-2, -2), (0, 0), (" -3 ", -3), ("12\n", 12), ("007", 7), ("3.0", None),
    ("x", None), ("1 2", None), ("", None), ("-", None), (3.5, None), (None, None), ([1], None)])
def test_as_int(value, expected):
    got = B.as_int(value)
    assert got == expected and (expected is None or got.__class__ is int)  # an int, not a bool


@pytest.mark.parametrize("value,expected", [(5, True), ("5", True), (" 5 ", True), (3.7, True), (True, False),
                                            (False, False), ("x", False), (None, False), ("3.5", False), ([], False)])
def test_is_int(value, expected):
    assert B.is_int(value) is expected


@pytest.mark.parametrize("value,expected", [(True, None), (None, None), ("0.5", 0.5), (2, 2.0), ("x", None),
                                            ([1], None), (" 1e3 ", 1000.0)])
def test_as_float(value, expected):
    assert B.as_float(value) == expected


@pytest.mark.parametrize("value,expected", [(True, True), (False, False), ("True", True), (" false ", False),
                                            ("TRUE", True), ("yes", None), (1, None), (0, None), (None, None),
                                            ("", None)])
def test_as_bool(value, expected):
    assert B.as_bool(value) is expected


@pytest.mark.parametrize("value,expected", [({}, {}), ({"a": 1}, {"a": 1}), ('{"a": 1}', {"a": 1}), ("[1]", None),
                                            ("x", None), ([1], None), (None, None), (3, None)])
def test_as_mapping(value, expected):
    assert B.as_mapping(value) == expected


# --- the host and the context ----------------------------------------------------------------------------------


SPECS = {"keep_null": S.Option("keep_null", "r", "e", {"description": "Not null."}),
         "keep_empty": S.Option("keep_empty", "r", "e", {"description": "Not empty."}),
         "plain": S.Option("plain", "r", "e", {})}


def test_host_get_skips_absent_templated_and_null_values():
    h = B.Host("p0", {"keep_null": None, "keep_empty": None, "plain": None, "other": None, "t": "{{ x }}", "v": 0},
               [], [], SPECS)
    assert h.get("keep_null") is None and h.get("keep_empty") is None
    assert h.get("plain") is B.ABSENT and h.get("other") is B.ABSENT and h.get("missing") is B.ABSENT
    assert h.get("t") is B.ABSENT and h.get("v") == 0
    assert (h.keeps_null("keep_null"), h.keeps_null("keep_empty"), h.keeps_null("plain"), h.keeps_null("x")) == (
        True, True, False, False)


def test_host_without_specs_reads_the_collections():
    h = B.Host("p0", {"vllm_env_common": None, "vllm_health_timeout": None}, [], [])
    assert h.get("vllm_env_common") is None and h.get("vllm_health_timeout") is B.ABSENT


def test_host_messages():
    errors, warnings = [], []
    h = B.Host("d1", {}, errors, warnings, SPECS)
    h.error("k", "v", "why: set x")
    h.warn("w", None, "set y")
    h.error("s", B.SECRET, "set z")
    assert errors == ["d1: k is 'v': why: set x", "d1: s is (not shown): set z"]
    assert warnings == ["d1: w is not set: set y"]


def test_context_reads_the_groups_and_the_sides():
    inv = {"groups": {"prefill": ["p0", "b"], "decode": ["d0", "b"], "other": ["o"]},
           "hosts": {"p0": {"x": 1}, "b": None}}
    ctx = B.Context(inv, False, SPECS)
    assert ctx.members == {"p0": ["prefill"], "b": ["prefill", "decode"], "d0": ["decode"]}
    assert ctx.ordered == ["p0", "b", "d0"]
    assert ctx.side_of == {"p0": "prefill", "b": None, "d0": "decode"}
    assert ctx.placeholder_sink is ctx.errors and ctx.errors == [] and ctx.warnings == []
    assert (ctx.bad_numbers, ctx.inconsistent, ctx.open_listeners, ctx.topo, ctx.own_types) == (
        False, False, [], None, frozenset())
    assert ctx.host("p0").hv == {"x": 1} and ctx.host("b").hv == {} and ctx.host("zz").hv == {}
    assert ctx.host("p0").name == "p0" and ctx.host("p0").specs is SPECS and ctx.host("p0").errors is ctx.errors
    assert ctx.host("p0").warnings is ctx.warnings
    render = B.Context(inv, True, SPECS)
    assert render.placeholder_sink is render.warnings


def test_context_of_an_empty_inventory():
    ctx = B.Context({"groups": None, "hosts": None}, False, SPECS)
    assert (ctx.groups, ctx.hosts, ctx.members, ctx.ordered) == ({}, {}, {}, [])
    assert ctx.service_hosts() == (None, None)


@pytest.mark.parametrize("anchor,expected", [
    ({}, ("p0", "p0")),
    ({"a3_etcd_host": "", "a3_proxy_host": None}, ("p0", "p0")),
    ({"a3_etcd_host": "d0", "a3_proxy_host": "p1"}, ("d0", "p1")),
    ({"a3_proxy_host": "d1"}, ("p0", "d1")),
])
def test_service_hosts_follow_the_first_prefill_host(anchor, expected):
    inv = {"groups": {"prefill": ["p0", "p1"], "decode": ["d0"]},
           "hosts": {"p0": anchor, "p1": {"a3_etcd_host": "zz", "a3_proxy_host": "zz"}}}
    assert B.Context(inv, False, SPECS).service_hosts() == expected


def test_service_hosts_without_a_usable_first_prefill_host():
    assert B.Context({"groups": {"prefill": ["p9"]}, "hosts": {"p0": {}}}, False, SPECS).service_hosts() == (None, None)
    assert B.Context({"groups": {"prefill": []}, "hosts": {}}, False, SPECS).service_hosts() == (None, None)


# --- the flag and environment-name checks ----------------------------------------------------------------------


def _flags(flags, booleans):
    errors = []
    h = B.Host("p0", {"x_flags": flags}, errors, [], SPECS)
    B.check_flag_dict(h, "x_flags", "the tool", "threads: 2", booleans,
                      lambda flag: "the role sets --%s: remove it" % flag if flag.startswith("own") else None)
    return errors


def test_flag_dict_messages():
    flags = {"--dashed": 1, "bad flag": 1, "_under": 1, "own-port": 1, "none": None, "dict": {}, "list": [],
             "yes": True, "no": False, "ok": 3, "ok-text": "a", "ok_float": 0.5, 7: 1}
    tail_b = "set a number, a string or a boolean"
    assert _flags(flags, True) == [
        "p0: x_flags is {'--dashed': 1}: set the tool's flag without dashes, e.g. threads: 2",
        "p0: x_flags is {'bad flag': 1}: set the tool's flag without dashes, e.g. threads: 2",
        "p0: x_flags is {'_under': 1}: set the tool's flag without dashes, e.g. threads: 2",
        "p0: x_flags is {'own-port': 1}: the role sets --own-port: remove it",
        "p0: x_flags is {'none': None}: the tool takes '--none <value>': " + tail_b,
        "p0: x_flags is {'dict': {}}: the tool takes '--dict <value>': " + tail_b,
        "p0: x_flags is {'list': []}: the tool takes '--list <value>': " + tail_b,
    ]
    tail = "set a number or a string"
    assert _flags({"yes": True, "no": False, "ok": 3, "n": None}, False) == [
        "p0: x_flags is {'yes': True}: the tool takes '--yes <value>': " + tail,
        "p0: x_flags is {'no': False}: the tool takes '--no <value>': " + tail,
        "p0: x_flags is {'n': None}: the tool takes '--n <value>': " + tail,
    ]


@pytest.mark.parametrize("flags", [None, [], "a=b", {}])
def test_flag_dict_not_a_mapping_is_left_alone(flags):
    assert _flags(flags, True) == []


def test_env_names():
    errors = []
    h = B.Host("d0", {"e": ["http_proxy", "_X1", "1BAD", "A-B", 5, "", None], "ok": ["A", "b_2"], "s": "A"},
               errors, [], SPECS)
    for key in ("e", "ok", "s", "missing"):
        B.check_env_names(h, key)
    assert errors == ["d0: e is ['http_proxy', '_X1', '1BAD', 'A-B', 5, '', None]: '1BAD', 'A-B', 5, '', None are not "
                      "environment variable names: set names such as http_proxy"]


# --- folding the hosts' messages ---------------------------------------------------------------------------------


def test_merge_hosts_folds_one_message_of_several_hosts():
    messages = ["h1: a is 1: set", "h2: a is 1: set", "inventory: group x", "h1: b", "loose text", "h3: a is 1: set",
                "inventory: group x", "zz: a is 1: set", "loose text", "h2: c: d"]
    assert V.merge_hosts(messages, {"h1", "h2", "h3"}) == [
        "h1, h2, h3: a is 1: set", "inventory: group x", "h1: b", "loose text", "zz: a is 1: set", "h2: c: d"]
    assert V.merge_hosts([], {"h1"}) == []


def test_validate_takes_the_specs_it_is_given():
    """With no declarations the spec-derived checks say nothing: only the rules' own words remain."""
    inv = {"groups": {"prefill": [], "decode": []}, "hosts": {}}
    errors, warnings = V.validate(inv, specs={})
    assert errors == ["inventory: group 'prefill' is missing or empty: add the prefill hosts under 'prefill:' in the "
                      "inventory (the seed has two)",
                      "inventory: group 'decode' is missing or empty: add the decode hosts under 'decode:' in the "
                      "inventory (the seed has two)"]
    assert warnings == []
    assert V.validate(inv) == (errors, [])


# --- the checks a declaration gives ------------------------------------------------------------------------------


def _check(spec, value, name="opt"):
    errors, option = [], S.Option(name, "r", "e", spec)
    R.check_option(B.Host("p0", {name: value}, errors, [], {name: option}), option)
    return errors


@pytest.mark.parametrize("spec,value,why", [
    ({"type": "int"}, "x", "set an integer"),
    ({"type": "int"}, True, "set an integer"),
    ({"type": "int", "description": "At least 1."}, 0, "set an integer >= 1"),
    ({"type": "int", "description": "At least -2."}, -3, "set an integer >= -2"),
    ({"type": "int", "description": "At most 5."}, 6, "set an integer <= 5"),
    ({"type": "int", "description": "At least 1. At most 5."}, 6, "set an integer from 1 to 5"),
    ({"type": "int", "description": "At least 1. At most 5."}, 0, "set an integer from 1 to 5"),
    ({"type": "int", "description": "Above 0."}, 0, "set an integer above 0, e.g. 5 or 0.5"),
    ({"type": "int", "description": "Above 0. At most 9."}, 10, "set an integer above 0 and at most 9"),
    ({"type": "float"}, "x", "set a number"),
    ({"type": "float", "description": "Above 0.5."}, 0.5, "set a number above 0.5, e.g. 5 or 0.5"),
    ({"type": "float", "description": "Above 0. At most 1.5."}, 1.6, "set a number above 0 and at most 1.5"),
    ({"type": "float", "description": "At least 0.25. At most 2.0."}, 2.01, "set a number from 0.25 to 2"),
    ({"type": "float", "description": "At least 1.0."}, 0.5, "set a number >= 1"),
    ({"type": "float", "description": "At most 0.75."}, 1, "set a number <= 0.75"),
    ({"type": "bool"}, "yes", "set true or false (unquoted YAML booleans)"),
    ({"type": "bool"}, 1, "set true or false (unquoted YAML booleans)"),
    ({"type": "dict"}, [], "set a mapping, e.g. {}"),
    ({"type": "dict"}, "a: 1", "set a mapping, e.g. {}"),
    ({"type": "list"}, "a", "set a list of non-empty strings (quote numbers), e.g. []"),
    ({"type": "list"}, ["a", " "], "set a list of non-empty strings (quote numbers), e.g. []"),
    ({"type": "list"}, ["a", 1], "set a list of non-empty strings (quote numbers), e.g. []"),
    ({"type": "list", "elements": "str"}, [None], "set a list of non-empty strings (quote numbers), e.g. []"),
    ({"type": "list", "elements": "int"}, [1, "x"], "set a list of integers, e.g. []"),
    ({"type": "list", "elements": "int"}, {}, "set a list of integers, e.g. []"),
    ({"type": "list", "elements": "dict"}, ["a"], "set a list of mappings, e.g. []"),
    ({"type": "list", "elements": "dict", "options": {"a": {"required": True}, "b": None, "c": {"required": True}}},
     [{"a": 1}], "set a list of mappings, each with a and c, e.g. []"),
    ({"type": "list", "elements": "dict", "options": {"a": {"required": True}}}, "x",
     "set a list of mappings, e.g. []"),
    ({"type": "list", "choices": ["a", "b", "c"]}, ["a", "z", "b", "y"], "'z', 'y' unknown: set a list of a, b, c"),
    ({"type": "str", "choices": ["x", "y"]}, "z", "set one of x, y"),
    ({"type": "raw", "choices": ["no", "always", 3]}, False,
     "set one of no, always, 3 (an unquoted no is YAML false: write \"no\")"),
    ({"type": "raw", "choices": ["always", 3]}, False, "set one of always, 3"),
    ({"type": "raw", "choices": ["no", "always"]}, 0, "set one of no, always"),
    ({"type": "str", "description": "An absolute path."}, "rel", "set an absolute path (starting with /)"),
    ({"type": "str", "description": "An absolute path."}, 5, "set an absolute path (starting with /)"),
    ({"type": "str", "description": "An absolute path."}, "/<dir>", "set an absolute path (starting with /)"),
    ({"type": "path", "description": "An absolute path, not C(/)."}, "//",
     "'/' itself cannot be used here: set a directory of its own"),
    ({"type": "str", "default": "d", "description": "Not empty."}, " ", "set a non-empty value, e.g. d (the default)"),
    ({"type": "str", "default": "d", "description": "Not empty."}, "CHANGE_ME",
     "set a non-empty value, e.g. d (the default)"),
    ({"type": "str", "default": "d", "description": "Not empty."}, "a xxxx b",
     "set a non-empty value, e.g. d (the default)"),
    ({"type": "str", "default": "d", "description": "Not empty."}, True, "set a non-empty value, e.g. d (the default)"),
    ({"type": "raw", "default": "d", "description": "Not empty."}, [1], "set a non-empty value, e.g. d (the default)"),
    ({"type": "str", "default": "d", "description": "Not empty."}, None, "set a non-empty value, e.g. d (the default)"),
    ({"type": "str", "description": "Not empty. An absolute path."}, "", "set an absolute path (starting with /)"),
])
def test_the_message_a_declaration_gives(spec, value, why):
    assert _check(spec, value) == ["p0: opt is %s: %s" % (B.show(value), why)]


@pytest.mark.parametrize("spec,value", [
    ({"type": "int"}, " 7 "), ({"type": "int", "description": "At least 1. At most 5."}, 1),
    ({"type": "int", "description": "At least 1. At most 5."}, 5), ({"type": "int", "description": "Above 0."}, 1),
    ({"type": "float", "description": "Above 0. At most 1."}, "1"), ({"type": "float"}, "-2.5"),
    ({"type": "bool"}, "False"), ({"type": "dict"}, {}), ({"type": "list", "elements": "int"}, [1, "2"]),
    ({"type": "list", "elements": "dict", "options": {"a": {"required": True}}}, [{"a": None, "b": 1}]),
    ({"type": "list", "choices": ["a", "b"]}, ["b", "a"]), ({"type": "list"}, []),
    ({"type": "str", "choices": ["x", "y"]}, "y"),
    ({"type": "str", "description": "An absolute path, not C(/)."}, "/a"),
    ({"type": "path", "description": "An absolute path."}, "/"), ({"type": "str", "description": "Not empty."}, 0),
    ({"type": "str", "description": "Not empty."}, "x"), ({"type": "int", "description": "At least 5."}, "{{ n }}"),
    ({"type": "int", "description": "At least 5."}, None), ({"type": "float"}, None),
])
def test_values_a_declaration_takes(spec, value):
    assert _check(spec, value) == []


def test_a_no_log_value_is_not_shown():
    spec = {"type": "str", "no_log": True, "description": "Not empty. Not null."}
    assert _check(spec, " ") == ["p0: opt is (not shown): set a non-empty value, e.g. None (the default)"]
    assert _check(spec, None) == ["p0: opt is not set: set a non-empty value, e.g. None (the default)"]


def test_check_options_leaves_the_rules_own_types_and_absent_options_alone():
    specs = {"a": S.Option("a", "r", "e", {"type": "int"}), "b": S.Option("b", "r", "e", {"type": "int"}),
             "c": S.Option("c", "r", "e", {"type": "int"})}
    ctx = B.Context({"groups": {"prefill": ["p0"]}, "hosts": {"p0": {"a": "x", "b": "y", "z": "q"}}}, False, specs)
    ctx.own_types = frozenset(["b"])
    R.check_options(ctx.host("p0"), ctx)
    assert ctx.errors == ["p0: a is 'x': set an integer"]
