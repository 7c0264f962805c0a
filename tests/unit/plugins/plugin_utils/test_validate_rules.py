# -*- coding: utf-8 -*-
"""The validation rules (plugins/plugin_utils/_validation) on plain dicts.

The base inventory is built from the real files: every role default, then inventories/<name>/group_vars/all
and hosts.yml, templated the way hostvars would be (a value that needs a3/a3_self stays unrendered and the
rules skip it). One test per rule: the message names the host(s), the variable, the value and what to set.
"""
from __future__ import annotations

import ast
import copy
import re
import warnings
from pathlib import Path

import jinja2
import pytest
import yaml

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _specs as S
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _topology as T
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils import _validation as V
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import base as B
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation import proxy as P

ROOT = Path(__file__).resolve().parents[4]
SEED_IPS = {"p0": "192.0.2.11", "p1": "192.0.2.12", "d0": "192.0.2.13", "d1": "192.0.2.14"}
ALL = "p0, p1, d0, d1"


def _yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def _jinja():
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters.update({"ascend.vllm_pd.size_mib": T.size_mib, "ascend.vllm_pd.docker_size": T.docker_size,
                        "regex_escape": re.escape, "int": lambda v, *a: int(v),
                        "regex_search": lambda v, p: (re.search(p, v).group(0) if re.search(p, v) else "")})
    return env


def _render(value, context, env):
    if isinstance(value, dict):
        return {k: _render(v, context, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, context, env) for v in value]
    if isinstance(value, str) and "{{" in value:
        try:
            out = env.from_string(value).render(context)
        except Exception:  # pylint: disable=broad-except
            return value  # needs a3/a3_self or an Ansible filter: stays a template, the rules skip it
        if out[:1] in "{[" and value.strip().startswith("{{") and value.strip().endswith("}}"):
            try:  # Ansible gives a template that evaluates to a mapping or a list as one (a native type)
                return ast.literal_eval(out)
            except (ValueError, SyntaxError):
                return out
        return out
    return value


def load_inventory(name):
    """{groups, hosts} as from_hostvars would give it for inventories/<name> (role defaults underneath)."""
    base = {}
    for path in sorted(ROOT.glob("roles/*/defaults/main.yml")):
        base.update(_yaml(path))
    inv_dir = ROOT / "inventories" / name
    for path in sorted((inv_dir / "group_vars" / "all").glob("*.yml")):
        base.update(_yaml(path))
    groups, hosts = {}, {}
    env = _jinja()
    for group, body in _yaml(inv_dir / "hosts.yml").items():
        groups[group] = list((body.get("hosts") or {}).keys())
        for host, hv in (body.get("hosts") or {}).items():
            values = dict(base, inventory_dir=str(inv_dir), inventory_hostname=host, **(hv or {}))
            if B.PLACEHOLDER_RE.search(str(values["a3_business_ip"])):
                values.update(a3_business_ip=SEED_IPS[host], a3_nic_name="bond0")
            with warnings.catch_warnings():  # Ansible-only escapes in regex_search arguments
                warnings.simplefilter("ignore", DeprecationWarning)
                for _unused in range(4):  # templates referring to templates
                    values = {k: _render(v, values, env) for k, v in values.items()}
            hosts[host] = {key: values.get(key) for key in S.host_keys()}
    return {"groups": groups, "hosts": hosts}


SEED = load_inventory("a3")
SIM = load_inventory("sim")
SEED_ERRORS, SEED_WARNINGS = V.validate(SEED)


def seed(**everywhere):
    """The seed inventory with these values on every host; like hostvars, the role default of
    patches_vllm_ascend_version follows a changed container_image_tag."""
    inv = copy.deepcopy(SEED)
    for key, value in everywhere.items():
        for hv in inv["hosts"].values():
            hv[key] = copy.deepcopy(value)
    if "container_image_tag" in everywhere and "patches_vllm_ascend_version" not in everywhere:
        match = re.search(r"[0-9]+\.[0-9]+\.[0-9]+(rc[0-9]+)?", str(everywhere["container_image_tag"]))
        for hv in inv["hosts"].values():
            hv["patches_vllm_ascend_version"] = match.group(0) if match else ""
    return inv


def new_messages(inv, kind):
    errors, warnings = V.validate(inv)
    if kind == "error":
        return errors
    return [w for w in warnings if w not in SEED_WARNINGS]


def one(inv, kind="error", prefix=ALL, must=(), count=1):
    """The message of this rule: the only new one (count), starting with the host(s), with every text in must."""
    msgs = new_messages(inv, kind)
    assert len(msgs) == count, msgs
    hits = [m for m in msgs if m.startswith(prefix + ": ") and all(s in m for s in must)]
    assert hits, "no %s starting with %r containing %r in %s" % (kind, prefix, must, msgs)
    assert "set" in hits[0] or "remove" in hits[0] or "take" in hits[0] or "add" in hits[0], hits[0]
    return hits[0]


# --- the shipped values pass ------------------------------------------------------------------------------


# The seed's own values that upstream later found wrong (issue 16, field rules): warnings, never errors.
FIELD_WARNINGS = ("VLLM_NIXL_ABORT_REQUEST_TIMEOUT (set in vllm_env_common)", "'num_speculative_tokens': 3",
                  "recompute_scheduler_enable is on for the prefill side")


OPEN_LISTENERS = ("listeners that take requests without credentials: the proxy's public port (set proxy_api_keys); "
                  "the engines' /v1 routes (set vllm_api_key); etcd on p0 (set etcd_tls: true). That is the seed's "
                  "configuration; README 'Security' says how to turn each protection on")


def _seed_kind(warning):
    if warning == OPEN_LISTENERS:
        return "open"
    return "band" if "random port band" in warning else [f for f in FIELD_WARNINGS if f in warning]


def test_seed_values_pass_with_only_the_mooncake_band_field_and_open_listener_warnings():
    assert SEED_ERRORS == []
    kinds = [_seed_kind(w) for w in SEED_WARNINGS]
    assert kinds.count("band") == 4 and kinds.count("open") == 1 and len(kinds) == 8, SEED_WARNINGS
    assert sorted(k[0] for k in kinds if k not in ("band", "open")) == sorted(FIELD_WARNINGS), SEED_WARNINGS


def test_simulation_values_pass():
    errors, warnings = V.validate(SIM)
    assert errors == []
    assert all(_seed_kind(w) for w in warnings), warnings
    # the simulation really is different: small pool, loopback listen addresses, a loopback wheel URL, short timeouts
    p0 = SIM["hosts"]["p0"]
    seen = (p0["hugepages_target"], p0["a3_listen_address"], p0["yuanrong_install_from"])
    assert seen == ("128M", "127.30.0.11", "url")
    assert p0["yuanrong_wheel_url"].startswith("http://127.0.0.1:5001/openyuanrong_datasystem-0.8.1-")
    assert p0["vllm_env_extra"] == {"VLLM_ENGINE_READY_TIMEOUT_S": "60", "HCCL_EXEC_TIMEOUT": "90"}
    assert p0["vllm_canary_timeout"] == 5 and (p0["vllm_down_grace"], p0["vllm_peer_wait"]) == (15, 40)


def test_every_variable_a_rule_reads_is_a_host_key():
    """The inventory reader collects every option a rule reads (the keys come from the specs)."""
    keys = S.host_keys()
    for rule in V.declared_rules():
        assert set(rule.reads) <= set(keys), (rule.__name__, sorted(set(rule.reads) - set(keys)))
    assert len(set(keys)) == len(keys) and set(T.TOPOLOGY_KEYS) <= set(keys)


def test_no_host_key_refers_to_the_topology():
    """The topology filter reads TOPOLOGY_KEYS to build a3, the validation every host key: a key whose value needs
    a3 or a3_self would recurse."""
    raw = {}
    for path in list(ROOT.glob("roles/*/defaults/main.yml")) + list(ROOT.glob("inventories/*/group_vars/all/*.yml")):
        for key, value in _yaml(path).items():
            raw.setdefault(key, []).append(value)
    for key in S.host_keys():
        for value in raw.get(key, []):
            assert not re.search(r"\{\{[^}]*\ba3(_self)?\b(?!_)", yaml.safe_dump(value)), (key, value)


def test_null_knob_is_skipped_but_a_required_variable_is_not_set():
    """Role defaults are not hostvars: a knob read as None is not judged; a variable without default is."""
    assert V.validate(seed(vllm_health_timeout=None, proxy_probe_interval=None, container_extra_env=None))[0] == []
    one(seed(vllm_model_path=None), must=("vllm_model_path is not set", "set an absolute path"))


def test_absent_keys_are_skipped_and_templates_are_not_judged():
    inv = seed()
    for hv in inv["hosts"].values():
        del hv["container_image_tag"]
        hv["vllm_health_timeout"] = "{{ some_var }}"
    assert V.validate(inv)[0] == []


# --- hugepages ----------------------------------------------------------------------------------------------


def test_hugepage_target_zero_would_free_the_pool():
    one(seed(hugepages_target="0"), must=("hugepages_target is '0'", "free the hugepage pool", "set the pool size"))


def test_hugepage_target_below_one_page():
    msg = one(seed(hugepages_target="1M"), must=("hugepages_target is '1M'", "zero hugepages"), count=2)
    assert msg


def test_hugepage_page_size_the_kernel_has_not():
    one(seed(hugepages_page_size="4M", hugepages_target="512G"),
        must=("hugepages_page_size is '4M'", "no hugepages of that size", "2M, 32M, 512M, 1G"))


