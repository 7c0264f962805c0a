# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every rule of the inventory validation shares: the declaration of the options a rule reads, the host
every message is written through, the run's context and the value readers.

Every message reads "<host>: <variable> is <value>: <why>; set <what>", so validate() folds a group_vars value
that is wrong on every host into one line. A key absent from a host's dict is skipped (callers that build partial
dicts, e.g. unit tests of the topology, are not affected); so is None (the variable is null), except for an option
whose description says "Not null." or "Not empty." (_specs). A string still holding a Jinja expression is
skipped: it cannot be judged before templating.
"""
from __future__ import annotations

import json
import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _specs
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import SIDES
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import etcd_members_of, proxy_hosts_of

try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # ansible-core depends on packaging; only ansible-test's import check runs without it
    InvalidVersion = ValueError
    Version = None

ABSENT = object()
SECRET = object()  # shown as "(not shown)": the value of a no_log option never appears in a message
PLACEHOLDER_RE = re.compile(r"<[^>]*>|\bxxxx\b|CHANGE_?ME", re.IGNORECASE)
FLAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TRUE, _FALSE = ("true",), ("false",)


def pep440(text):
    """The normalized form of a PEP 440 version (what pip installs for 'name==text' and the installed package then
    reports: 1.0.0-RC1 -> 1.0.0rc1), read by packaging, which ansible-core depends on; None for text that is no
    PEP 440 version (latest, 1..2, 1_0, >=5)."""
    if Version is None:
        raise ImportError("the Python package 'packaging' (a dependency of ansible-core) is missing on the controller")
    try:
        return str(Version(str(text)))
    except InvalidVersion:
        return None


def side_names(*names) -> tuple:
    """Option names with '<side>' written once for both sides: vllm_<side>_tp_size -> vllm_prefill_tp_size, ..."""
    out = []
    for name in names:
        out += [name.replace("<side>", side) for side in SIDES] if "<side>" in name else [name]
    return tuple(out)


def reads(*options, choices=None, types=()):
    """Declare what a rule reads: the options (vllm_<side>_x for both sides), the values of their choices it names
    ({option: (choice, ...)}), and the options whose type and range it checks itself with its own wording (the
    checks derived from the specs leave those alone). tests/unit checks every name against the specs."""
    def mark(function):
        function.reads = side_names(*options)
        function.choices = {name: tuple(values) for name, values in (choices or {}).items()}
        function.types = side_names(*types)
        return function
    return mark


def show(value) -> str:
    if value is SECRET:
        return "(not shown)"
    return "not set" if value is None else repr(value)


def templated(value) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def as_int(value):
    """The integer of an int or a decimal string (what Ansible's int conversion takes), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r"^\s*-?[0-9]+\s*$", value):
        return int(value)
    return None


def is_int(value) -> bool:
    """An int, or text int() reads (the topology's conversion), not a bool."""
    try:
        int(value)
        return not isinstance(value, bool)
    except (TypeError, ValueError):
        return False


def as_float(value):
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def as_bool(value):
    """True/False for a YAML boolean or the text a template gives back ('True', 'false'), else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() == "true"
    return None


def as_mapping(value):
    """A JSON-valued flag's mapping: the dict itself or the JSON text of one, else None."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


class Host:
    """One host's values, and the messages of the rules about it."""

    def __init__(self, name, hv, errors, warnings, specs=None):
        self.name, self.hv, self.errors, self.warnings = name, hv, errors, warnings
        self.specs = _specs.load() if specs is None else specs

    def keeps_null(self, key) -> bool:
        option = self.specs.get(key)
        return option is not None and (option.not_null or option.not_empty)

    def get(self, key):
        """The value, or ABSENT when the key is not in the dict, still a Jinja expression, or None for an option
        that may be null."""
        value = self.hv.get(key, ABSENT)
        if templated(value) or (value is None and not self.keeps_null(key)):
            return ABSENT
        return value

    def error(self, key, value, why_and_what):
        self.errors.append("%s: %s is %s: %s" % (self.name, key, show(value), why_and_what))

    def warn(self, key, value, why_and_what):
        self.warnings.append("%s: %s is %s: %s" % (self.name, key, show(value), why_and_what))


class Context:
    """One validation run: the inventory, the specs and the messages so far."""

    def __init__(self, inv: dict, allow_placeholders: bool, specs: dict):
        self.inv, self.specs = inv, specs
        self.groups, self.hosts = inv.get("groups") or {}, inv.get("hosts") or {}
        self.errors, self.warnings = [], []
        self.placeholder_sink = self.warnings if allow_placeholders else self.errors
        self.members = {}
        for side in SIDES:
            for name in self.groups.get(side) or []:
                self.members.setdefault(name, []).append(side)
        self.ordered = list(self.members)  # inventory order: prefill hosts, then decode hosts
        self.side_of = {h: (s[0] if len(s) == 1 else None) for h, s in self.members.items()}
        self.own_types = frozenset()
        self.bad_numbers = self.inconsistent = False
        self.open_listeners = []
        self.topo = None

    def host(self, name) -> Host:
        return Host(name, self.hosts.get(name) or {}, self.errors, self.warnings, self.specs)

    def anchor(self):
        """(the first prefill host, its values): the values the topology takes the etcd members and the proxy host
        from; (None, None) without a usable first prefill host."""
        first = (self.groups.get("prefill") or [None])[0]
        return (first, self.hosts[first]) if first in self.hosts else (None, None)

    def service_hosts(self):
        """(first etcd member, first proxy host) as the topology names them (the first prefill host's a3_etcd_hosts or
        a3_etcd_host, and its a3_proxy_hosts or a3_proxy_host, else that host), or (None, None) without a usable
        first prefill host."""
        first, values = self.anchor()
        if values is None:
            return None, None
        return etcd_members_of(values, first, self.ordered)[0], proxy_hosts_of(values, first, self.ordered)[0]

    def proxy_hosts(self) -> list:
        """The proxy hosts as the topology names them ([] without a usable first prefill host)."""
        first, values = self.anchor()
        return [] if values is None else proxy_hosts_of(values, first, self.ordered)

    def etcd_hosts(self) -> list:
        """The etcd members' hosts as the topology names them, each once ([] without a usable first prefill host)."""
        first, values = self.anchor()
        return [] if values is None else list(dict.fromkeys(etcd_members_of(values, first, self.ordered)))


@reads()
def check_flag_dict(h, key, program, example, booleans, owned):
    """A {flag: value} option passed as --flag value (ascend.vllm_pd.valued_flags): each flag without dashes, not
    one the role sets itself (owned(flag): why and what to set, or None), each value a scalar (booleans only when
    the program takes true/false)."""
    flags = h.get(key)
    if not isinstance(flags, dict):
        return
    for flag, value in flags.items():
        flag_s = str(flag)
        if flag_s.startswith("-") or not FLAG_RE.match(flag_s):
            h.error(key, {flag: value}, "set %s's flag without dashes, e.g. %s" % (program, example))
        elif owned(flag_s):
            h.error(key, {flag: value}, owned(flag_s))
        elif value is None or isinstance(value, (dict, list)) or (isinstance(value, bool) and not booleans):
            h.error(key, {flag: value}, "%s takes '--%s <value>': set %s" % (
                program, flag_s, "a number, a string or a boolean" if booleans else "a number or a string"))


@reads()
def check_env_names(h, key):
    """A list of environment variable names (to pass into a container, or to unset)."""
    value = h.get(key)
    if isinstance(value, list):
        bad = [x for x in value if not (isinstance(x, str) and ENV_NAME_RE.match(x))]
        if bad:
            h.error(key, value, "%s are not environment variable names: set names such as http_proxy"
                    % ", ".join(repr(b) for b in bad))
