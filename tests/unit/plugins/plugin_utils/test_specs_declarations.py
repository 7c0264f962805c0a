# -*- coding: utf-8 -*-
"""_specs and _defaults on small roles directories written here: the Option a declaration gives (type, choices,
bounds and path sentences), the order and precedence of the roles (common first), the options derived from the
topology fact, and every problem problems() names (full messages), so the spec lint's wording is pinned too."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _defaults as D
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _specs as S


def _roles(tmp_path, specs=None, defaults=None):
    """A roles directory: {role: spec file text} and {role: defaults/main.yml text}; returns its path as text."""
    for role, text in (specs or {}).items():
        meta = tmp_path / role / "meta"
        meta.mkdir(parents=True, exist_ok=True)
        (meta / "argument_specs.yml").write_text(text, encoding="utf-8")
    for role, text in (defaults or {}).items():
        folder = tmp_path / role / "defaults"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "main.yml").write_text(text, encoding="utf-8")
    return str(tmp_path)


def _attrs(option):
    return (option.name, option.role, option.entry, option.type, option.elements, option.choices, option.has_default,
            option.default, option.required, option.no_log, option.suboptions, option.description, option.minimum,
            option.maximum, option.above, option.absolute, option.not_root, option.not_empty, option.not_null)


# --- Option and the description sentences ----------------------------------------------------------------------


def test_an_option_without_a_declaration_is_an_optional_string():
    option = S.Option("x", "r", "main", None)
    assert _attrs(option) == ("x", "r", "main", "str", None, (), False, None, False, False, {}, "", None, None, None,
                              False, False, False, False)
    assert repr(option) == "Option(x of r: str)"


def test_an_option_reads_every_key_of_its_declaration():
    spec = {"type": "int", "elements": "str", "choices": [1, 2], "default": 2, "required": True, "no_log": True,
            "options": {"a": {"required": True}},
            "description": ["A count.", "At least 1. At most 9.", "Above 0.", "Not null."]}
    option = S.Option("n", "vllm", "validate", spec)
    assert _attrs(option) == ("n", "vllm", "validate", "int", "str", (1, 2), True, 2, True, True,
                              {"a": {"required": True}}, "A count. At least 1. At most 9. Above 0. Not null.", 1, 9,
                              0, False, False, False, True)
    assert repr(option) == "Option(n of vllm: int)"


@pytest.mark.parametrize("description,flags", [
    ("A directory. An absolute path, not C(/).", (True, True, False, False)),
    ("A file. An absolute path.", (True, False, False, False)),
    ("A name. Not empty.", (False, False, True, False)),
    ("A mapping. Not null.", (False, False, False, True)),
])
def test_the_path_and_emptiness_sentences(description, flags):
    option = S.Option("p", "r", "main", {"type": "str", "default": None, "description": description})
    assert (option.absolute, option.not_root, option.not_empty, option.not_null) == flags
    assert option.has_default and option.default is None


@pytest.mark.parametrize("description,found,malformed", [
    (None, [], []),
    ("", [], []),
    ("A port. At least 1. At most 65535.", [("minimum", 1, "int"), ("maximum", 65535, "int")], []),
    (["Seconds.", "Above 0.5."], [("above", 0.5, "float")], []),
    ("Offset. At least -2.", [("minimum", -2, "int")], []),
    ("A fraction. At most 1.0.", [("maximum", 1.0, "float")], []),
    ("  At most 2.  ", [("maximum", 2, "int")], []),
    ("Really? At most 3.\nOr not! Not empty.", [("maximum", 3, "int"), ("not_empty", None, "NoneType")], []),
    ("An absolute path, not C(/). Not null.", [("not_root", None, "NoneType"), ("not_null", None, "NoneType")], []),
    ("An absolute path.", [("absolute", None, "NoneType")], []),
    ("Minimum 3. The least: At least 1.", [], []),
    ("At least one.", [], ["At least one."]),
    ("At least 1 or more.", [], ["At least 1 or more."]),
    ("Above zero. At most 2", [], ["Above zero.", "At most 2"]),
    (["Not C(/).", "An absolute path, not /.", "Not emptyish."], [],
     ["Not C(/).", "An absolute path, not /.", "Not emptyish."]),
    ("Not null. Not nullable.", [("not_null", None, "NoneType")], ["Not nullable."]),
])
def test_constraints_reads_each_sentence(description, found, malformed):
    got_found, got_malformed = S.constraints(description)
    assert [(form, value, type(value).__name__) for form, value in got_found] == found
    assert got_malformed == malformed


@pytest.mark.parametrize("description,text", [(None, ""), ("", ""), ("One.", "One."), (["One.", "Two."], "One. Two."),
                                              (["One.", 2], "One. 2"), (7, "7")])
def test_description_text(description, text):
    assert S.description_text(description) == text


# --- the roles and their order ---------------------------------------------------------------------------------


SPEC_COMMON = """
argument_specs:
  validate:
    options:
      x_port: {type: int, default: 5, description: "A port. At least 1."}
      x_shared: {type: str, default: from-common}