# --- container and image ------------------------------------------------------------------------------------


def test_empty_image_tag():
    one(seed(container_image_tag=""), must=("container_image_tag is ''", "set the image tag as a quoted string"))


def test_image_tag_with_a_space():
    one(seed(container_image_tag="v0.18.0 a3"), must=("container_image_tag is 'v0.18.0 a3'",))


def test_image_tag_without_patch_row():
    one(seed(container_image_tag="v0.19.0-a3"),
        must=("container_image_tag is 'v0.19.0-a3'", "vllm-ascend 0.19.0", "no row in patches_table",
              "rows: 0.18.0, 0.18.0rc1", "yuanrong backend missing", "add a '0.19.0' row"))


def test_image_tag_without_version():
    one(seed(container_image_tag="latest"), must=("container_image_tag is 'latest'", "no vllm-ascend version",
                                                  "patches_vllm_ascend_version"))


def test_image_tag_without_patch_row_with_the_templated_default():
    """With role defaults templated (hostvars), patches_vllm_ascend_version shows the tag's version: the
    message still names the tag."""
    one(seed(container_image_tag="v0.19.0-a3", patches_vllm_ascend_version="0.19.0"),
        must=("container_image_tag is 'v0.19.0-a3'", "no row in patches_table"))


def test_patch_version_override_without_row():
    one(seed(patches_vllm_ascend_version="0.17.0"),
        must=("patches_vllm_ascend_version is '0.17.0'", "no row in patches_table"))


def test_registry_with_scheme():
    one(seed(container_registry="https://quay.io"), must=("container_registry is 'https://quay.io'", "without scheme"))


def test_registry_forms_that_pass():
    for registry in ("", "quay.io", "m.daocloud.io/quay.io", "127.0.0.1:5000", "registry.local:443/mirror"):
        assert V.validate(seed(container_registry=registry))[0] == [], registry


def test_image_name_with_uppercase():
    one(seed(container_image_name="Ascend/vllm-ascend"), must=("container_image_name is 'Ascend/vllm-ascend'",))


def test_container_name_docker_refuses():
    one(seed(container_name="yr glm5"), must=("container_name is 'yr glm5'", "docker container name"))


def test_proxy_container_name_equal_to_the_engines():
    one(seed(proxy_container_name="yr_glm5"),
        must=("proxy_container_name is 'yr_glm5'", "replace the engines' container"))


def test_malformed_volume():
    one(seed(container_extra_volumes=["/data"]), must=("container_extra_volumes is '/data'", "host_path:container_path"))


def test_two_mounts_at_one_container_path():
    one(seed(container_extra_volumes=["/srv:/data"]), must=("container_volumes is ['/data:/data', '/srv:/data']",
                                                            "two mounts"))


def test_mount_over_the_work_dir():
    one(seed(container_extra_volumes=["/srv:/workspace/glm5-a3-large-ep"]),
        must=("a3_work_dir is '/workspace/glm5-a3-large-ep'", "second mount"))


def test_model_path_outside_every_mount():
    one(seed(vllm_model_path="/models/GLM-5.1-w8a8"), kind="warning",
        must=("vllm_model_path is '/models/GLM-5.1-w8a8'", "add a mount of its directory"))


def test_container_extra_env_value_not_a_string():
    one(seed(container_extra_env={"HF_HUB_OFFLINE": 1}), must=("container_extra_env is {'HF_HUB_OFFLINE': 1}",
                                                               "quoted string values"))


def test_restart_policy_unquoted_no():
    one(seed(container_restart_policy=False), must=("container_restart_policy is False", 'write "no"'))


def test_devices_are_paths():
    one(seed(container_devices=["davinci0"]), must=("container_devices is ['davinci0']", "/dev/davinci_manager"))


# --- patches ------------------------------------------------------------------------------------------------


def _with_row(row):
    inv = seed()
    for hv in inv["hosts"].values():
        hv["patches_table"] = dict(hv["patches_table"], **{"0.18.0": row})
    return inv


def test_patch_without_repo():
    one(_with_row([{"file": "0001-Implement-yuanrong-backend.patch", "purpose": "x"}]),
        must=("patches_table is {'0.18.0': [{", "file (a file name", "repo (the absolute path"))


def test_patch_without_purpose():
    one(_with_row([{"file": "0001-Implement-yuanrong-backend.patch", "repo": "/vllm-workspace/vllm-ascend"}]),
        kind="warning", must=("patches_table is", "set purpose"))


def test_yuanrong_backend_without_its_patch():
    one(_with_row([{"file": "0001-other.patch", "repo": "/vllm-workspace/vllm", "purpose": "x"}]), kind="warning",
        must=("patches_table is {'0.18.0': ['0001-other.patch']}", "no yuanrong backend", "Implement-yuanrong"))


@pytest.mark.parametrize("pin,what", [(5.1, "set it quoted"), ("", "exact version"), (">=5.2", "exact version"),
                                      (None, "exact version"),
                                      # no PEP 440 version (packaging reads them), which pip refuses after '=='
                                      ("latest", "exact version"), ("1..2", "exact version"),
                                      ("1_0", "exact version"), ("5.*", "exact version"),
                                      ("==5.2.0", "exact version"), ("5.2.0,<6", "exact version")])
def test_pip_pin_versions(pin, what):
    one(seed(patches_pip_pins={"transformers": pin}), must=("patches_pip_pins is {'transformers': %r}" % (pin,), what))


@pytest.mark.parametrize("pin", ["5.2.0", "5.2", 5, "5.2.0rc1", "5.2.0.post1", "5.2.0.dev3", "1!5.2.0", "2.1.0+cpu",
                                 "2.1.0+cu121.x"])
def test_pip_pins_pep_440_accepts(pin):
    errors, warnings = V.validate(seed(patches_pip_pins={"transformers": pin}))
    assert errors == [] and [w for w in warnings if w not in SEED_WARNINGS] == []


@pytest.mark.parametrize("pin,normal", [("5.2.0-RC1", "5.2.0rc1"), ("v5.2.0", "5.2.0"), ("5.02.0", "5.2.0"),
                                        ("5.2.0-1", "5.2.0.post1"), (" 5.2.0", "5.2.0")])
def test_pip_pin_in_another_spelling_than_pips_is_a_warning(pin, normal):
    # the role compares the version the container reports (the normalized one) with the pin's text
    msg = one(seed(patches_pip_pins={"transformers": pin}), kind="warning",
              must=("patches_pip_pins is {'transformers': %r}" % pin, "pip reads it as version %s," % normal,
                    'set transformers: "%s"' % normal))
    assert "reinstall on every run" in msg


# --- etcd (the etcd host only) ---------------------------------------------------------------------------------


def test_etcd_version_format():
    one(seed(etcd_version="3.5.12"), prefix="p0", must=("etcd_version is '3.5.12'", "set vX.Y.Z"))


def test_etcd_version_without_checksum():
    one(seed(etcd_version="v3.5.13"), prefix="p0",
        must=("etcd_version is 'v3.5.13'", "no sha256", "add etcd_checksums['v3.5.13']", "etcd_archive_src"))


def test_etcd_checksum_format():
    one(seed(etcd_checksums={"v3.5.12": {"amd64": "abc", "arm64": "sha256:" + "0" * 64}}), prefix="p0",
        must=("etcd_checksums is {'v3.5.12':", "sha256:<64 hex>"))


def test_etcd_name():
    one(seed(etcd_name="etcd single"), prefix="p0", must=("etcd_name is 'etcd single'", "--initial-cluster"))


def test_etcd_download_url():
    one(seed(etcd_download_base_url="github.com/etcd-io/etcd/releases/download"), prefix="p0",
        must=("etcd_download_base_url is 'github.com", "http(s) URL"))


def test_etcd_rules_follow_a3_etcd_host():
    inv = seed(etcd_name="etcd single", a3_etcd_host="d1")
    one(inv, prefix="d1", must=("etcd_name is 'etcd single'",))


# --- openYuanrong -------------------------------------------------------------------------------------------


def test_node_dead_timeout_not_above_node_timeout():
    one(seed(yuanrong_node_dead_timeout_s=20), must=("yuanrong_node_dead_timeout_s is 20", "greater than "
                                                     "yuanrong_node_timeout_s (20)", "set a larger value"))


@pytest.mark.parametrize("flags,must", [
    ({"node_timeout_s": 5}, ("yuanrong_worker_flags is {'node_timeout_s': 5}", "set yuanrong_node_timeout_s instead")),
    ({"worker_address": "127.0.0.1:1"}, ("sets --worker_address itself", "set yuanrong_worker_port instead")),
    ({"--rpc_thread_num": 2}, ("yuanrong_worker_flags is {'--rpc_thread_num': 2}", "without dashes")),
    ({"rpc_thread_num": None}, ("yuanrong_worker_flags is {'rpc_thread_num': None}", "set a number")),
])
def test_worker_flags(flags, must):
    one(seed(yuanrong_worker_flags=flags), must=must)


def test_worker_flags_accepted():
    assert not new_messages(seed(yuanrong_worker_flags={"rpc_thread_num": 2, "log_monitor": False}), "error")


def test_node_timeout_of_one_second():
    one(seed(yuanrong_node_timeout_s=1), kind="warning", must=("yuanrong_node_timeout_s is 1", "set 2 or more"))


def test_wheel_url_not_a_wheel():
    one(seed(yuanrong_wheel_url="https://example.invalid/datasystem.tar.gz"),
        must=("yuanrong_wheel_url is 'https://example.invalid/datasystem.tar.gz'", "set the wheel's URL"))


