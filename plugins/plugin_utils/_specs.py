# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' argument specs, read on the controller: the one declaration of every option.

Every option is declared once, in roles/<role>/meta/argument_specs.yml of the role that owns it (the role whose
defaults/main.yml ships it; the shared values in roles/common's entry point validate). load() returns, per option,
its type, elements, choices, owning role, description and default; the inventory validation derives its type,
choice, range, list and dict checks from them, and the inventory reader the per-host keys it collects.

What an argument spec cannot say natively is written as sentences of the option's description, each a sentence of
its own (after a full stop, or starting a description item), so that the rendered docs read them as they are:

    At least N.                    the minimum of an int or float option (N a number; inclusive)
    At most N.                     its maximum (inclusive)
    Above N.                       an exclusive minimum (e.g. seconds of a float option: Above 0.)
    An absolute path.              a str/path option whose value must start with /
    An absolute path, not C(/).    the same, and / itself is refused (a directory the roles create, mount or fill)
    Not empty.                     a str/path option that may not be empty, null or a placeholder
    Not null.                      null is an error, not "leave it to the role" (any type)

A sentence that starts like one of them ("At least", "At most", "Above", "An absolute path", "Not empty",
"Not null", "Not C(") but does not read exactly so, or one on an option of another type, is malformed:
problems() names it (tests/lint/test_role_specs.py fails on it), as it names an option declared in two spec files
and a key the schema of a role argument spec (ansible-test sanity) does not know.

Pure functions, no Ansible imports.
"""
from __future__ import annotations

import functools
import os
import re

import yaml

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._defaults import ROLES_DIR, role_defaults

# roles/common ships the values several roles share; its spec comes first.
FIRST = "common"
# The topology fact roles/common's task sets once per host per run (not an inventory value).
FACTS = ("a3",)
# Keys an option of a role argument spec may have (ansible-test sanity's schema for role argument specs).
OPTION_KEYS = frozenset(("type", "elements", "choices", "default", "description", "required", "options", "aliases",
                         "no_log", "version_added", "version_added_collection", "apply_defaults",
                         "mutually_exclusive", "required_together", "required_one_of", "required_if", "required_by"))
TYPES = frozenset(("str", "int", "float", "bool", "list", "dict", "path", "raw", "bytes", "bits", "json", "jsonarg"))
_NUMBER = r"(-?[0-9]+(?:\.[0-9]+)?)"
_FORMS = (
    ("minimum", re.compile(r"^At least %s\.$" % _NUMBER)),
    ("maximum", re.compile(r"^At most %s\.$" % _NUMBER)),
    ("above", re.compile(r"^Above %s\.$" % _NUMBER)),
    ("not_root", re.compile(r"^An absolute path, not C\(/\)\.$")),
    ("absolute", re.compile(r"^An absolute path\.$")),
    ("not_empty", re.compile(r"^Not empty\.$")),
    ("not_null", re.compile(r"^Not null\.$")),
)
_STARTS = ("At least", "At most", "Above", "An absolute path", "Not empty", "Not null", "Not C(")
_APPLIES = {"minimum": ("int", "float"), "maximum": ("int", "float"), "above": ("int", "float"),
            "not_root": ("str", "path"), "absolute": ("str", "path"), "not_empty": ("str", "path"),
            "not_null": tuple(TYPES)}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A Jinja reference to the topology fact or this host's entry of it.
_FACT_RE = re.compile(r"\{[{%][^}]*?(?<![\w.])(a3|a3_self)(?!\w)")
_NAME_RE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)")


class Option:
    """One option as its owning role declares it, with the constraints its description sentences state."""

    def __init__(self, name, role, entry, spec):
        self.name, self.role, self.entry = name, role, entry
        spec = spec or {}
        self.type = spec.get("type") or "str"
        self.elements = spec.get("elements")
        self.choices = tuple(spec.get("choices") or ())
        self.has_default = "default" in spec
        self.default = spec.get("default")
        self.required = bool(spec.get("required"))
        self.no_log = bool(spec.get("no_log"))
        self.suboptions = dict(spec.get("options") or {})
        self.description = description_text(spec.get("description"))
        self.minimum = self.maximum = self.above = None
        self.absolute = self.not_root = self.not_empty = self.not_null = False
        for form, value in constraints(spec.get("description"))[0]:
            self._apply(form, value)

    def _apply(self, form, value):
        if form in ("minimum", "maximum", "above"):
            setattr(self, form, value)
        elif form == "not_root":
            self.absolute = self.not_root = True
        else:
            setattr(self, form, True)

    def __repr__(self):
        return "Option(%s of %s: %s)" % (self.name, self.role, self.type)


def description_text(description) -> str:
    """The description as one text (a list's items joined)."""
    if isinstance(description, list):
        return " ".join(str(item) for item in description)
    return str(description or "")


def _number(text):
    return float(text) if "." in text else int(text)


def constraints(description):
    """([(form, value)], [malformed sentence]) of a description: value is the number of a bound, else None."""
    found, malformed = [], []
    items = description if isinstance(description, list) else [description or ""]
    for item in items:
        for sentence in _SENTENCE_END.split(str(item).strip()):
            sentence = sentence.strip()
            if not sentence.startswith(_STARTS):
                continue
            for form, pattern in _FORMS:
                match = pattern.match(sentence)
                if match:
                    found.append((form, _number(match.group(1)) if match.groups() else None))
                    break
            else:
                malformed.append(sentence)
    return found, malformed


def _role_names(roles_dir):
    names = sorted(n for n in os.listdir(roles_dir) if os.path.isfile(spec_path(roles_dir, n))) \
        if os.path.isdir(roles_dir) else []
    return ([FIRST] if FIRST in names else []) + [n for n in names if n != FIRST]


def spec_path(roles_dir, role):
    return os.path.join(roles_dir, role, "meta", "argument_specs.yml")


def _entry_points(roles_dir, role) -> dict:
    with open(spec_path(roles_dir, role), encoding="utf-8") as handle:
        return (yaml.safe_load(handle) or {}).get("argument_specs") or {}


@functools.lru_cache(maxsize=None)
def _read(roles_dir: str):
    """({name: Option}, [(role, entry point, name, spec)]) of every role, common first."""
    options, declared = {}, []
    for role in _role_names(roles_dir):
        for entry, body in _entry_points(roles_dir, role).items():
            for name, spec in ((body or {}).get("options") or {}).items():
                declared.append((role, entry, str(name), spec))
                options.setdefault(str(name), Option(str(name), role, entry, spec))
    return options, declared


def load(roles_dir: str = ROLES_DIR) -> dict:
    """{option name: Option} of every role's spec (a copy of the cached dict; the Options are shared)."""
    return dict(_read(roles_dir)[0])


def declarations(roles_dir: str = ROLES_DIR) -> list:
    """[(role, entry point, option name, spec)]: every option of every entry point of every role."""
    return list(_read(roles_dir)[1])


def _fact_names(value) -> set:
    """Names a default's Jinja expressions use ('{{ a3.hosts[inventory_hostname] }}' -> a3, inventory_hostname)."""
    text = yaml.safe_dump(value) if not isinstance(value, str) else value
    names = set()
    for expr in re.findall(r"\{\{(.*?)\}\}|\{%(.*?)%\}", text, re.S):
        names.update(_NAME_RE.findall(expr[0] or expr[1]))
    return names


def from_fact(roles_dir: str = ROLES_DIR) -> frozenset:
    """Options whose default needs the topology fact, directly or through another such option (a3_self,
    yuanrong_worker_address, ...): the inventory reader does not collect them, and roles/common's spec cannot
    carry them (Ansible templates what a spec names when it checks the role, before the fact exists)."""
    defaults = role_defaults(roles_dir)
    for name, option in _read(roles_dir)[0].items():
        if option.has_default:
            defaults.setdefault(name, option.default)
    derived = set(FACTS)
    grown = True
    while grown:
        grown = False
        for name, value in defaults.items():
            if name not in derived and _fact_names(value) & derived:
                derived.add(name)
                grown = True
    return frozenset(derived)


def host_keys(roles_dir: str = ROLES_DIR) -> tuple:
    """The per-host keys the inventory reader collects: every declared option but the fact and what derives
    from it, in declaration order (roles/common first)."""
    derived = from_fact(roles_dir)
    return tuple(name for name in _read(roles_dir)[0] if name not in derived)


def _templated(value) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _default_breaks(option) -> str:
    """Why the option's own default breaks one of its constraints, or ''."""
    value = option.default
    if not option.has_default or value is None or _templated(value):
        return ""
    if option.choices and option.type != "list" and value not in option.choices:
        return "default %r is not one of its choices %s" % (value, list(option.choices))
    if option.type == "list" and option.choices and not set(value or []) <= set(option.choices):
        return "default %r lists values not in its choices %s" % (value, list(option.choices))
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    for bound, broken in (("minimum", lambda b: number < b), ("maximum", lambda b: number > b),
                          ("above", lambda b: number <= b)):
        if number is not None and getattr(option, bound) is not None and broken(getattr(option, bound)):
            return "default %r breaks its own bound (%s %s)" % (value, bound, getattr(option, bound))
    if option.absolute and not str(value).startswith("/"):
        return "default %r is not an absolute path" % (value,)
    if option.not_empty and not str(value).strip():
        return "default %r is empty" % (value,)
    return ""


def _option_problems(where, name, spec, prefix="") -> list:
    """Schema and convention problems of one option (and its suboptions)."""
    out = []
    spec = spec if isinstance(spec, dict) else {}
    unknown = sorted(set(spec) - OPTION_KEYS)
    if unknown:
        out.append("%s: option %s%s has keys the role argument spec schema does not know: %s"
                   % (where, prefix, name, ", ".join(unknown)))
    kind = spec.get("type") or "str"
    if kind not in TYPES:
        out.append("%s: option %s%s has the unknown type %r" % (where, prefix, name, kind))
    found, malformed = constraints(spec.get("description"))
    for sentence in malformed:
        out.append("%s: option %s%s: %r is not one of the description sentences the validation reads (At least N., "
                   "At most N., Above N., An absolute path., An absolute path, not C(/)., Not empty., Not null.)"
                   % (where, prefix, name, sentence))
    for form, _unused in found:
        if kind not in _APPLIES[form]:
            out.append("%s: option %s%s: a %s sentence does not apply to type %s" % (where, prefix, name, form, kind))
    for sub, sub_spec in (spec.get("options") or {}).items():
        out += _option_problems(where, sub, sub_spec, prefix + name + ".")
    return out


def problems(roles_dir: str = ROLES_DIR) -> list:
    """What is wrong with the specs as the one declaration of every option: an option declared in two roles'
    files, entry points of one file that disagree, keys the schema does not know, malformed or misplaced
    description sentences, a default that breaks its own constraints."""
    out, seen, roles_of = [], {}, {}
    options, declared = _read(roles_dir)
    for role, entry, name, spec in declared:
        roles_of.setdefault(name, [])
        if role not in roles_of[name]:
            roles_of[name].append(role)
        first = seen.setdefault((role, name), (entry, spec))
        if first[1] is spec:
            if first[0] == entry:
                out += _option_problems("roles/%s (%s)" % (role, entry), name, spec)
        elif first[1] != spec:
            out.append("roles/%s: entry points %s and %s declare %s differently: share one declaration (a YAML "
                       "anchor)" % (role, first[0], entry, name))
    for name, roles in roles_of.items():
        if len(roles) > 1:
            out.append("%s is declared in the specs of %s: declare it once, in the role that owns it (roles/common "
                       "for a shared value)" % (name, ", ".join(roles)))
    for name, option in options.items():
        broken = _default_breaks(option)
        if broken:
            out.append("roles/%s: option %s: %s" % (option.role, name, broken))
    return out
