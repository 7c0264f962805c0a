# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks every option gets from its declaration (_specs): its type, its choices, its elements, the bounds and
the path and emptiness constraints its description states ("At least 1.", "An absolute path, not C(/).", ...).
Nothing here names an option: a rule that checks an option's type itself, with its own wording, declares it
(reads(types=...)) and these checks leave that option alone."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import (
    ABSENT, PLACEHOLDER_RE, SECRET, as_bool, as_float, as_int)

_LIST_OF = {"int": "a list of integers", "dict": "a list of mappings"}


def _number(value):
    return ("%d" % value) if float(value).is_integer() else ("%s" % value)


def _bounds_wanted(option, kind):
    """What to set, for an int ('an integer') or a float ('a number') with the option's bounds."""
    if option.above is not None and option.maximum is not None:
        return "set %s above %s and at most %s" % (kind, _number(option.above), _number(option.maximum))
    if option.above is not None:
        return "set %s above %s, e.g. 5 or 0.5" % (kind, _number(option.above))
    if option.minimum is not None and option.maximum is not None:
        return "set %s from %s to %s" % (kind, _number(option.minimum), _number(option.maximum))
    if option.minimum is not None:
        return "set %s >= %s" % (kind, _number(option.minimum))
    if option.maximum is not None:
        return "set %s <= %s" % (kind, _number(option.maximum))
    return "set %s" % kind


def _out_of_bounds(option, number) -> bool:
    return (number is None or (option.minimum is not None and number < option.minimum)
            or (option.maximum is not None and number > option.maximum)
            or (option.above is not None and number <= option.above))


def _list_problem(option, value):
    what = _LIST_OF.get(option.elements, "a list of non-empty strings (quote numbers)")
    if not isinstance(value, list):
        return "set %s, e.g. []" % what
    if option.elements == "int":
        ok = all(as_int(x) is not None for x in value)
    elif option.elements == "dict":
        needed = [k for k, sub in option.suboptions.items() if (sub or {}).get("required")]
        ok = all(isinstance(x, dict) and all(k in x for k in needed) for x in value)
        what += (", each with %s" % " and ".join(needed)) if needed else ""
    else:
        ok = all(isinstance(x, str) and x.strip() for x in value)
    if not ok:
        return "set %s, e.g. []" % what
    bad = [x for x in value if option.choices and x not in option.choices]
    if bad:
        return "%s unknown: set a list of %s" % (", ".join(repr(b) for b in bad), ", ".join(option.choices))
    return None


def _type_problem(option, value):
    """What is wrong with the value's type, choice or bounds, or None."""
    kind = option.type
    if kind == "int" and _out_of_bounds(option, as_int(value)):
        return _bounds_wanted(option, "an integer")
    if kind == "float" and _out_of_bounds(option, as_float(value)):
        return _bounds_wanted(option, "a number")
    if kind == "bool" and as_bool(value) is None:
        return "set true or false (unquoted YAML booleans)"
    if kind == "dict" and not isinstance(value, dict):
        return "set a mapping, e.g. {}"
    if kind == "list":
        return _list_problem(option, value)
    if option.choices and value not in option.choices:
        hint = " (an unquoted no is YAML false: write \"no\")" if value is False and "no" in option.choices else ""
        return "set one of %s%s" % (", ".join(str(c) for c in option.choices), hint)
    return None


def _text_problem(option, value):
    """What is wrong with a path or a value that may not be empty, or None."""
    if option.absolute:
        if not isinstance(value, str) or not value.startswith("/") or PLACEHOLDER_RE.search(value):
            return "set an absolute path (starting with /)"
        if option.not_root and value.rstrip("/") == "":
            return "'/' itself cannot be used here: set a directory of its own"
    if option.not_empty and (value is None or not isinstance(value, (str, int)) or isinstance(value, bool)
                             or str(value).strip() == "" or PLACEHOLDER_RE.search(str(value))):
        return "set a non-empty value, e.g. %s (the default)" % option.default
    return None


def check_option(h, option):
    """The checks one option's declaration gives, on one host."""
    value = h.get(option.name)
    if value is ABSENT:
        return
    why = _type_problem(option, value) or _text_problem(option, value)
    if why:
        h.error(option.name, SECRET if option.no_log and value is not None else value, why)


def check_options(h, ctx):
    """Every declared option of one host, but those a rule checks itself."""
    for name, option in ctx.specs.items():
        if name not in ctx.own_types and name in h.hv:
            check_option(h, option)