def test_wheel_version_differs_from_package_version():
    one(seed(yuanrong_package_version="0.7.5"), kind="warning",
        must=("yuanrong_wheel_url is 'https://", "version 0.7.6rc1 but yuanrong_package_version is 0.7.5",
              "same version"))


def test_install_from_unknown():
    one(seed(yuanrong_install_from="pip"), must=("yuanrong_install_from is 'pip'", "set one of url, file, index"))


def test_package_version_empty():
    # "Not empty." in its description: the message names the shipped value as the example
    one(seed(yuanrong_package_version=""), must=("yuanrong_package_version is ''",
                                                 "set a non-empty value, e.g. 0.7.6rc1 (the default)"))


# --- vLLM environment -----------------------------------------------------------------------------------------


def _env(where="vllm_env_extra", host=None, **env):
    inv = seed()
    for name, hv in inv["hosts"].items():
        if host in (None, name):
            hv[where] = dict(hv[where], **env)
    return inv


def test_env_name_bash_refuses():
    one(_env(**{"BAD-NAME": "1"}), must=("vllm_env_extra is {'BAD-NAME': '1'}", "not an environment variable name"))


@pytest.mark.parametrize("value,example", [(True, '"1"'), (256, '"256"'), (None, '""')])
def test_env_value_not_quoted(value, example):
    one(_env(HCCL_BUFFSIZE=value), must=("vllm_env_extra is {'HCCL_BUFFSIZE': %r}" % (value,),
                                         "set it quoted, e.g. HCCL_BUFFSIZE: " + example))


def test_pythonhashseed_missing():
    inv = seed()
    for hv in inv["hosts"].values():
        hv["vllm_env_common"] = {k: v for k, v in hv["vllm_env_common"].items() if k != "PYTHONHASHSEED"}
    errors, _unused = V.validate(inv)
    assert errors == ["p0, p1: PYTHONHASHSEED (vllm_env_common + vllm_prefill_env + vllm_env_extra) is not set: vLLM "
                      "seeds its KV block hashes from it, without it every engine hashes differently and the pool "
                      "never hits: set PYTHONHASHSEED: \"0\" in vllm_env_common",
                      "d0, d1: PYTHONHASHSEED (vllm_env_common + vllm_decode_env + vllm_env_extra) is not set: vLLM "
                      "seeds its KV block hashes from it, without it every engine hashes differently and the pool "
                      "never hits: set PYTHONHASHSEED: \"0\" in vllm_env_common"]


def test_pythonhashseed_random():
    one(_env(host="p0", PYTHONHASHSEED="random"), prefix="p0",
        must=("PYTHONHASHSEED (vllm_env_common + vllm_prefill_env + vllm_env_extra, set in vllm_env_extra) is "
              "'random'", "set a quoted integer"), count=2)


def test_pythonhashseed_different_on_one_node():
    msg = one(_env(host="d1", PYTHONHASHSEED="1"), prefix=ALL,
              must=("PYTHONHASHSEED (vllm_env_common + vllm_<side>_env + vllm_env_extra) differs between the hosts",
                    "p0='0'", "d1='1'", "set the same value on every host"))
    assert msg


def test_pythonhashseed_unset():
    one(seed(vllm_env_unset=["PYTHONHASHSEED"]), must=("vllm_env_unset is ['PYTHONHASHSEED']", "pool never hits",
                                                       "take PYTHONHASHSEED out"))


def test_derived_env_overridden():
    one(_env(HCCL_IF_IP="10.0.0.1"), kind="warning",
        must=("HCCL_IF_IP (set in vllm_env_extra) is '10.0.0.1'", "$local_ip", "remove it from vllm_env_extra"))


def test_ds_worker_addr_missing_with_the_yuanrong_backend():
    inv = seed()
    for hv in inv["hosts"].values():
        hv["vllm_env_common"] = {k: v for k, v in hv["vllm_env_common"].items() if k != "DS_WORKER_ADDR"}
    errors = V.validate(inv)[0]
    assert len(errors) == 2 and all("DS_WORKER_ADDR (vllm_env_common + " in e and "is not set" in e
                                    and "set DS_WORKER_ADDR: $ds_worker_addr" in e for e in errors), errors


def test_env_unset_names():
    one(seed(vllm_env_unset=["GOOGLE LOGTOSTDERR"]), must=("vllm_env_unset is ['GOOGLE LOGTOSTDERR']",
                                                           "not environment variable names"))


# --- vllm serve flags ---------------------------------------------------------------------------------------


def _args(where="vllm_prefill_serve_args", **args):
    inv = seed()
    for hv in inv["hosts"].values():
        hv[where] = dict(hv[where], **args)
    return inv


def test_flag_with_leading_dashes():
    one(_args(**{"--max-num-seqs": 8}), prefix="p0, p1",
        must=("vllm_prefill_serve_args is {'--max-num-seqs': 8}", "set the flag as max-num-seqs"))


@pytest.mark.parametrize("flag", ["port", "tensor-parallel-size", "data-parallel-size-local", "kv_transfer_config",
                                  "host"])
def test_flag_the_launcher_writes(flag):
    one(_args(**{flag: 1}), prefix="p0, p1",
        must=("vllm_prefill_serve_args is {'%s': 1}" % flag, "run_dp_template.sh sets", "remove it"))


@pytest.mark.parametrize("value", [0, -5, "lots", True])
def test_max_model_len(value):
    one(_args("vllm_serve_args_common", **{"max-model-len": value}), prefix="p0, p1, d0, d1",
        must=("vllm_serve_args_common is {'max-model-len': %r}" % (value,), "positive token count"))


@pytest.mark.parametrize("value", [202752, "128k", -1, "auto", "25.6k"])
def test_max_model_len_forms_vllm_reads(value):
    assert V.validate(_args("vllm_serve_args_common", **{"max-model-len": value}))[0] == []


def test_speculative_config_not_a_mapping():
    one(_args("vllm_serve_args_common", **{"speculative-config": "deepseek_mtp"}),
        must=("vllm_serve_args_common is {'speculative-config': 'deepseek_mtp'}", "reads --speculative-config as JSON"))


def test_speculative_tokens_not_positive():
    one(_args("vllm_serve_args_common", **{"speculative-config": {"num_speculative_tokens": 0}}),
        must=("num_speculative_tokens must be a positive integer",))


def test_gpu_memory_utilization_range():
    one(_args(**{"gpu-memory-utilization": 1.5}), prefix="p0, p1",
        must=("vllm_prefill_serve_args is {'gpu-memory-utilization': 1.5}", "at most 1"))


def test_max_num_seqs_positive():
    one(_args("vllm_decode_serve_args", **{"max-num-seqs": 0}), prefix="d0, d1",
        must=("vllm_decode_serve_args is {'max-num-seqs': 0}", "positive integer"))


def test_served_model_name_flag_differs():
    one(_args(**{"served-model-name": "glm"}), prefix="p0, p1",
        must=("vllm_prefill_serve_args is {'served-model-name': 'glm'}", "vllm_served_model_name is 'glm-5.1'"))


def test_served_model_name_flag_missing():
    inv = seed()
    for hv in inv["hosts"].values():
        hv["vllm_serve_args_common"] = {k: v for k, v in hv["vllm_serve_args_common"].items()
                                        if k != "served-model-name"}
    one(inv, must=("vllm_serve_args_common is not set: served-model-name is missing", "404"))


# --- kv transfer and pool -------------------------------------------------------------------------------------


def test_pool_backend_unknown():
    one(seed(vllm_kv_pool_backend="redis"), must=("vllm_kv_pool_backend is 'redis'", "yuanrong, mooncake, memcache"))


def test_pool_backend_differs_between_hosts():
    inv = seed()
    inv["hosts"]["d1"]["vllm_kv_pool_backend"] = "mooncake"
    one(inv, must=("vllm_kv_pool_backend differs between the hosts", "d1='mooncake'", "one KV pool"))


def test_pool_enabled_not_a_bool():
    one(seed(vllm_kv_pool_enabled="off"), must=("vllm_kv_pool_enabled is 'off'", "true or false"))


def test_pool_enabled_differs_between_hosts_warns():
    assert new_messages(seed(vllm_kv_pool_enabled=False), "error") == []
    assert new_messages(seed(vllm_kv_pool_enabled=False), "warning") == []
    inv = seed(vllm_kv_pool_enabled=True)
    inv["hosts"]["p1"]["vllm_kv_pool_enabled"] = False
    one(inv, kind="warning", must=("vllm_kv_pool_enabled differs between the hosts", "p1=False", "neither arm"))


def test_served_model_name_empty():
    one(seed(vllm_served_model_name=""), must=("vllm_served_model_name is ''", "set a non-empty value, e.g. glm-5.1"),
        count=2)  # and the served-model-name flag no longer matches it


def test_served_model_name_differs_between_hosts():
    inv = seed()
    inv["hosts"]["d0"]["vllm_served_model_name"] = "glm"
    inv["hosts"]["d0"]["vllm_serve_args_common"]["served-model-name"] = "glm"
    one(inv, must=("vllm_served_model_name differs between the hosts", "d0='glm'", "404"))


def test_model_path_relative():
    one(seed(vllm_model_path="GLM-5.1-w8a8"), must=("vllm_model_path is 'GLM-5.1-w8a8'", "absolute path"))


