# -*- coding: utf-8 -*-
"""The validation and the specs agree: every option a rule names is declared by a role's argument spec, every
choice a rule names is one of the spec's choices (no Python copy of a choice list), and the checks of a single
option come from its declaration (_specs, _validation.spec_rules)."""
from __future__ import annotations

import ast
import inspect
import re

import pytest

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _specs as S
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _validation as V
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._inventory import SIDES
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import base as B
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import spec_rules

SPECS = S.load()
_PREFIX = r"(?:a3|vllm|container|etcd|yuanrong|proxy|preflight|supervise|monitoring|hugepages|patches|gate|rolling)"
# An option-like word in a string: a role prefix, words joined by '_' ('%s' for the side).
_TOKEN = re.compile(r"(?<![\w.$<>/-])(%s_[a-z0-9_%%]*[a-z0-9])(?![\w.<>/-])" % _PREFIX)
_WHOLE = re.compile(r"^%s_[a-z0-9_%%]*[a-z0-9]$" % _PREFIX)
# Words of that form in the validation's messages that are not options: a mount's parts, this package's module
# names, a key of the derived topology, the datasystem worker's own flags.
NOT_OPTIONS = {"container_path", "vllm_layout", "vllm_start_port", "etcd_address", "etcd_ca", "etcd_cert", "etcd_key",
               "etcd_target_name_override"}


def _expand(name):
    return [name.replace("%s", side) for side in SIDES] if "%s" in name else [name]