"""
SPEC_ALPHA = """
argument_specs:
  main:
    options:
      a_one: {type: bool, default: true}
      x_shared: {type: str, default: from-alpha}
  other:
    options:
      a_two: {type: list, elements: str, default: []}
  empty: null
  no_options: {options: null}
"""
SPEC_BETA = """
argument_specs:
  main:
    options:
      7: {type: int, default: 1}
      b_one:
"""


def test_the_roles_are_read_common_first_then_by_name(tmp_path):
    roles = _roles(tmp_path, {"beta": SPEC_BETA, "common": SPEC_COMMON, "alpha": SPEC_ALPHA, "empty": ""})
    (tmp_path / "nometa").mkdir()
    (tmp_path / "README").write_text("not a role")
    assert [(role, entry, name) for role, entry, name, _spec in S.declarations(roles)] == [
        ("common", "validate", "x_port"), ("common", "validate", "x_shared"), ("alpha", "main", "a_one"),
        ("alpha", "main", "x_shared"), ("alpha", "other", "a_two"), ("beta", "main", "7"), ("beta", "main", "b_one")]
    options = S.load(roles)
    assert list(options) == ["x_port", "x_shared", "a_one", "a_two", "7", "b_one"]
    # the first declaration wins: roles/common's
    assert (options["x_shared"].role, options["x_shared"].entry, options["x_shared"].default) == (
        "common", "validate", "from-common")
    assert (options["a_two"].role, options["a_two"].entry, options["a_two"].elements) == ("alpha", "other", "str")
    assert (options["7"].name, options["7"].type, options["b_one"].type) == ("7", "int", "str")
    assert S.spec_path(roles, "alpha") == os.path.join(roles, "alpha", "meta", "argument_specs.yml")


def test_load_and_declarations_are_copies(tmp_path):
    roles = _roles(tmp_path, {"common": SPEC_COMMON})
    S.load(roles).clear()
    S.declarations(roles).clear()
    assert list(S.load(roles)) == ["x_port", "x_shared"]
    assert len(S.declarations(roles)) == 2


def test_without_common_the_roles_are_read_by_name(tmp_path):
    roles = _roles(tmp_path, {"beta": SPEC_BETA, "alpha": SPEC_ALPHA})
    assert [role for role, _e, _n, _s in S.declarations(roles)] == ["alpha"] * 3 + ["beta"] * 2


def test_a_missing_roles_directory_declares_nothing(tmp_path):
    missing = str(tmp_path / "nowhere")
    assert S.load(missing) == {} and S.declarations(missing) == [] and S.problems(missing) == []
    assert S.host_keys(missing) == () and S.from_fact(missing) == frozenset(["a3"])
    assert D.role_defaults(missing) == {}


def test_the_collections_own_specs_are_the_default():
    assert os.path.basename(D.ROLES_DIR) == "roles" and os.path.isfile(S.spec_path(D.ROLES_DIR, "common"))
    options = S.load()
    assert next(iter(options)) == "a3_business_ip" and options["a3_business_ip"].role == "common"
    assert (options["vllm_api_port"].minimum, options["vllm_api_port"].maximum) == (1, 65535)
    assert S.declarations()[0][:3] == ("common", "validate", "a3_business_ip")
    assert D.role_defaults()["vllm_api_port"] == 6700


# --- the role defaults -------------------------------------------------------------------------------------------


def test_role_defaults_common_first_then_by_name(tmp_path):
    roles = _roles(tmp_path, defaults={"alpha": "x: from-alpha\na: 1\n", "common": "x: from-common\n5: five\n",
                                       "beta": "a: 2\nb: [1, 2]\n", "empty": ""})
    (tmp_path / "nodefaults").mkdir()
    (tmp_path / "README").write_text("not a role")
    defaults = D.role_defaults(roles)
    assert defaults == {"x": "from-common", "5": "five", "a": 1, "b": [1, 2]}
    assert list(defaults) == ["x", "5", "a", "b"]
    defaults.clear()
    assert D.role_defaults(roles)["x"] == "from-common"


def test_role_defaults_without_common(tmp_path):
    roles = _roles(tmp_path, defaults={"beta": "a: 2\n", "alpha": "a: 1\n"})
    assert D.role_defaults(roles) == {"a": 1}


# --- the options derived from the topology fact ------------------------------------------------------------------


SPEC_FACT = """
argument_specs:
  validate:
    options:
      y_first: {type: str}
      y_self: {type: dict}
      y_addr: {type: str}
      y_list: {type: list}
      y_stmt: {type: str}
      y_attr: {type: str}
      y_name: {type: str}
      y_plain: {type: int}
      y_multi: {type: str}
      y_tab: {type: str}
      y_spec: {type: str, default: "{{ y_self.ip }}"}
      y_spec_plain: {type: str, default: "{{ other }}"}
      a3: {type: dict}