def test_top_level_extra_replaces_the_role():
    one(seed(vllm_kv_top_level_extra={"kv_role": "kv_both"}),
        must=("vllm_kv_top_level_extra is {'kv_role': 'kv_both'}", "remove it"))


def test_top_level_extra_engine_id():
    one(seed(vllm_kv_top_level_extra={"engine_id": "1"}), kind="warning",
        must=("vllm_kv_top_level_extra is {'engine_id': '1'}", "vllm_<side>_engine_id"))


def test_mooncake_extra_with_derived_block():
    one(seed(vllm_mooncake_extra_config={"prefill": {"dp_size": 1}}), kind="warning",
        must=("vllm_mooncake_extra_config is {'prefill': {'dp_size': 1}}", "derived"))


def test_engine_id_type():
    one(seed(vllm_prefill_engine_id=True), must=("vllm_prefill_engine_id is True", "quoted string"))


def test_api_ports_past_65535():
    one(seed(vllm_api_port=65535, vllm_dp_size_local=2, vllm_prefill_tp_size=8, vllm_decode_tp_size=8,
             vllm_prefill_lookup_rpc_port="dp_rank"), prefix="p0, d0",
        must=("vllm_api_port is 65535", "dp rank 1 listens on 65536", "set vllm_api_port to at most 65534"), count=2)


def test_kv_ports_past_65535():
    one(seed(vllm_decode_kv_port=65530), prefix="d0",
        must=("vllm_decode_kv_port is 65530", "end at 65545", "at most 65504"), count=2)


# --- proxy ------------------------------------------------------------------------------------------------------


def test_proxy_extra_arg_the_role_sets():
    one(seed(proxy_extra_args={"port": 9000}), prefix="p0", must=("proxy_extra_args is {'port': 9000}", "remove it"))


def test_proxy_extra_arg_with_dashes():
    one(seed(proxy_extra_args={"--max-retries": 3}), prefix="p0", must=("proxy_extra_args is {'--max-retries': 3}",
                                                                        "without dashes"))


def test_proxy_extra_arg_boolean():
    one(seed(proxy_extra_args={"max-retries": True}), prefix="p0",
        must=("proxy_extra_args is {'max-retries': True}", "the proxy takes '--max-retries <value>'",
              "set a number or a string"))


# The capacity of the serving edge (docs/capacity.md): decode instances x max-num-seqs x tokens/s per sequence
# against proxy_relay_capacity, on the proxy host (p0). The numbers are set here, not taken from the defaults.


def edge(instances_per_host=4, seqs=64, **values):
    """The seed with instances_per_host decode instances on each of d0 and d1 (tp 4, 4 x 4 = 16 NPUs), each with
    max-num-seqs seqs (the step budget fits), and decode kv ports out of Mooncake's band (no new band warning)."""
    inv = seed(vllm_decode_dp_size_local=instances_per_host, vllm_decode_tp_size=4, vllm_decode_kv_port=36000,
               **values)
    for hv in inv["hosts"].values():
        flags = {"max-num-seqs": seqs, "max-num-batched-tokens": 4 * seqs}
        hv["vllm_decode_serve_args"] = dict(hv["vllm_decode_serve_args"], **flags)
    return inv


def relay_warnings(inv):
    return [w for w in V.validate(inv)[1] if "proxy_relay_capacity is" in w]


def test_the_relay_estimate_of_the_seed_layout():
    # 2 decode nodes x 1 instance (vllm_dp_size_local, the seed's) x max-num-seqs 8 x 40 tokens/s
    estimate = P.relay_estimate(SEED["hosts"], SEED["groups"]["decode"], 40)
    assert estimate == P.RelayEstimate((("d0", 1, 8), ("d1", 1, 8)), 2, 16, 40, 640)


def test_the_relay_estimate_of_the_glm5_layout():
    inv = edge()
    estimate = P.relay_estimate(inv["hosts"], ["d0", "d1"], 40)
    assert (estimate.instances, estimate.sequences, estimate.tokens_per_s) == (8, 512, 20480)
    # a prefill host's values do not count, max_num_seqs is the same flag, the side's layer wins over the common one
    inv["hosts"]["d1"]["vllm_decode_serve_args"] = {"max_num_seqs": 3}
    inv["hosts"]["d1"]["vllm_serve_args_common"] = {"max-num-seqs": 100}
    inv["hosts"]["p0"]["vllm_decode_dp_size_local"] = 100
    assert P.relay_estimate(inv["hosts"], ["d0", "d1"], 5).per_host == (("d0", 4, 64), ("d1", 4, 3))
    assert P.relay_estimate(inv["hosts"], ["d0", "d1"], 5).tokens_per_s == (4 * 64 + 4 * 3) * 5


@pytest.mark.parametrize("change", [
    {"vllm_decode_serve_args": {}},                       # max-num-seqs unset: vLLM's own default, not estimated
    {"vllm_decode_serve_args": {"max-num-seqs": None}},   # null leaves the flag out
    {"vllm_decode_serve_args": {"max-num-seqs": "{{ x }}"}},
    {"vllm_decode_serve_args": {"max-num-seqs": 0}},
    {"vllm_decode_dp_size_local": 0},
    {"vllm_decode_dp_size_local": None, "vllm_dp_size_local": "x"},
])
def test_no_relay_estimate_when_the_layout_does_not_tell(change):
    inv = edge()
    inv["hosts"]["d1"].update(change)
    assert P.relay_estimate(inv["hosts"], ["d0", "d1"], 40) is None
    assert relay_warnings(inv) == []
    assert P.relay_estimate(inv["hosts"], [], 40) is None


def test_the_seed_layout_is_far_below_the_relay_capacity():
    assert relay_warnings(seed()) == [] and relay_warnings(SIM) == []
    # the defaults as shipped, whatever their numbers: the seed's 640 tokens/s is below the capacity
    defaults = S.load()
    assert 2 * 1 * 8 * defaults["proxy_tokens_per_sequence"].default <= defaults["proxy_relay_capacity"].default


def test_eight_decode_instances_of_64_sequences_exceed_20000_tokens_per_second():
    one(edge(proxy_relay_capacity=20000, proxy_tokens_per_sequence=40), kind="warning", prefix="p0",
        must=("proxy_relay_capacity is 20000", "8 decode instances (2 hosts x 4, 1 DP group) x max-num-seqs 64 x "
              "proxy_tokens_per_sequence 40 = 20480 tokens/s", "benchmarks/edge_bench.py", "set proxy_relay_capacity",
              "reduce the layout", "set proxy_engine to vllm-router"))


@pytest.mark.parametrize("capacity,warns", [(20479, True), (20480, False), (20481, False), (25000, False)])
def test_the_relay_capacity_at_its_boundary(capacity, warns):
    # 8 x 64 x 40 = 20480: a capacity equal to the estimate is enough
    got = relay_warnings(edge(proxy_relay_capacity=capacity, proxy_tokens_per_sequence=40))
    assert len(got) == int(warns), got
    assert not warns or got[0].startswith("p0: proxy_relay_capacity is %d: " % capacity)


@pytest.mark.parametrize("instances,seqs,per_sequence,tokens", [
    (8, 64, 40, 20480), (4, 128, 40, 20480), (2, 512, 21, 21504), (1, 8, 2500, 20000)])