def _strings(node):
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def _functions(module):
    tree = ast.parse(inspect.getsource(module))
    return {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("module", V.MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_option_a_rule_names_is_declared(module):
    """Every option-like word of the module's strings (keys, messages, docstrings) is a declared option."""
    unknown = set()
    for text in _strings(ast.parse(inspect.getsource(module))):
        for token in _TOKEN.findall(text):
            unknown |= {name for name in _expand(token) if name not in SPECS and name not in NOT_OPTIONS}
    assert not unknown, "%s names options no role's spec declares: %s" % (module.__name__, sorted(unknown))


def test_every_rule_declares_what_it_reads():
    """A key a rule (or a helper of one) uses as a whole string is among the options it declares with reads()."""
    rules = {(rule.__module__, rule.__name__): rule for rule in V.declared_rules()}
    missing = []
    for module in V.MODULES:
        for name, node in _functions(module).items():
            rule = rules.get((module.__name__, name))
            if rule is None:
                continue
            used = {option for text in _strings(node) if _WHOLE.match(text) for option in _expand(text)}
            used -= NOT_OPTIONS
            if used - set(rule.reads):
                missing.append("%s.%s: %s" % (module.__name__, name, sorted(used - set(rule.reads))))
    assert not missing, "rules that read options they do not declare:\n" + "\n".join(missing)


def test_the_declared_reads_types_and_choices_are_in_the_specs():
    problems = []
    for rule in V.declared_rules():
        where = "%s.%s" % (rule.__module__, rule.__name__)
        problems += ["%s reads %s, which no spec declares" % (where, n) for n in rule.reads if n not in SPECS]
        problems += ["%s checks the type of %s, which it does not read" % (where, n)
                     for n in rule.types if n not in rule.reads]
        for option, values in rule.choices.items():
            if option not in rule.reads:
                problems.append("%s names choices of %s, which it does not read" % (where, option))
            for value in values:
                if value not in (SPECS[option].choices if option in SPECS else ()):
                    problems.append("%s names %r, which is not a choice of %s in its spec" % (where, value, option))
    assert not problems, "\n".join(problems)


def test_every_rule_the_validation_runs_declares_its_reads():
    for rule in V.RULES:
        assert hasattr(rule, "reads"), rule.__name__


@pytest.mark.parametrize("module", V.MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_no_python_copy_of_a_spec_choice_list(module):
    """Choices come from the spec: no tuple or list of strings in the validation equals an option's choices."""
    choice_sets = {frozenset(o.choices): name for name, o in SPECS.items() if len(o.choices) > 1}
    copies = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, (ast.Tuple, ast.List)) and node.elts \
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            found = frozenset(e.value for e in node.elts)
            if found in choice_sets:
                copies.append("%s (the choices of %s)" % (sorted(found), choice_sets[found]))
    assert not copies, "%s copies spec choices: %s" % (module.__name__, copies)


def test_the_options_with_choices():
    assert SPECS["vllm_kv_pool_backend"].choices == ("yuanrong", "mooncake", "memcache")
    assert SPECS["preflight_hccn_checks"].choices == ("vnic", "link", "net_health", "tls", "ip", "hccs_ping")
    assert SPECS["container_restart_policy"].choices == SPECS["proxy_restart_policy"].choices


def test_the_description_sentences_are_read():
    assert (SPECS["container_pull_delay"].minimum, SPECS["proxy_max_body_bytes"].minimum) == (0, 1024)
    assert (SPECS["vllm_api_port"].minimum, SPECS["vllm_api_port"].maximum) == (1, 65535)
    assert SPECS["proxy_probe_interval"].above == 0 and SPECS["monitoring_kv_cache_usage_max"].maximum == 1
    assert SPECS["a3_host_work_dir"].not_root and SPECS["etcd_unit_file"].absolute and not SPECS["etcd_unit_file"].not_root
    assert SPECS["vllm_served_model_name"].not_empty and SPECS["vllm_env_common"].not_null
    assert SPECS["a3_work_dir"].role == "common" and SPECS["vllm_health_timeout"].role == "vllm"


def _host(**values):
    return B.Host("p0", values, [], [], SPECS)


@pytest.mark.parametrize("name,value,message", [
    ("vllm_health_timeout", 0, "p0: vllm_health_timeout is 0: set an integer >= 1"),
    ("container_pull_delay", -1, "p0: container_pull_delay is -1: set an integer >= 0"),
    ("monitoring_prometheus_port", 70000, "p0: monitoring_prometheus_port is 70000: set an integer from 1 to 65535"),
    ("proxy_probe_timeout", "soon", "p0: proxy_probe_timeout is 'soon': set a number above 0, e.g. 5 or 0.5"),
    ("monitoring_kv_cache_usage_max", 1.5, "p0: monitoring_kv_cache_usage_max is 1.5: set a number above 0 and at "
                                           "most 1"),
    ("etcd_remove_data", "yes", "p0: etcd_remove_data is 'yes': set true or false (unquoted YAML booleans)"),
    ("preflight_own_pids", ["x"], "p0: preflight_own_pids is ['x']: set a list of integers, e.g. []"),
    ("vllm_fatal_signatures", [{"pattern": "x"}], "p0: vllm_fatal_signatures is [{'pattern': 'x'}]: set a list of "
                                                  "mappings, each with pattern and advice, e.g. []"),
    ("preflight_tls_scope", "some", "p0: preflight_tls_scope is 'some': set one of all, device"),
    ("etcd_data_dir", "/", "p0: etcd_data_dir is '/': '/' itself cannot be used here: set a directory of its own"),
    ("hugepages_sysctl_file", "sysctl.conf", "p0: hugepages_sysctl_file is 'sysctl.conf': set an absolute path "
                                             "(starting with /)"),
    ("proxy_python", " ", "p0: proxy_python is ' ': set a non-empty value, e.g. python (the default)"),
    ("vllm_env_extra", None, "p0: vllm_env_extra is not set: set a mapping, e.g. {}"),
    ("proxy_admin_headers", "x", "p0: proxy_admin_headers is (not shown): set a mapping, e.g. {}"),
])
def test_a_declaration_gives_the_check(name, value, message):
    h = _host(**{name: value})
    spec_rules.check_option(h, SPECS[name])
    assert h.errors == [message]


@pytest.mark.parametrize("name,value", [("vllm_health_timeout", "240"), ("etcd_remove_data", "True"),
                                        ("preflight_hccn_checks", ["vnic", "tls"]), ("vllm_decode_engine_id", None),
                                        ("etcd_data_dir", "{{ x }}"), ("proxy_probe_interval", 0.5),
                                        ("etcd_data_dir", "/X"), ("etcd_data_dir", "/x/")])
def test_values_the_declaration_accepts(name, value):
    h = _host(**{name: value})
    spec_rules.check_option(h, SPECS[name])
    assert h.errors == []