"""
DEFAULTS_FACT = """
y_first: "{{ y_addr }}-x"
y_self: "{{ a3.hosts[inventory_hostname] }}"
y_addr: "{{ y_self.ip }}:1"
y_list: ["{{ y_first }}", 2]
y_stmt: "{% if a3 %}1{% endif %}"
y_attr: "{{ foo.a3 }}"
y_name: "{{ a3x }} {{ xa3 }}"
y_plain: 5
y_multi: "{{\n  a3.x }}"
y_tab: "{{ foo\ta3 }}"
y_spec: "plain"
"""


def test_from_fact_follows_the_defaults_through_each_other(tmp_path):
    roles = _roles(tmp_path, {"common": SPEC_FACT}, {"common": DEFAULTS_FACT})
    assert S.from_fact(roles) == frozenset(["a3", "y_self", "y_addr", "y_first", "y_list", "y_stmt", "y_multi",
                                            "y_tab"])
    assert S.host_keys(roles) == ("y_attr", "y_name", "y_plain", "y_spec", "y_spec_plain")


def test_from_fact_reads_the_spec_default_a_role_does_not_ship(tmp_path):
    roles = _roles(tmp_path, {"common": SPEC_FACT}, {"common": "y_self: '{{ a3.me }}'\n"})
    assert S.from_fact(roles) == frozenset(["a3", "y_self", "y_spec"])
    assert S.host_keys(roles) == ("y_first", "y_addr", "y_list", "y_stmt", "y_attr", "y_name", "y_plain", "y_multi",
                                  "y_tab", "y_spec_plain")


def test_the_collections_fact_derived_options():
    assert {"a3", "a3_self", "yuanrong_worker_address", "proxy_admin_url"} <= S.from_fact()
    assert "a3_business_ip" in S.host_keys() and "a3_self" not in S.host_keys()


# --- problems(): the lint of the specs ---------------------------------------------------------------------------


SENTENCES = ("is not one of the description sentences the validation reads (At least N., At most N., Above N., An "
             "absolute path., An absolute path, not C(/)., Not empty., Not null.)")


def test_the_schema_and_sentence_problems(tmp_path):
    spec = """
argument_specs:
  validate:
    options:
      z_keys: {type: int, default: 1, minimum: 1, aliases: [z], zz: 2}
      z_type: {type: integer, default: 1}
      z_text: {default: a, description: "A name. At least one."}
      z_flag: {type: bool, default: true, description: "A flag. At most 3. Not null."}
      z_path: {type: int, default: "{{ x }}", description: "An absolute path. Not empty. Above 0."}
      z_none:
      z_dict:
        type: dict
        default: {}
        options:
          sub: {type: bool, description: "At least 1.", bad: 1}
          deeper:
            type: dict
            options:
              leaf: {type: wrong}
"""
    roles = _roles(tmp_path, {"common": spec})
    where = "roles/common (validate): option "
    assert S.problems(roles) == [
        where + "z_keys has keys the role argument spec schema does not know: minimum, zz",
        where + "z_type has the unknown type 'integer'",
        where + "z_text: 'At least one.' " + SENTENCES,
        where + "z_flag: a maximum sentence does not apply to type bool",
        where + "z_path: a absolute sentence does not apply to type int",
        where + "z_path: a not_empty sentence does not apply to type int",
        where + "z_dict.sub has keys the role argument spec schema does not know: bad",
        where + "z_dict.sub: a minimum sentence does not apply to type bool",
        where + "z_dict.deeper.leaf has the unknown type 'wrong'",
    ]


def test_every_sentence_applies_to_its_types(tmp_path):
    spec = """
argument_specs:
  validate:
    options:
      w_int: {type: int, default: 2, description: "At least 1. At most 3. Above 0. Not null."}
      w_float: {type: float, default: 0.5, description: "At least 0. At most 1. Above 0.1."}
      w_str: {type: str, default: /a, description: "An absolute path, not C(/). Not empty."}
      w_path: {type: path, default: /b, description: "An absolute path. Not empty."}
      w_list: {type: list, default: [], description: "Not null."}
      w_raw: {type: raw, default: 1, description: "Not null."}
      w_ok: {type: jsonarg, required: true, no_log: true, version_added: "1.0", version_added_collection: x,
             apply_defaults: true, mutually_exclusive: [], required_together: [], required_one_of: [],
             required_if: [], required_by: {}, choices: [a], elements: str, options: {}, aliases: []}