def test_every_factor_of_the_relay_estimate_counts(instances, seqs, per_sequence, tokens):
    inv = edge(instances // 2 or 1, seqs, proxy_tokens_per_sequence=per_sequence)
    if instances == 1:  # a decode side of one host
        del inv["groups"]["decode"][1:]
    estimate = P.relay_estimate(inv["hosts"], inv["groups"]["decode"], per_sequence)
    assert (estimate.instances, estimate.tokens_per_s) == (instances, tokens)
    for hv in inv["hosts"].values():
        hv["proxy_relay_capacity"] = tokens - 1
    assert len(relay_warnings(inv)) == 1
    for hv in inv["hosts"].values():
        hv["proxy_relay_capacity"] = tokens
    assert relay_warnings(inv) == []


def test_the_relay_warning_names_each_hosts_own_numbers_when_they_differ():
    inv = edge(proxy_relay_capacity=20000, proxy_tokens_per_sequence=60)
    inv["hosts"]["d1"]["vllm_decode_serve_args"] = dict(inv["hosts"]["d1"]["vllm_decode_serve_args"],
                                                        **{"max-num-seqs": 32})
    # (4 x 64 + 4 x 32) x 60 = 23040
    (got,) = relay_warnings(inv)
    assert ("8 decode instances x max-num-seqs per host (d0 4 x 64, d1 4 x 32: 384 sequences) x "
            "proxy_tokens_per_sequence 60 = 23040 tokens/s") in got, got


def test_the_relay_capacity_names_the_decode_dp_groups():
    inv = edge(proxy_relay_capacity=20000, vllm_decode_dp_groups=2)
    (got,) = relay_warnings(inv)
    assert "8 decode instances (2 hosts x 4, 2 DP groups) x max-num-seqs 64" in got, got
    (got,) = relay_warnings(edge(proxy_relay_capacity=20000, vllm_decode_dp_groups=None))  # unset: one group
    assert "8 decode instances (2 hosts x 4, 1 DP group) x max-num-seqs 64" in got, got


@pytest.mark.parametrize("key", ["proxy_relay_capacity", "proxy_tokens_per_sequence"])
@pytest.mark.parametrize("value", [0, -1, "x"])
def test_a_relay_value_that_is_not_positive_is_an_error_not_an_estimate(key, value):
    inv = edge(**dict({"proxy_relay_capacity": 20000, "proxy_tokens_per_sequence": 40}, **{key: value}))
    errors = V.validate(inv)[0]
    assert errors == ["%s: %s is %s: set an integer >= 1" % (ALL, key, B.show(value))], errors
    assert relay_warnings(inv) == []


# --- numbers, booleans, paths, addresses -----------------------------------------------------------------------


@pytest.mark.parametrize("key,value", [("vllm_health_timeout", 0), ("vllm_canary_failures", "x"),
                                       ("supervise_crash_loop_restarts", 0), ("etcd_health_timeout", -1),
                                       ("container_pull_retries", True), ("yuanrong_arena_per_tenant", 0),
                                       ("preflight_hccn_max_workers", 0), ("gate_request_timeout", "soon")])
def test_integer_knobs(key, value):
    one(seed(**{key: value}), must=("%s is %s" % (key, B.show(value)), "set an integer >="))


def test_integer_knob_as_text_passes():
    assert V.validate(seed(vllm_health_timeout="240"))[0] == []


# The proxy's seconds (--a3-probe-interval etc.), floats above 0 by their declaration ("Above 0.").
PROXY_SECONDS = sorted(n for n, o in S.load().items() if o.role == "proxy" and o.type == "float" and o.above == 0)


def test_the_proxy_seconds_are_declared_above_zero():
    assert PROXY_SECONDS == ["proxy_body_timeout", "proxy_first_byte_timeout", "proxy_header_timeout",
                             "proxy_idle_timeout", "proxy_probe_interval", "proxy_probe_timeout"]


@pytest.mark.parametrize("key", PROXY_SECONDS)
def test_proxy_seconds(key):
    one(seed(**{key: 0}), must=("%s is 0" % key, "above 0"))


def test_health_interval_not_below_timeout():
    one(seed(vllm_health_interval=60, vllm_health_timeout=60),
        must=("vllm_health_interval is 60", "not below vllm_health_timeout (60)", "set a shorter interval"))


def test_peer_wait_shorter_than_the_frozen_ranks_own_restart():
    # default canary interval 30: 120 + 2 x 30 = 180 is the least that lets the frozen rank's node act first
    one(seed(vllm_peer_wait=179, vllm_down_grace=120), kind="warning",
        must=("vllm_peer_wait is 179", "below vllm_down_grace + 2 x vllm_canary_interval (180)", "set at least 180"))
    assert new_messages(seed(vllm_peer_wait=180, vllm_down_grace=120), "warning") == []
    one(seed(vllm_peer_wait=40, vllm_down_grace=15, vllm_canary_interval=13), kind="warning",
        must=("vllm_peer_wait is 40", "(41)"))
    # a value the spec refuses (0) is the spec's message, not this rule's
    assert not [m for m in new_messages(seed(vllm_peer_wait=0), "warning") if "vllm_down_grace +" in m]


def test_backoff_cap_below_base():
    one(seed(supervise_backoff_max=1, supervise_backoff_base=2), kind="warning",
        must=("supervise_backoff_max is 1", "below supervise_backoff_base (2)"))


@pytest.mark.parametrize("key", ["container_privileged", "yuanrong_enable_huge_tlb", "preflight_hccs_ping"])
def test_booleans(key):
    one(seed(**{key: "yes"}), must=("%s is 'yes'" % key, "set true or false"))


@pytest.mark.parametrize("key,value", [("a3_work_dir", "workspace"), ("a3_host_work_dir", "/"),
                                       ("etcd_data_dir", "var/lib/etcd"), ("supervise_state_dir", "")])
def test_paths(key, value):
    msgs = new_messages(seed(**{key: value}), "error")
    assert any(m.startswith(ALL + ": %s is %r" % (key, value)) and "set" in m for m in msgs), msgs


@pytest.mark.parametrize("value,what", [("localhost", "set an IP address"), ("10.9.9.9", "set 0.0.0.0 or the node's")])
def test_listen_address(value, what):
    one(seed(a3_listen_address=value), must=("a3_listen_address is %r" % value, what))


def test_listen_address_per_node_passes():
    inv = seed()
    for hv in inv["hosts"].values():
        hv["a3_listen_address"] = hv["a3_business_ip"]
    assert V.validate(inv)[0] == []


def test_service_names_equal():
    one(seed(supervise_engine_service="ascend-yr-worker"),
        must=("supervise_engine_service is 'ascend-yr-worker'", "supervise_worker_service has the same unit name"))


def test_service_name_with_suffix():
    one(seed(supervise_engine_service="ascend-vllm.service"), must=("supervise_engine_service is 'ascend-vllm.service'",
                                                                    "without .service"))


def test_log_file_is_a_name():
    one(seed(vllm_log_file="/var/log/vllm.log"), must=("vllm_log_file is '/var/log/vllm.log'", "file name"))


def test_list_knob_not_a_list():
    one(seed(yuanrong_numa_options="--interleave 0-7"),
        must=("yuanrong_numa_options is '--interleave 0-7'", "list of non-empty strings"))


def test_dict_knob_not_a_mapping():
    one(seed(proxy_extra_args=[]), must=("proxy_extra_args is []", "set a mapping"))


# --- preflight and gate ---------------------------------------------------------------------------------------


def test_hccn_check_unknown():
    one(seed(preflight_hccn_checks=["vnic", "speed"]),
        must=("preflight_hccn_checks is ['vnic', 'speed']", "'speed' unknown"))


def test_preflight_page_size():
    one(seed(preflight_page_size=5000), must=("preflight_page_size is 5000", "getconf PAGE_SIZE"))


def test_preflight_min_version():
    one(seed(preflight_min_hdk="25.5.RC1"), must=("preflight_min_hdk is '25.5.RC1'", "dotted version"))


def test_preflight_memory_reserve():
    one(seed(preflight_memory_reserve="lots"), must=("preflight_memory_reserve is 'lots'", "set a size"))


def test_preflight_choice():
    one(seed(preflight_hbm_in_use="maybe"), must=("preflight_hbm_in_use is 'maybe'", "warn, fail, ignore"))


@pytest.mark.parametrize("key,value", [("gate_expect_pattern", "READY("), ("preflight_port_owner_names", ["^vllm$", "("])])
def test_regular_expressions(key, value):
    one(seed(**{key: value}), must=("%s is '%s'" % (key, "READY(" if key == "gate_expect_pattern" else "("),
                                    "not a regular expression"))


# --- rules from the field (issue 16): upstream references in every message ------------------------------------


SPEC_3 = {"num_speculative_tokens": 3, "method": "deepseek_mtp"}
EXTRA = {"enable_npugraph_ex": True, "fuse_muls_add": True, "multistream_overlap_shared_expert": True}


def _without_field_warnings(**prefill):
    """The seed with the prefill-side fixes the field warnings ask for, and the Mooncake abort timeout."""
    inv = _env("vllm_env_common", VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT="480")
    for name, hv in inv["hosts"].items():
        if name.startswith("p"):
            hv["vllm_prefill_serve_args"] = dict(hv["vllm_prefill_serve_args"], **prefill)
    return inv


def _field(inv, text):
    return [w for w in V.validate(inv)[1] if text in w]


def test_speculative_tokens_above_one_on_prefill():
    hits = _field(seed(), "num_speculative_tokens 3 on the prefill side")
    assert len(hits) == 1 and hits[0].startswith("p0, p1: vllm_serve_args_common is {'speculative-config': "), hits
    assert "vllm-ascend#12104" in hits[0] and "vllm-ascend#7580" in hits[0]
    assert 'set speculative-config: {"num_speculative_tokens": 1, "method": "deepseek_mtp"} in vllm_prefill_serve_args' \
        in hits[0]


def test_speculative_tokens_one_on_prefill_and_three_on_decode():
    inv = _without_field_warnings(**{"speculative-config": dict(SPEC_3, num_speculative_tokens=1)})
    assert not _field(inv, "on the prefill side, which drafts nothing")
    assert V.validate(inv)[0] == []


def test_recompute_scheduler_on_prefill():
    hits = _field(seed(), "recompute_scheduler_enable is on for the prefill side")
    assert len(hits) == 1 and hits[0].startswith("p0, p1: vllm_serve_args_common is {'additional-config': "), hits
    assert "vllm-ascend#11265" in hits[0] and "#11537" in hits[0]
    assert 'set additional-config: {"enable_npugraph_ex": true, "fuse_muls_add": true, ' \
        '"multistream_overlap_shared_expert": true} in vllm_prefill_serve_args' in hits[0]


def test_recompute_scheduler_as_json_text_on_prefill():
    text = '{"recompute_scheduler_enable": "true"}'
    one(_without_field_warnings(**{"additional-config": text, "speculative-config": dict(SPEC_3, num_speculative_tokens=1)}),
        kind="warning", prefix="p0, p1", must=("vllm_prefill_serve_args is {'additional-config': %r}" % text,
                                               "vllm-ascend#11265"))


def test_recompute_scheduler_only_on_decode():
    inv = _without_field_warnings(**{"additional-config": EXTRA})
    assert not _field(inv, "recompute_scheduler_enable")


def test_nixl_abort_timeout_without_the_mooncake_one():
    hits = _field(seed(), "VLLM_NIXL_ABORT_REQUEST_TIMEOUT")
    assert len(hits) == 1 and hits[0].startswith(ALL + ": VLLM_NIXL_ABORT_REQUEST_TIMEOUT (set in vllm_env_common) is "
                                                 "'300000': the Mooncake connector does not read it"), hits
    assert "vllm-ascend#7140" in hits[0] and "mooncake_connector.py@v0.18.0" in hits[0]
    assert "set VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT in vllm_env_common" in hits[0]


def test_nixl_abort_timeout_with_the_mooncake_one():
    assert not _field(_env("vllm_env_common", VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT="480"), "VLLM_NIXL_ABORT")


def test_nixl_abort_timeout_with_the_mooncake_one_unset():
    inv = _env("vllm_env_common", VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT="480")
    for hv in inv["hosts"].values():
        hv["vllm_env_unset"] = ["VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT"]
    assert len(_field(inv, "VLLM_NIXL_ABORT_REQUEST_TIMEOUT")) == 1


def test_kv_load_failure_policy_on_the_mooncake_child():
    one(seed(vllm_mooncake_extra_config={"use_ascend_direct": True, "kv_load_failure_policy": "recompute"}),
        must=("vllm_mooncake_extra_config is {'kv_load_failure_policy': 'recompute'}", "Mooncake child connector",
              "scheduler.py", "set it in vllm_kv_top_level_extra"))


def test_kv_load_failure_policy_on_the_multiconnector():
    inv = seed(vllm_kv_top_level_extra={"kv_load_failure_policy": "recompute"})
    assert V.validate(inv)[0] == [] and not new_messages(inv, "warning")


def test_kv_load_failure_policy_unknown_value():
    one(seed(vllm_kv_top_level_extra={"kv_load_failure_policy": "retry"}),
        must=("vllm_kv_top_level_extra is {'kv_load_failure_policy': 'retry'}", "kv_transfer.py@v0.18.0",
              "recompute or fail"))


def test_max_num_batched_tokens_below_max_num_seqs():
    one(_args("vllm_decode_serve_args", **{"max-num-batched-tokens": 4}), prefix="d0, d1",
        must=("vllm_serve_args_common + vllm_decode_serve_args is {'max-num-seqs': 8, 'max-num-batched-tokens': 4}",
              "vLLM refuses to start", "vllm/config/scheduler.py", "at least 8"))


def test_max_num_batched_tokens_below_a_speculative_decode_batch():
    one(_args("vllm_decode_serve_args", **{"max-num-batched-tokens": 16}), kind="warning", prefix="d0, d1",
        must=("{'max-num-seqs': 8, 'max-num-batched-tokens': 16, 'num_speculative_tokens': 3}", "= 32 tokens",
              "only 4 requests", "vllm-ascend#8240", "set max-num-batched-tokens to 32", "max-num-seqs to 4"))


def test_max_num_batched_tokens_covering_a_speculative_decode_batch():
    for inv in (seed(), _args("vllm_decode_serve_args", **{"max-num-seqs": 4})):
        assert V.validate(inv)[0] == [] and not new_messages(inv, "warning")


def test_max_num_batched_tokens_without_speculation():
    inv = _args("vllm_serve_args_common", **{"speculative-config": False})
    for hv in inv["hosts"].values():
        hv["vllm_decode_serve_args"] = dict(hv["vllm_decode_serve_args"], **{"max-num-batched-tokens": 8})
    assert not [m for m in V.validate(inv)[0] + V.validate(inv)[1] if "max-num-batched-tokens" in m]


# --- security: the admin listener and the keys (issue 32) ---------------------------------------------------------


def test_every_protection_on_takes_the_open_listener_warning_away():
    inv = seed(proxy_api_keys=["k-1", "k-2"], vllm_api_key="engine-key", etcd_tls=True)
    errors, warnings = V.validate(inv)
    assert errors == [] and OPEN_LISTENERS not in warnings
    assert not [w for w in warnings if "without credentials" in w], warnings


def test_one_protection_missing_is_named_alone():
    inv = seed(proxy_api_keys=["k-1"], etcd_tls=True)
    errors, warnings = V.validate(inv)
    assert errors == []
    assert [w for w in warnings if "without credentials" in w] == [
        "listeners that take requests without credentials: the engines' /v1 routes (set vllm_api_key). That is the "
        "seed's configuration; README 'Security' says how to turn each protection on"]


@pytest.mark.parametrize("keys, must", [
    (["good", "has space"], "proxy_api_keys[1] contains white space"),
    (["dup", "dup"], "proxy_api_keys lists a key twice"),
    ("just-a-string", "proxy_api_keys is not a list"),
    ([7], "proxy_api_keys[0] is not a string"),
    (["<key>"], "proxy_api_keys[0] is still a placeholder"),
])
def test_bad_client_keys_are_named_without_their_value(keys, must):
    msg = one(seed(proxy_api_keys=keys), prefix="p0", must=(must,))
    for key in (keys if isinstance(keys, list) else [keys]):
        if isinstance(key, str) and key not in ("dup",):
            assert key not in msg.split(":", 1)[1].replace(must, ""), msg


@pytest.mark.parametrize("name", ["proxy_admin_token", "vllm_api_key"])
def test_a_secret_with_a_quote_is_refused_without_showing_it(name):
    msg = one(seed(**{name: 'se"cret'}), prefix="p0", must=(name, "quote"))
    assert "se\"cret" not in msg and 'se"cret' not in msg


def test_the_admin_listener_must_be_loopback_business_or_any():
    one(seed(proxy_admin_bind_host="192.0.2.99"), prefix="p0", must=("proxy_admin_bind_host", "127.0.0.1"))
    one(seed(proxy_admin_bind_host="not-an-ip"), prefix="p0", must=("proxy_admin_bind_host",))
    assert new_messages(seed(proxy_admin_bind_host="127.0.0.1"), "error") == []
    assert new_messages(seed(proxy_admin_bind_host="192.0.2.11"), "error") == []


def test_an_admin_listener_on_the_network_without_a_token_is_a_warning():
    one(seed(proxy_admin_bind_host="0.0.0.0"), kind="warning", prefix="p0",
        must=("proxy_admin_bind_host", "proxy_admin_token"))
    assert new_messages(seed(proxy_admin_bind_host="0.0.0.0", proxy_admin_token="t0ken"), "warning") == []


def test_the_admin_port_is_checked_against_the_proxy_hosts_other_ports():
    errors, _unused = V.validate(seed(proxy_admin_port=8088))
    assert any("proxy_admin_port" in e and "proxy_port" in e for e in errors), errors
    errors, _unused = V.validate(seed(proxy_admin_port=70000))
    assert any("proxy_admin_port" in e and "65535" in e for e in errors), errors


def test_a_renewal_window_as_long_as_a_certificates_life_is_refused():
    one(seed(etcd_tls_renew_days=365), prefix="p0", must=("etcd_tls_renew_days", "etcd_tls_cert_days (365)"))
    one(seed(etcd_tls_renew_days=364, etcd_tls_ca_days=300), prefix="p0", must=("etcd_tls_ca_days (300)",))
    assert new_messages(seed(etcd_tls_renew_days=364), "error") == []


def test_curve_is_refused_until_the_engines_carry_its_keys():
    one(seed(yuanrong_curve_zmq=True), must=("yuanrong_curve_zmq", "set false"))


def test_prometheus_users_need_bcrypt_hashes_and_the_roles_login():
    hashed = "$2b$10$" + "a" * 53
    assert new_messages(seed(monitoring_prometheus_web_users={"ops": hashed}, monitoring_prometheus_web_user="ops",
                             monitoring_prometheus_web_password="pw"), "error") == []
    msg = one(seed(monitoring_prometheus_web_users={"ops": "plain-password"}, monitoring_prometheus_web_user="ops",
                   monitoring_prometheus_web_password="pw"), prefix="p0", must=("bcrypt",))
    assert "plain-password" not in msg
    one(seed(monitoring_prometheus_web_users={"ops": hashed}, monitoring_prometheus_web_user="root",
             monitoring_prometheus_web_password="pw"), prefix="p0", must=("monitoring_prometheus_web_user",))
    one(seed(monitoring_prometheus_web_users={"ops": hashed}, monitoring_prometheus_web_user="ops",
             monitoring_prometheus_web_password=""), prefix="p0", must=("monitoring_prometheus_web_password",))


@pytest.mark.parametrize("flag", ["etcd_ca", "enable_etcd_auth", "curve_key_dir"])
def test_worker_flags_the_roles_set_cannot_be_repeated(flag):
    one(seed(yuanrong_worker_flags={flag: "x"}), must=("yuanrong_worker_flags",))


@pytest.mark.parametrize("key, value", [("proxy_max_inflight", 0), ("proxy_max_body_bytes", 10),
                                        ("proxy_idle_timeout", 0), ("proxy_header_timeout", -1)])
def test_proxy_limits_are_positive(key, value):
    one(seed(**{key: value}), must=(key,))


# --- issue 35: the strings a node's tools consume, placement, tp on the NPUs, serve-flag syntax ------------------


def _on(host, **values):
    """The seed with these values on one host only."""
    inv = seed()
    inv["hosts"][host].update(copy.deepcopy(values))
    return inv


@pytest.mark.parametrize("nic,why", [
    ("enp3s0f0np0-bond7", "is 17 characters long, Linux allows at most 15"),
    ("eth0:1", "contains white space, '/', ':' or a quote"),
    ("bond 0", "contains white space, '/', ':' or a quote"),
    ("net/0", "contains white space, '/', ':' or a quote"),
    ("'bond0'", "contains white space, '/', ':' or a quote"),
    ("..", "is not a name Linux allows"),
])
def test_nic_name_linux_refuses(nic, why):
    msg = one(_on("p1", a3_nic_name=nic), prefix="p1", must=("a3_nic_name %r %s" % (nic, why),
                                                             "set it to the business NIC name (e.g. enp3s0, bond0)"))
    assert msg.startswith("p1: a3_nic_name ")


@pytest.mark.parametrize("nic", ["lo", "bond0", "enp3s0f0np0", "eth0.100", "ib0_1-x"])
def test_nic_names_linux_takes(nic):
    assert V.validate(_on("d0", a3_nic_name=nic))[0] == []


@pytest.mark.parametrize("ip,why", [
    ("0.0.0.0", "the unspecified address"), ("::", "the unspecified address"),
    ("224.0.0.5", "a multicast address"), ("ff02::1", "a multicast address"),
    ("255.255.255.255", "the broadcast address"), ("240.0.0.7", "a reserved address"),
])
def test_business_ip_that_names_no_node(ip, why):
    one(_on("d1", a3_business_ip=ip), prefix="d1",
        must=("a3_business_ip %s is %s" % (ip, why), "set the node's own business IP, e.g. 10.0.0.11"))


def test_loopback_business_ips_stay_accepted():
    """The simulated cluster's nodes are 127.30.0.11-14 (inventories/sim)."""
    inv = seed()
    for n, hv in enumerate(inv["hosts"].values()):
        hv["a3_business_ip"] = "127.30.0.%d" % (11 + n)
    assert V.validate(inv)[0] == []
    assert V.validate(_on("p0", a3_business_ip="::1"))[0] == []


@pytest.mark.parametrize("key,value,must", [
    ("a3_proxy_host", "d0", "first prefill host's value only"),
    ("a3_etcd_host", "p1", "first prefill host's value only"),
    ("etcd_tls", True, "either takes TLS with client certificates or plain HTTP"),
    ("etcd_client_port", 2479, "checks etcd's reach on its own value"),
    ("proxy_port", 8090, "the value of the host they run on"),
    ("proxy_admin_port", 8099, "the value of the host they run on"),
])
def test_placement_value_set_on_one_host(key, value, must):
    msg = one(_on("d1", **{key: value}), must=("%s differs between the hosts" % key, "d1=%r" % (value,), must,
                                               "set one value for every host (group_vars/all)"))
    assert msg.startswith(ALL + ": ")


def test_engine_key_set_on_one_host_is_named_without_its_value():
    inv = seed(vllm_api_key="k-1")
    inv["hosts"]["d0"]["vllm_api_key"] = "k-2"
    msg = one(inv, must=("vllm_api_key differs between the hosts (values not shown)", "answer 401"))
    assert "k-1" not in msg and "k-2" not in msg


def test_dp_rpc_port_differs_within_a_dp_group():
    msg = one(_on("p1", vllm_dp_rpc_port=10600), prefix="p0, p1",
              must=("vllm_dp_rpc_port differs between the hosts of prefill DP group 0 (p0=10521, p1=10600)",
                    "its DP master p0", "set one value for the group (group_vars)"))
    assert msg


def test_dp_rpc_port_may_differ_between_dp_groups():
    inv = _on("p1", vllm_dp_rpc_port=10600)
    for hv in inv["hosts"].values():
        hv["vllm_prefill_dp_groups"] = 2
    assert V.validate(inv)[0] == []


def test_tp_above_the_npus_of_one_node():
    assert new_messages(_on("d1", a3_npus_per_node=8), "error") == [
        "d1: vllm_decode_tp_size 16 x vllm_dp_size_local 1 = 16 NPUs, but the node has 8 (a3_npus_per_node): lower "
        "tp or dp_size_local"]


def test_tp_that_does_not_divide_the_npus_fits():
    """launch_online_dp.py hands each local instance a contiguous block of tp chips from chip 0: 2 x 6 of 16 fit."""
    inv = seed(vllm_prefill_dp_size_local=2, vllm_prefill_tp_size=6, vllm_decode_tp_size=6,
               vllm_prefill_lookup_rpc_port="dp_rank")
    assert V.validate(inv)[0] == []
    assert new_messages(seed(vllm_prefill_dp_size_local=3, vllm_prefill_tp_size=6, vllm_decode_tp_size=6,
                             vllm_prefill_lookup_rpc_port="dp_rank"), "error") == [
        "p0, p1: vllm_prefill_tp_size 6 x vllm_prefill_dp_size_local 3 = 18 NPUs, but the node has 16 "
        "(a3_npus_per_node): lower tp or dp_size_local"]


@pytest.mark.parametrize("flag,value,must", [
    ("block-size", "big", "set a positive integer"),
    ("max-num-batched-tokens", 0, "set a positive integer"),
    ("seed", -1, "set an integer >= 0"),
    ("num-gpu-blocks-override", 2.5, "set a positive integer"),
    ("gpu-memory-utilization", 0, "above 0 and at most 1"),
    ("gpu-memory-utilization", "most", "above 0 and at most 1"),
    ("additional-config", "{enable_npugraph_ex: true}", "vLLM reads --additional-config as JSON: set a mapping"),
    ("kv-events-config", ["x"], "vLLM reads --kv-events-config as JSON: set a mapping"),
    ("hf-overrides", "none", "vLLM reads --hf-overrides as JSON: set a mapping"),
    ("enforce-eager", "true", "vllm serve takes --enforce-eager without a value"),
    ("trust-remote-code", 1, "set true (the bare flag) or false (left out), unquoted"),
    ("async-scheduling", "yes", "vllm serve takes --async-scheduling without a value"),
])
def test_serve_flag_value_vllm_refuses(flag, value, must):
    one(_args(**{flag: value}), prefix="p0, p1",
        must=("vllm_prefill_serve_args is {%r: %r}" % (flag, value), must))


@pytest.mark.parametrize("flag,value", [
    ("compilation-config", 3), ("compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}'),
    ("generation-config", "auto"), ("enforce-eager", False), ("enable-prefix-caching", True),
    ("gpu-memory-utilization", "0.9"), ("seed", 0), ("block-size", "128"), ("tool-call-parser", "glm47"),
])
def test_serve_flag_values_vllm_takes(flag, value):
    assert V.validate(_args(**{flag: value}))[0] == []


def test_serve_flag_in_the_common_layer_is_named_where_it_is_used():
    """The prefill side's own enforce-eager: true replaces the common one; the decode side runs the common one."""
    one(_args("vllm_serve_args_common", **{"enforce-eager": "false"}), prefix="d0, d1",
        must=("vllm_serve_args_common is {'enforce-eager': 'false'}", "without a value"))


# --- issue 37: every declared bound holds at its edge; a port range is judged on every port, not its first ---------


def _bound_cases():
    """(option, a value on the bound, the next value past it) for each "At least N.", "At most N." and "Above N."
    of an int or float option in the specs: an integer steps by 1, a number by 0.001."""
    cases = []
    for name, option in sorted(S.load().items()):
        step = 1 if option.type == "int" else 0.001
        for form, edge, past in (("at-least", option.minimum, -step), ("at-most", option.maximum, step)):
            if edge is not None:
                cases.append(pytest.param(name, edge, round(edge + past, 3), id="%s-%s-%s" % (name, form, edge)))
        if option.above is not None:
            cases.append(pytest.param(name, round(option.above + step, 3), option.above,
                                      id="%s-above-%s" % (name, option.above)))
    return cases


BOUND_CASES = _bound_cases()


def _bound_errors(errors, name, value):
    """The errors that say the value of name is out of its bounds (the spec-derived wording and the layout rules'):
    '<hosts>: <name> is <value>: set ...' or '<hosts>: <name> <value> is above <N>: set ...'."""
    shown, plain = re.escape(B.show(value)), re.escape(str(value))
    rx = re.compile(r"^[^:]+: %s (is %s|%s is above [0-9]+): set " % (re.escape(name), shown, plain))
    return [e for e in errors if rx.match(e)]


def _spec_sentences(start):
    """Options whose description in roles/*/meta/argument_specs.yml holds a sentence starting with start (read
    straight from the YAML, not through _specs)."""
    found = set()
    for path in ROOT.glob("roles/*/meta/argument_specs.yml"):
        for body in (_yaml(path).get("argument_specs") or {}).values():
            for name, spec in ((body or {}).get("options") or {}).items():
                text = S.description_text((spec or {}).get("description"))
                if spec.get("type") in ("int", "float") and re.search(r"(^|[.] )%s -?[0-9]" % start, text):
                    found.add(name)
    return found


def test_the_bound_cases_are_every_bounded_option_of_the_specs():
    names = {c.values[0] for c in BOUND_CASES}
    least, most, above = _spec_sentences("At least"), _spec_sentences("At most"), _spec_sentences("Above")
    assert len(least) > 60 and len(most) > 10 and above, (len(least), len(most), above)
    assert names == least | most | above
    assert len(BOUND_CASES) == len(least) + len(most) + len(above)
    ids = {c.id for c in BOUND_CASES}
    assert {"proxy_max_body_bytes-at-least-1024", "vllm_api_port-at-most-65535", "container_pull_delay-at-least-0",
            "monitoring_kv_cache_usage_max-at-most-1", "proxy_probe_interval-above-0"} <= ids


@pytest.mark.parametrize("name,inside,outside", BOUND_CASES)
def test_every_declared_bound_holds_at_its_edge(name, inside, outside):
    """On the bound: no bound error (other rules may still relate the value to others); one past it: one error
    naming every host and the variable with its value."""
    assert _bound_errors(V.validate(seed(**{name: inside}))[0], name, inside) == []
    hits = _bound_errors(V.validate(seed(**{name: outside}))[0], name, outside)
    assert len(hits) == 1 and hits[0].startswith(ALL + ": %s " % name), (hits, V.validate(seed(**{name: outside}))[0])


@pytest.mark.parametrize("name,inside,outside", BOUND_CASES)
def test_one_host_past_a_bound_is_named_alone(name, inside, outside):
    hits = _bound_errors(V.validate(_on("d1", **{name: outside}))[0], name, outside)
    assert len(hits) == 1 and hits[0].startswith("d1: %s " % name), hits
    assert _bound_errors(V.validate(_on("d1", **{name: inside}))[0], name, inside) == []


def _band(inv):
    return [w for w in V.validate(inv)[1] if "random port band" in w]


def test_a_kv_range_that_enters_the_band_after_its_first_port_is_reported():
    # prefill kv 19990, tp 16: p0's rank 0 holds 19990-20005, the first port below the band, the later ones in it
    warnings = _band(seed(vllm_prefill_kv_port=19990, vllm_decode_kv_port=36000))
    assert [w.split(":")[0] for w in warnings] == ["p0", "p1"], warnings
    assert warnings[0].startswith("p0: Mooncake kv ports 19990-20005 of dp rank 0 lie inside Mooncake's random port "
                                  "band [20000, 36000)")
    assert "move vllm_prefill_kv_port to 36000 or above" in warnings[0]


def test_a_kv_range_that_ends_below_the_band_or_starts_past_it_is_not_reported():
    # prefill 19968: p0 19968-19983, p1 19984-19999 (the last port just below 20000); decode from 36000
    assert _band(seed(vllm_prefill_kv_port=19968, vllm_decode_kv_port=36000)) == []


def test_the_bands_last_port_is_inside_it():
    # decode 35999, tp 16: d0's range starts on the band's last port (35999), d1's (36015-) past the band
    warnings = _band(seed(vllm_prefill_kv_port=19968, vllm_decode_kv_port=35999))
    assert len(warnings) == 1 and warnings[0].startswith("d0: Mooncake kv ports 35999-36014 of dp rank 0 "), warnings


def test_the_band_of_a_later_local_rank_is_reported():
    # two instances per prefill node, tp 8, kv 19992: p0's rank 0 19992-19999 (below the band), rank 1 20000-20007
    inv = seed(vllm_prefill_kv_port=19992, vllm_decode_kv_port=36000, vllm_prefill_dp_size_local=2,
               vllm_prefill_tp_size=8, vllm_decode_tp_size=8, vllm_prefill_lookup_rpc_port="dp_rank")
    assert V.validate(inv)[0] == []
    warnings = _band(inv)
    assert [w.split(" of dp rank ")[0] for w in warnings] == [
        "p0: Mooncake kv ports 20000-20007", "p1: Mooncake kv ports 20008-20015", "p1: Mooncake kv ports 20016-20023"]
    assert not any("19992-19999" in w for w in warnings)


def test_the_band_follows_the_npus_of_the_node():
    # 8 NPUs: the band is [20000, 28000); decode 28000 is past it, 27999 is its last port
    assert _band(seed(a3_npus_per_node=8, vllm_prefill_tp_size=8, vllm_decode_tp_size=8,
                      vllm_prefill_kv_port=19968, vllm_decode_kv_port=28000)) == []
    warnings = _band(seed(a3_npus_per_node=8, vllm_prefill_tp_size=8, vllm_decode_tp_size=8,
                          vllm_prefill_kv_port=19968, vllm_decode_kv_port=27999))
    assert len(warnings) == 1 and "d0: Mooncake kv ports 27999-28006" in warnings[0] and "[20000, 28000)" in warnings[0]


@pytest.mark.parametrize("port", [30005, 30015])
def test_a_port_on_a_later_port_of_a_kv_range_is_an_overlap(port):
    # p0's kv ports 30000-30015 (prefill rank 0): the worker port on a port after the first one
    errors = V.validate(seed(yuanrong_worker_port=port))[0]
    assert "p0: Mooncake kv ports of dp rank 0 (vllm_prefill_kv_port + rank x tp) [30000-30015] overlaps yuanrong " \
           "worker port (yuanrong_worker_port) [%d-%d]: move one of them" % (port, port) in errors, errors


def test_a_port_on_a_later_local_ranks_kv_range_is_an_overlap():
    inv = seed(vllm_prefill_dp_size_local=2, vllm_prefill_tp_size=8, vllm_decode_tp_size=8,
               vllm_prefill_lookup_rpc_port="dp_rank", yuanrong_worker_port=30015)
    errors = V.validate(inv)[0]
    assert errors == ["p0: Mooncake kv ports of dp rank 1 (vllm_prefill_kv_port + rank x tp) [30008-30015] overlaps "
                      "yuanrong worker port (yuanrong_worker_port) [30015-30015]: move one of them"], errors


def test_a_later_local_ranks_api_port_is_checked_for_overlaps():
    # two instances per node listen on vllm_api_port and vllm_api_port + 1: the second one on the DP RPC port
    inv = seed(vllm_prefill_dp_size_local=2, vllm_prefill_tp_size=8, vllm_decode_tp_size=8,
               vllm_prefill_lookup_rpc_port="dp_rank", vllm_api_port=10520)
    errors = V.validate(inv)[0]
    assert "p0: vllm API port of dp rank 1 (vllm_api_port) [10521-10521] is the same port as DP RPC port " \
           "(vllm_dp_rpc_port) [10521-10521]: move one of them" in errors, errors


# proxy_engine vllm-router: haproxy and the Rust router relay; the wrapper is the router's parent and registrar.


def router_warnings(inv):
    return [w for w in V.validate(inv)[1] if "proxy_router_relay_capacity is" in w]


def test_the_router_engine_is_judged_against_its_own_capacity():
    # 8 x 64 x 40 = 20480 tokens/s: above the Python proxy's 20000, below the router's 25000
    inv = edge(proxy_engine="vllm-router", proxy_relay_capacity=20000, proxy_router_relay_capacity=25000,
               proxy_tokens_per_sequence=40)
    assert relay_warnings(inv) == [] and router_warnings(inv) == []
    inv = edge(proxy_engine="vllm-router", proxy_relay_capacity=99999, proxy_router_relay_capacity=20479,
               proxy_tokens_per_sequence=40)
    assert relay_warnings(inv) == []
    got = router_warnings(inv)
    assert len(got) == 1 and got[0].startswith("p0: proxy_router_relay_capacity is 20479: 8 decode instances")
    assert "= 20480 tokens/s" in got[0] and "haproxy and vllm-router" in got[0]
    assert "set proxy_engine" not in got[0]
    # the upstream engine ignores the router's capacity
    assert router_warnings(edge(proxy_engine="upstream", proxy_relay_capacity=99999,
                                proxy_router_relay_capacity=1, proxy_tokens_per_sequence=40)) == []


def test_the_router_engine_needs_the_wrapper():
    one(seed(proxy_engine="vllm-router", proxy_wrapper=False), prefix="p0",
        must=("proxy_engine is 'vllm-router'", "proxy_wrapper is false", "set proxy_wrapper to true"))
    assert [e for e in V.validate(seed(proxy_engine="upstream", proxy_wrapper=False))[0] if "proxy_engine" in e] == []


def test_the_router_flags_the_wrapper_sets_are_refused():
    one(seed(proxy_engine="vllm-router", proxy_router_args={"api-key": "x"}), prefix="p0",
        must=("proxy_router_args", "--api-key", "remove it"))
    one(seed(proxy_engine="vllm-router", proxy_router_args={"policy": "cache_aware"}), prefix="p0",
        must=("proxy_router_args", "--policy from proxy_router_policy", "set that instead"))
    ok = seed(proxy_engine="vllm-router", proxy_router_args={"request-timeout-secs": 600})
    assert [e for e in V.validate(ok)[0] if "proxy_router_args" in e] == []


def test_the_router_policy_is_one_the_router_can_use():
    one(seed(proxy_engine="vllm-router", proxy_router_policy="power_of_two"),
        must=("proxy_router_policy", "power_of_two", "round_robin"))
    for policy in ("round_robin", "cache_aware", "random"):
        assert [e for e in V.validate(seed(proxy_engine="vllm-router", proxy_router_policy=policy))[0]
                if "proxy_router_policy" in e] == [], policy


def test_the_router_ports_must_not_overlap_the_hosts_other_ports():
    # 8089..8093 holds the admin listener's 8089 (proxy host p0 only)
    errors = [e for e in V.validate(seed(proxy_engine="vllm-router", proxy_router_base_port=8089))[0]
              if "vllm-router" in e]
    assert errors == ["p0: proxy admin port (proxy_admin_port) [8089-8089] overlaps vllm-router's loopback ports "
                      "(proxy_router_base_port and the 4 after it) [8089-8093]: move one of them"], errors
    # 8084..8088 ends on proxy_port
    errors = [e for e in V.validate(seed(proxy_engine="vllm-router", proxy_router_base_port=8084))[0]
              if "vllm-router" in e]
    assert len(errors) == 1 and errors[0].startswith("p0: proxy port (proxy_port) [8088-8088]") and "[8084-8088]" in \
        errors[0], errors
    # the same numbers with the upstream engine bind nothing
    assert [e for e in V.validate(seed(proxy_engine="upstream", proxy_router_base_port=8089))[0]
            if "vllm-router" in e] == []
    assert [e for e in V.validate(seed(proxy_engine="vllm-router", proxy_router_base_port=8090))[0]
            if "vllm-router" in e] == []