"""
    assert S.problems(_roles(tmp_path, {"common": spec})) == []


@pytest.mark.parametrize("kind", sorted(S.TYPES))
def test_the_types_the_schema_knows(tmp_path, kind):
    spec = "argument_specs:\n  validate:\n    options:\n      t: {type: %s}\n" % kind
    assert S.problems(_roles(tmp_path, {"common": spec})) == []


def test_defaults_that_break_their_own_constraints(tmp_path):
    spec = """
argument_specs:
  validate:
    options:
      d_choice: {type: str, default: c, choices: [a, b]}
      d_choice_ok: {type: str, default: b, choices: [a, b]}
      d_list: {type: list, default: [a, z, y], choices: [a, b]}
      d_list_ok: {type: list, default: [b], choices: [a, b]}
      d_list_all: {type: list, default: [b, a], choices: [a, b]}
      d_list_none: {type: list, default: null, choices: [a]}
      d_list_empty: {type: list, default: [], choices: [a]}
      d_min: {type: int, default: 0, description: "At least 1."}
      d_min_ok: {type: int, default: 1, description: "At least 1. At most 1."}
      d_max: {type: float, default: 1.5, description: "At most 1."}
      d_above: {type: float, default: 0, description: "Above 0."}
      d_above_ok: {type: float, default: 0.1, description: "Above 0."}
      d_bool: {type: int, default: true, description: "At least 5."}
      d_text_number: {type: int, default: "0", description: "At least 1."}
      d_abs: {type: path, default: relative/dir, description: "An absolute path."}
      d_abs_number: {type: str, default: 5, description: "An absolute path, not C(/)."}
      d_abs_ok: {type: path, default: /, description: "An absolute path."}
      d_empty: {type: str, default: "  ", description: "Not empty."}
      d_empty_ok: {type: str, default: x, description: "Not empty."}
      d_null: {type: str, default: null, description: "Not empty. An absolute path."}
      d_template: {type: int, default: "{{ x }}", choices: [1], description: "At least 1."}
      d_statement: {type: str, default: "{% if x %}a{% endif %}", choices: [b]}
      d_nodefault: {type: str, choices: [a], description: "Not empty. An absolute path."}
"""
    roles = _roles(tmp_path, {"common": spec})
    assert S.problems(roles) == [
        "roles/common: option d_choice: default 'c' is not one of its choices ['a', 'b']",
        "roles/common: option d_list: default ['a', 'z', 'y'] lists values not in its choices ['a', 'b']",
        "roles/common: option d_min: default 0 breaks its own bound (minimum 1)",
        "roles/common: option d_max: default 1.5 breaks its own bound (maximum 1)",
        "roles/common: option d_above: default 0 breaks its own bound (above 0)",
        "roles/common: option d_abs: default 'relative/dir' is not an absolute path",
        "roles/common: option d_abs_number: default 5 is not an absolute path",
        "roles/common: option d_empty: default '  ' is empty",
    ]


def test_entry_points_and_roles_that_declare_one_option_twice(tmp_path):
    common = """
argument_specs:
  validate:
    options:
      s_shared: &shared {type: int, default: 0, description: "At least 1.", bogus: 1}
      s_same: {type: str, default: a}
      s_differs: {type: str, default: a}
      s_twice: {type: str}
  other:
    options:
      s_shared: *shared
      s_same: {type: str, default: a}
      s_differs: {type: str, default: b}
"""
    alpha = """
argument_specs:
  main:
    options:
      s_twice: {type: str}
      a_own: {type: strr}
      s_pair: {type: str}
"""
    beta = """
argument_specs:
  main:
    options:
      s_twice: {type: int}
      s_pair: {type: str}
  again:
    options:
      s_twice: {type: int}
"""
    roles = _roles(tmp_path, {"common": common, "alpha": alpha, "beta": beta})
    assert S.problems(roles) == [
        "roles/common (validate): option s_shared has keys the role argument spec schema does not know: bogus",
        "roles/common: entry points validate and other declare s_differs differently: share one declaration (a YAML "
        "anchor)",
        "roles/alpha (main): option a_own has the unknown type 'strr'",
        "s_twice is declared in the specs of common, alpha, beta: declare it once, in the role that owns it "
        "(roles/common for a shared value)",
        "s_pair is declared in the specs of alpha, beta: declare it once, in the role that owns it (roles/common for a "
        "shared value)",
        "roles/common: option s_shared: default 0 breaks its own bound (minimum 1)",
    ]


def test_the_collections_specs_have_no_problem():
    assert S.problems() == []
