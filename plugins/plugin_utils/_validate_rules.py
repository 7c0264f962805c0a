# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-variable validation rules: type, range and what vLLM, the launcher, docker, etcd and the
openYuanrong datasystem accept, for every variable an operator sets (inventory or role default).

Pure functions, no Ansible imports; _topology._validate calls them. Every message reads
"<host>: <variable> is <value>: <why>; set <what>", so _topology._merge_hosts folds a group_vars value
that is wrong on every host into one line.

A key absent from a host's dict is skipped (callers that build partial dicts, e.g. unit tests of the
topology, are not affected). None (the variable is null, or not defined where validation reads it: role
defaults are not hostvars) is skipped too, except for REQUIRED_KEYS, which have no usable default and are
reported as not set. A string still holding a Jinja expression ("{{ ... }}") is skipped: it cannot be judged
before templating.
"""
from __future__ import annotations

import ipaddress
import json
import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import (
    PLACEHOLDER_RE, SIDES, parse_size)

_ABSENT = object()
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# docker: container names are [a-zA-Z0-9][a-zA-Z0-9_.-]+ (daemon/names); image path components are
# lowercase alphanumerics separated by '.', '_', '__' or dashes; a tag is at most 128 word characters,
# dots and dashes, not starting with either (distribution/reference grammar).
_CONTAINER_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_IMAGE_NAME_RE = re.compile(r"^%s(?:/%s)*$" % (_PATH_COMPONENT, _PATH_COMPONENT))
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_REGISTRY_RE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                          r"|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?(?:/%s)*$" % _PATH_COMPONENT)
# The vllm-ascend version in the image tag, exactly as roles/patches/defaults (patches_vllm_ascend_version).
_TAG_VERSION_RE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(rc[0-9]+)?")
_ETCD_VERSION_RE = re.compile(r"^v[0-9]+\.[0-9]+\.[0-9]+$")
_SHA256_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_PIP_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_PIP_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
_FLAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\-]+$")
_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*$")
# max-model-len: vLLM reads a plain integer, a human-readable one (1k, 25.6k, 1M) or -1 / auto (fit to memory).
_MODEL_LEN_RE = re.compile(r"^(?:[0-9]+(?:\.[0-9]+)?[kKmMgG]?|-1|auto)$")
# Hugepage sizes the kernel offers: x86_64 2M and 1G; arm64 64K/2M/32M/1G with 4K base pages and
# 2M/512M/16G with 64K base pages (Documentation/arch/arm64/hugetlbpage.rst).
HUGEPAGE_SIZES = {64 * 1024: "64K", 2 * 1024 ** 2: "2M", 32 * 1024 ** 2: "32M", 512 * 1024 ** 2: "512M",
                  1024 ** 3: "1G", 16 * 1024 ** 3: "16G"}
# KV pool backends of vllm-ascend's AscendStoreConnector: v0.18.0 ships mooncake and memcache; the
# yuanrong one comes with the 0001-Implement-yuanrong-backend patch (patches_table).
POOL_BACKENDS = ("yuanrong", "mooncake", "memcache")
RESTART_POLICIES = ("no", "on-failure", "always", "unless-stopped")
# vllm serve flags run_dp_template.sh writes itself (from launch_online_dp.py's positional arguments and the
# kv-transfer-config file) or that clash with them; _render.engine_processes shows the same list.
LAUNCHER_FLAGS = ("host", "port", "tensor-parallel-size", "kv-transfer-config", "model")
LAUNCHER_FLAG_PREFIXES = ("data-parallel-",)
# Worker flags yuanrong_argv sets from yuanrong_* variables (yuanrong_worker_flags may not repeat them).
WORKER_FLAGS = {"worker_address": "yuanrong_worker_port", "etcd_address": "yuanrong_etcd_address",
                "shared_memory_size_mb": "yuanrong_shared_memory_size_mb",
                "node_timeout_s": "yuanrong_node_timeout_s", "node_dead_timeout_s": "yuanrong_node_dead_timeout_s",
                "arena_per_tenant": "yuanrong_arena_per_tenant", "enable_huge_tlb": "yuanrong_enable_huge_tlb",
                "liveness_check_path": "yuanrong_liveness_path", "enable_etcd_auth": "etcd_tls",
                "etcd_ca": "etcd_tls", "etcd_cert": "etcd_tls", "etcd_key": "etcd_tls",
                "enable_curve_zmq": "yuanrong_curve_zmq", "curve_key_dir": "yuanrong_curve_zmq"}
# The proxy script's own arguments (roles/proxy/vars: proxy_upstream_args) and the wrapper's --a3-* ones.
PROXY_FLAGS = ("port", "host", "prefiller-hosts", "prefiller-ports", "decoder-hosts", "decoder-ports")
# Environment the role derives per node: run_dp_template.sh sets $local_ip, $nic_name, $ds_worker_addr and
# launch_online_dp.py passes the devices as $1. Another value breaks what the derivation guarantees.
DERIVED_ENV = {
    "HCCL_IF_IP": ("$local_ip", "the node's business IP"),
    "GLOO_SOCKET_IFNAME": ("$nic_name", "the business NIC"),
    "TP_SOCKET_IFNAME": ("$nic_name", "the business NIC"),
    "HCCL_SOCKET_IFNAME": ("$nic_name", "the business NIC"),
    "ASCEND_RT_VISIBLE_DEVICES": ("$1", "the chips launch_online_dp.py gives each dp rank"),
    "DS_WORKER_ADDR": ("$ds_worker_addr", "this node's openYuanrong worker (<business IP>:yuanrong_worker_port)"),
}
# Field rules (issue 16): facts of vLLM 0.18.0 and vllm-ascend v0.18.0 that broke deployments upstream. Each
# message names its upstream reference; the seed trips the first three, so those are warnings.
# vllm/config/kv_transfer.py@v0.18.0: kv_load_failure_policy is Literal["recompute", "fail"] (default fail).
KV_LOAD_FAILURE_POLICIES = ("recompute", "fail")
REF_SPEC_PREFILL = "vllm-ascend#12104; GLM-5 tool calls with 3: vllm-ascend#7580"
REF_RECOMPUTE = ("vllm-ascend#11265: accuracy issue on P nodes, rejected there from v0.23.0; #11537 then ignores it "
                 "on kv_producer with a warning")
REF_ABORT_TIMEOUT = ("vllm-ascend#7140, renamed for v0.18.0 by #8618: "
                     "vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py@v0.18.0")
REF_FAILURE_POLICY = ("vLLM v0.18.0: vllm/v1/core/sched/scheduler.py reads kv_transfer_config.kv_load_failure_policy of "
                      "the top level; multi_connector.py builds each child from its own dict")
REF_BATCHED = "vLLM v0.18.0: vllm/config/scheduler.py"
REF_BATCHED_SPEC = ("vLLM v0.18.0: vllm/v1/core/sched/scheduler.py token budget, vllm/config/vllm.py graph sizes; "
                    "vllm-ascend#8240")
_TRUE, _FALSE = ("true",), ("false",)
# Variables without a usable default: None means not set, which is an error. The others read None as "not
# defined here" (e.g. a role default while validation runs on the controller) and are skipped.
REQUIRED_KEYS = (
    "a3_listen_address", "a3_work_dir", "a3_host_work_dir", "container_image_name", "container_image_tag",
    "container_name", "container_devices", "container_volumes", "vllm_model_path", "vllm_served_model_name",
    "vllm_kv_pool_backend", "vllm_env_common", "vllm_prefill_env", "vllm_decode_env", "vllm_env_extra",
    "vllm_serve_args_common", "vllm_prefill_serve_args", "vllm_decode_serve_args", "patches_table",
    "patches_pip_pins", "etcd_version", "etcd_name", "yuanrong_package_version",
)

# (variable, minimum) of plain integer knobs. Seconds unless named otherwise.
INT_KEYS = (
    ("container_pull_retries", 1), ("container_pull_delay", 0), ("container_pull_timeout", 1),
    ("etcd_health_timeout", 1),
    ("proxy_health_timeout", 1), ("proxy_fail_threshold", 1), ("proxy_retry_after", 0),
    ("vllm_health_timeout", 1), ("vllm_health_interval", 1), ("vllm_stop_timeout", 1),
    ("vllm_canary_interval", 1), ("vllm_canary_timeout", 1), ("vllm_canary_failures", 1),
    ("vllm_peer_down_checks", 1),
    ("yuanrong_node_timeout_s", 1), ("yuanrong_node_dead_timeout_s", 1), ("yuanrong_arena_per_tenant", 1),
    ("yuanrong_register_timeout", 1), ("yuanrong_start_timeout", 1),
    ("supervise_restart_sec", 0), ("supervise_backoff_base", 0), ("supervise_backoff_max", 0),
    ("supervise_crash_loop_restarts", 1), ("supervise_crash_loop_minutes", 1), ("supervise_wait_timeout", 1),
    ("gate_request_timeout", 1), ("gate_pool_prefix_words", 1),
    ("preflight_npu_smi_timeout", 1), ("preflight_hccn_timeout", 1), ("preflight_hccn_max_workers", 1),
    ("preflight_hbm_used_limit_mb", 0), ("preflight_ping_count", 1),
    ("etcd_tls_ca_days", 1), ("etcd_tls_cert_days", 1), ("etcd_tls_renew_days", 1),
    ("proxy_max_body_bytes", 1024), ("proxy_max_inflight", 1),
)
# Seconds the honest proxy reads as floats (--a3-probe-interval etc.).
FLOAT_KEYS = ("proxy_probe_interval", "proxy_probe_timeout", "proxy_first_byte_timeout", "proxy_header_timeout",
              "proxy_body_timeout", "proxy_idle_timeout")
BOOL_KEYS = (
    "container_privileged", "hugepages_per_numa", "patches_verify_backend", "patches_pip_compile", "proxy_wrapper",
    "yuanrong_enable_huge_tlb", "gate_pool_check", "vllm_kv_pool_enabled", "preflight_hccs_ping", "preflight_strict_link",
    "preflight_strict_net_health", "preflight_memory_check", "preflight_buffer_pool_advice",
    "preflight_docker_check", "preflight_model_check", "preflight_nic_check", "preflight_port_check", "etcd_tls",
    "yuanrong_curve_zmq", "monitoring_prometheus_web_tls",
)
# Absolute paths; the second element says whether '/' itself is refused (a directory the roles create,
# mount or fill).
PATH_KEYS = (
    ("a3_work_dir", True), ("a3_host_work_dir", True), ("container_timezone_file", False),
    ("container_working_dir", False), ("etcd_install_dir", False), ("etcd_data_dir", True),
    ("etcd_unit_file", False), ("hugepages_sysctl_file", False), ("patches_container_dir", True),
    ("patches_backend_map_file", False), ("vllm_model_path", True), ("vllm_launcher_src", False),
    ("proxy_script_src", False), ("yuanrong_liveness_path", False), ("yuanrong_run_dir", True),
    ("supervise_helper_dir", True), ("supervise_state_dir", True),
)
NONEMPTY_KEYS = (
    ("vllm_served_model_name", "the model name clients send, e.g. glm-5.1"),
    ("yuanrong_package_version", "the openyuanrong-datasystem version, e.g. 0.7.6rc1"),
    ("patches_git_user_email", "an e-mail for git am's committer, e.g. deploy@local"),
    ("patches_git_user_name", "a name for git am's committer, e.g. deploy"),
    ("vllm_python", "the interpreter in the container, e.g. python"),
    ("yuanrong_python", "the interpreter in the container, e.g. python"),
    ("proxy_python", "the interpreter in the container, e.g. python"),
)
CHOICE_KEYS = (
    ("container_restart_policy", RESTART_POLICIES), ("proxy_restart_policy", RESTART_POLICIES),
    ("yuanrong_install_from", ("url", "file", "index")), ("vllm_kv_pool_backend", POOL_BACKENDS),
    ("preflight_hbm_in_use", ("warn", "fail", "ignore")), ("preflight_peer_mode", ("same_index", "all_pairs")),
    ("preflight_tls_scope", ("all", "device")),
)
STR_LIST_KEYS = (
    "container_devices", "container_volumes", "container_extra_volumes", "container_proxy_env",
    "container_capabilities", "container_cap_drop", "container_security_opts", "container_device_cgroup_rules",
    "proxy_unset_env", "vllm_env_unset", "yuanrong_numa_options", "yuanrong_pip_args", "patches_pip_index_args",
    "preflight_hccn_checks", "preflight_port_owner_names", "preflight_port_owner_cmdlines",
)
DICT_KEYS = (
    "container_extra_env", "proxy_extra_args", "yuanrong_worker_flags", "vllm_mooncake_extra_config",
    "vllm_kv_top_level_extra", "vllm_env_common", "vllm_prefill_env", "vllm_decode_env", "vllm_env_extra",
    "vllm_serve_args_common", "vllm_prefill_serve_args", "vllm_decode_serve_args",
    "patches_pip_pins", "patches_table", "etcd_checksums",
)
ENV_NAME_LIST_KEYS = ("container_proxy_env", "proxy_unset_env", "vllm_env_unset")
HCCN_CHECKS = ("vnic", "link", "net_health", "tls", "ip", "hccs_ping")
# Every variable a rule reads besides the tables above (_topology.HOST_KEYS must hold them all).
OTHER_KEYS = (
    "a3_business_ip", "a3_listen_address", "vllm_bind_host", "proxy_bind_host", "etcd_listen_address",
    "hugepages_target", "hugepages_page_size",
    "container_registry", "container_image_name", "container_image_tag", "container_name", "proxy_container_name",
    "patches_vllm_ascend_version", "patches_pip_extra_args", "etcd_version", "etcd_name", "etcd_archive_src",
    "etcd_download_base_url", "etcd_service_name", "yuanrong_package_version", "yuanrong_wheel_url",
    "yuanrong_wheel_src", "vllm_prefill_engine_id", "vllm_decode_engine_id", "supervise_worker_service",
    "supervise_engine_service", "vllm_log_file", "preflight_page_size", "preflight_min_hdk", "preflight_min_cann",
    "preflight_fabric_min_hdk", "preflight_fabric_min_cann", "preflight_memory_reserve", "gate_expect_pattern",
    "proxy_admin_bind_host", "proxy_admin_token", "proxy_api_keys", "vllm_api_key",
    "monitoring_prometheus_web_users", "monitoring_prometheus_web_user", "monitoring_prometheus_web_password",
)
RULE_KEYS = tuple(dict.fromkeys(
    [k for k, _unused in INT_KEYS] + list(FLOAT_KEYS) + list(BOOL_KEYS) + [k for k, _unused in PATH_KEYS]
    + [k for k, _unused in NONEMPTY_KEYS] + [k for k, _unused in CHOICE_KEYS] + list(STR_LIST_KEYS) + list(DICT_KEYS)
    + list(OTHER_KEYS)))


def _show(value):
    return "not set" if value is None else repr(value)


def _templated(value):
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _int(value):
    """The integer of an int or a decimal string (what Ansible's int conversion takes), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r"^\s*-?[0-9]+\s*$", value):
        return int(value)
    return None


def _float(value):
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _mapping(value):
    """A -config flag's mapping: the dict itself or the JSON text of one, else None."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _bool(value):
    """True/False for a YAML boolean or the text a template gives back ('True', 'false'), else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() == "true"
    return None


class _Host:
    """Collects the messages of one host."""

    def __init__(self, name, hv, errors, warnings):
        self.name, self.hv, self.errors, self.warnings = name, hv, errors, warnings

    def get(self, key):
        """The value, or _ABSENT when the key is not in the dict, still a Jinja expression, or None for a
        variable that is not in REQUIRED_KEYS."""
        value = self.hv.get(key, _ABSENT)
        if _templated(value) or (value is None and key not in REQUIRED_KEYS):
            return _ABSENT
        return value

    def error(self, key, value, why_and_what):
        self.errors.append("%s: %s is %s: %s" % (self.name, key, _show(value), why_and_what))

    def warn(self, key, value, why_and_what):
        self.warnings.append("%s: %s is %s: %s" % (self.name, key, _show(value), why_and_what))


def _check_types(h):
    for key, minimum in INT_KEYS:
        value = h.get(key)
        if value is _ABSENT:
            continue
        number = _int(value)
        if number is None or number < minimum:
            h.error(key, value, "set an integer >= %d" % minimum)
    for key in FLOAT_KEYS:
        value = h.get(key)
        if value is not _ABSENT and (_float(value) or 0) <= 0:
            h.error(key, value, "set a number of seconds above 0, e.g. 5 or 0.5")
    for key in BOOL_KEYS:
        value = h.get(key)
        if value is not _ABSENT and _bool(value) is None:
            h.error(key, value, "set true or false (unquoted YAML booleans)")
    for key, no_root in PATH_KEYS:
        value = h.get(key)
        if value is _ABSENT:
            continue
        if not isinstance(value, str) or not value.startswith("/") or PLACEHOLDER_RE.search(value):
            h.error(key, value, "set an absolute path (starting with /)")
        elif no_root and value.rstrip("/") == "":
            h.error(key, value, "'/' itself cannot be used here: set a directory of its own")
    for key, example in NONEMPTY_KEYS:
        value = h.get(key)
        if value is not _ABSENT and (value is None or not isinstance(value, (str, int)) or isinstance(value, bool)
                                     or str(value).strip() == "" or PLACEHOLDER_RE.search(str(value))):
            h.error(key, value, "set %s" % example)
    for key, choices in CHOICE_KEYS:
        value = h.get(key)
        if value is _ABSENT or value in choices:
            continue
        hint = " (an unquoted no is YAML false: write \"no\")" if value is False and "no" in choices else ""
        h.error(key, value, "set one of %s%s" % (", ".join(choices), hint))
    for key in STR_LIST_KEYS:
        value = h.get(key)
        if value is _ABSENT:
            continue
        if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
            h.error(key, value, "set a list of non-empty strings (quote numbers), e.g. []")
    for key in DICT_KEYS:
        value = h.get(key)
        if value is not _ABSENT and not isinstance(value, dict):
            h.error(key, value, "set a mapping, e.g. {}")
    for key in ENV_NAME_LIST_KEYS:
        value = h.get(key)
        if isinstance(value, list):
            bad = [x for x in value if not (isinstance(x, str) and _ENV_NAME_RE.match(x))]
            if bad:
                h.error(key, value, "%s are not environment variable names: set names such as http_proxy"
                        % ", ".join(repr(b) for b in bad))


def _check_site(h):
    ip = h.hv.get("a3_business_ip")
    for key in ("a3_listen_address", "vllm_bind_host", "proxy_bind_host", "etcd_listen_address"):
        value = h.get(key)
        if value is _ABSENT:
            continue
        try:
            addr = ipaddress.ip_address(str(value))
        except ValueError:
            h.error(key, value, "set an IP address: 0.0.0.0 (every address, the seed) or the node's "
                    "business IP (a3_business_ip)")
            continue
        # The roles reach every service through the business IP (health polls, etcd's advertised URL, the
        # proxy's address): a specific listen address other than that one is never reached.
        if not addr.is_unspecified and str(value) != str(ip) and ip and not PLACEHOLDER_RE.search(str(ip)):
            h.error(key, value, "the roles reach every service on the node's business IP (a3_business_ip), which "
                    "this address does not cover: set 0.0.0.0 or the node's business IP")


def _check_hugepages(h):
    target, page = h.get("hugepages_target"), h.get("hugepages_page_size")
    if page is not _ABSENT:
        try:
            size = parse_size(page)
        except ValueError:
            size = None  # _topology reports the unreadable size
        if size is not None and size not in HUGEPAGE_SIZES:
            h.error("hugepages_page_size", page, "the kernel has no hugepages of that size: set the node's "
                    "Hugepagesize (grep Hugepagesize /proc/meminfo), one of %s" % ", ".join(HUGEPAGE_SIZES.values()))
    if target is not _ABSENT:
        try:
            size = parse_size(target)
        except ValueError:
            return
        try:
            page_size = parse_size(page) if page is not _ABSENT else 0
        except ValueError:
            page_size = 0
        if size <= 0 or size < page_size:
            # The role sets vm.nr_hugepages = target / page size: 0 frees the pool the datasystem and the
            # container's shm live in, on every node.
            h.error("hugepages_target", target, "that is zero hugepages, which would free the hugepage pool on "
                    "the node: set the pool size, e.g. 500G (seed) or 1T on 2T hosts")


def _check_container(h):
    registry = h.get("container_registry")
    if registry is not _ABSENT and registry not in (None, ""):
        if not isinstance(registry, str) or "://" in registry or not _REGISTRY_RE.match(registry.rstrip("/")):
            h.error("container_registry", registry, "set a registry host[:port][/path] without scheme, e.g. "
                    "quay.io or 127.0.0.1:5000, or empty for docker's default")
    name = h.get("container_image_name")
    if name is not _ABSENT and not (isinstance(name, str) and _IMAGE_NAME_RE.match(name)):
        h.error("container_image_name", name, "set a lowercase image path without registry or tag, e.g. "
                "ascend/vllm-ascend")
    tag = h.get("container_image_tag")
    if tag is not _ABSENT and not (isinstance(tag, str) and _TAG_RE.match(tag)):
        h.error("container_image_tag", tag, "set the image tag as a quoted string (letters, digits, '_', '.', "
                "'-', at most 128), e.g. v0.18.0-a3")
    for key in ("container_name", "proxy_container_name"):
        value = h.get(key)
        if value is not _ABSENT and not (isinstance(value, str) and _CONTAINER_NAME_RE.match(value)):
            h.error(key, value, "set a docker container name: 2 or more of letters, digits, '_', '.', '-', "
                    "starting with a letter or digit, e.g. yr_glm5")
    engine, proxy = h.get("container_name"), h.get("proxy_container_name")
    if engine is not _ABSENT and proxy is not _ABSENT and engine == proxy and isinstance(proxy, str):
        h.error("proxy_container_name", proxy, "it is container_name too, so the proxy container would replace "
                "the engines' container: set another name (default: <container_name>_proxy)")
    devices = h.get("container_devices")
    if isinstance(devices, list):
        bad = [d for d in devices if isinstance(d, str) and not d.startswith("/")]
        if bad:
            h.error("container_devices", devices, "%s: set device paths, e.g. /dev/davinci_manager"
                    % ", ".join(repr(b) for b in bad))
    mounts = {}
    for key in ("container_volumes", "container_extra_volumes"):
        value = h.get(key)
        if not isinstance(value, list):
            continue
        for spec in value:
            if not isinstance(spec, str):
                continue
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not parts[1].startswith("/") or not parts[0] \
                    or not (parts[0].startswith("/") or re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", parts[0])):
                h.error(key, spec, "a mount is host_path:container_path[:options] with absolute paths: set e.g. "
                        "/data:/data or /data:/data:ro")
                continue
            mounts.setdefault(parts[1].rstrip("/") or "/", []).append(spec)
    # The container role mounts these itself (roles/container/vars: container_all_volumes).
    for key, target in (("a3_work_dir", h.get("a3_work_dir")), ("patches_container_dir", h.get("patches_container_dir"))):
        if isinstance(target, str) and target.rstrip("/") in mounts:
            h.error(key, target, "docker refuses a second mount at that container path (%s in "
                    "container_volumes/container_extra_volumes): set another directory or drop that mount"
                    % mounts[target.rstrip("/")][0])
    for target, specs in sorted(mounts.items()):
        if len(specs) > 1:
            h.error("container_volumes", specs, "docker refuses two mounts at one container path (%s): set only one of them"
                    % target)
    model = h.get("vllm_model_path")
    if isinstance(model, str) and model.startswith("/") and mounts and model.rstrip("/") not in mounts \
            and not any(model.startswith(t.rstrip("/") + "/") for t in mounts):
        h.warn("vllm_model_path", model, "no container_volumes/container_extra_volumes mount covers it, so the "
               "engines in the container will not find the model unless the image has it: add a mount of its "
               "directory to container_extra_volumes (seed: /data:/data) or set the path under a mounted one")
    env = h.get("container_extra_env")
    if isinstance(env, dict):
        for key, val in env.items():
            if not _ENV_NAME_RE.match(str(key)) or not isinstance(val, str):
                # community.docker refuses non-string env values (ambiguous YAML types must be quoted).
                h.error("container_extra_env", {key: val}, "set variable names with quoted string values, e.g. "
                        "{HF_HUB_OFFLINE: \"1\"}")


def _tag_version(h):
    """(version, where from) the patches role will select, or (None, why)."""
    tag = h.get("container_image_tag")
    from_tag = None
    if isinstance(tag, str) and _TAG_RE.match(tag):
        match = _TAG_VERSION_RE.search(tag)
        from_tag = match.group(0) if match else None
    override = h.get("patches_vllm_ascend_version")
    # The role default derives it from the tag; templated hostvars show that value, which is no override.
    if override not in (_ABSENT, None, "") and str(override) != from_tag:
        return str(override), "patches_vllm_ascend_version"
    if tag is _ABSENT or not isinstance(tag, str) or not _TAG_RE.match(tag):
        return None, None  # _check_container reports a malformed tag
    return from_tag, "container_image_tag"


def _check_patches(h):
    table = h.get("patches_table")
    if isinstance(table, dict):
        for version, row in table.items():
            if not isinstance(row, list) or not row:
                h.error("patches_table", {version: row}, "each row is a non-empty list of {file, repo, purpose}: "
                        "set the patches of vllm-ascend %s in order" % version)
                continue
            for item in row:
                ok = isinstance(item, dict)
                file_ = item.get("file") if ok else None
                repo = item.get("repo") if ok else None
                if not (isinstance(file_, str) and file_.strip() and "/" not in file_
                        and isinstance(repo, str) and repo.startswith("/")):
                    h.error("patches_table", {version: [item]}, "each patch needs file (a file name in "
                            "patches_src_dir) and repo (the absolute path of the git repository in the container): "
                            "set both, e.g. {file: 0001-x.patch, repo: /vllm-workspace/vllm-ascend, purpose: ...}")
                elif not str(item.get("purpose") or "").strip():
                    h.warn("patches_table", {version: [item]}, "a patch without purpose: set purpose (what it fixes; "
                           "the render plan and the docs show it)")
    version, source = _tag_version(h)
    if source == "container_image_tag" and version is None:
        h.error("container_image_tag", h.get("container_image_tag"), "it has no vllm-ascend version (X.Y.Z or "
                "X.Y.ZrcN), so no patch set can be selected: set a tag such as v0.18.0-a3, or set "
                "patches_vllm_ascend_version to a row of patches_table")
    elif version is not None and isinstance(table, dict):
        if version not in table:
            h.error(source, h.get(source), "it selects vllm-ascend %s, which has no row in patches_table (rows: "
                    "%s): the patch set would be empty and the yuanrong backend missing; add a '%s' row to "
                    "patches_table or set patches_vllm_ascend_version to one of its rows"
                    % (version, ", ".join(sorted(str(k) for k in table)) or "none", version))
        elif h.get("vllm_kv_pool_backend") == "yuanrong" and isinstance(table[version], list) and not any(
                "yuanrong" in str((item or {}).get("file", "")).lower() for item in table[version]
                if isinstance(item, dict)):
            h.warn("patches_table", {version: [i.get("file") if isinstance(i, dict) else i for i in table[version]]},
                   "vllm_kv_pool_backend is yuanrong but no patch of this row names yuanrong; vllm-ascend %s has no "
                   "yuanrong backend of its own (patches verify fails): add the 0001-Implement-yuanrong-backend "
                   "patch to the row" % version)
    pins = h.get("patches_pip_pins")
    if isinstance(pins, dict):
        for name, pin in pins.items():
            if not _PIP_NAME_RE.match(str(name)):
                h.error("patches_pip_pins", {name: pin}, "set a package name as pip spells it, e.g. transformers")
            elif isinstance(pin, float):
                h.error("patches_pip_pins", {name: pin}, "YAML read the version as a number (5.10 becomes 5.1): "
                        "set it quoted, e.g. %s: \"%s\"" % (name, pin))
            elif isinstance(pin, bool) or not isinstance(pin, (str, int)) or not _PIP_VERSION_RE.match(str(pin)):
                h.error("patches_pip_pins", {name: pin}, "set the exact version to pin (the role adds '=='), e.g. "
                        "%s: 5.2.0" % name)
    extra = h.get("patches_pip_extra_args")
    if extra is not _ABSENT and not isinstance(extra, str):
        h.error("patches_pip_extra_args", extra, "set one string of pip flags, e.g. '--no-deps --force-reinstall'")


def _check_etcd(h):
    version = h.get("etcd_version")
    if version is not _ABSENT and not (isinstance(version, str) and _ETCD_VERSION_RE.match(version)):
        h.error("etcd_version", version, "the release archive is etcd-<version>-linux-<arch>.tar.gz: set vX.Y.Z, "
                "e.g. v3.5.12")
        version = _ABSENT
    name = h.get("etcd_name")
    if name is not _ABSENT and not (isinstance(name, str) and re.match(r"^[A-Za-z0-9._-]+$", name)):
        h.error("etcd_name", name, "it goes into --initial-cluster <name>=<url>: set letters, digits, '.', '_' or "
                "'-', e.g. etcd-single")
    archive, sums = h.get("etcd_archive_src"), h.get("etcd_checksums")
    if isinstance(sums, dict):
        for ver, per_arch in sums.items():
            if not isinstance(per_arch, dict) or not all(
                    isinstance(s, str) and _SHA256_RE.match(s) for s in per_arch.values()):
                h.error("etcd_checksums", {ver: per_arch}, "set {amd64: sha256:<64 hex>, arm64: sha256:<64 hex>} "
                        "from the release's SHA256SUMS")
    if archive in (None, "") and isinstance(version, str) and isinstance(sums, dict) and not sums.get(version):
        h.error("etcd_version", version, "etcd_checksums has no sha256 for it and etcd_archive_src is empty, so the "
                "download is refused on the node: add etcd_checksums['%s'] (amd64/arm64 from the release's "
                "SHA256SUMS) or set etcd_archive_src to an archive on the controller" % version)
    base = h.get("etcd_download_base_url")
    if archive in (None, "") and base is not _ABSENT and not (
            isinstance(base, str) and re.match(r"^https?://[^\s/]+", base)):
        h.error("etcd_download_base_url", base, "set an http(s) URL of the release directory, e.g. "
                "https://github.com/etcd-io/etcd/releases/download")


def _check_etcd_tls(h):
    """The certificates' lifetimes: a renewal window as long as a certificate's life would reissue it on every run."""
    renew = _int(h.get("etcd_tls_renew_days"))
    for key in ("etcd_tls_cert_days", "etcd_tls_ca_days"):
        days = _int(h.get(key))
        if renew is not None and days is not None and renew >= days:
            h.error("etcd_tls_renew_days", renew, "it is not below %s (%d), so every run would reissue the "
                    "certificates and restart etcd and the workers: set fewer days (default 30)" % (key, days))


_BCRYPT_RE = re.compile(r"^\$2[aby]\$\d{2}\$[./A-Za-z0-9]{53}$")


def _check_prometheus_web(h):
    """Prometheus' basic-auth users (bcrypt hashes, as its web config takes them) and the role's own login."""
    users = h.get("monitoring_prometheus_web_users")
    if users is _ABSENT or users in (None, {}):
        return
    if not isinstance(users, dict):
        h.error("monitoring_prometheus_web_users", "(not shown)", "set a mapping {user: bcrypt hash}")
        return
    bad = sorted(str(u) for u, hashed in users.items() if not (isinstance(hashed, str) and _BCRYPT_RE.match(hashed)))
    if bad:
        h.errors.append("%s: monitoring_prometheus_web_users: the value of %s is not a bcrypt hash: set "
                        "the output of 'htpasswd -nBC 10 USER' after the colon (Prometheus' web config takes hashes)"
                        % (h.name, ", ".join(bad)))
    user, password = h.get("monitoring_prometheus_web_user"), h.get("monitoring_prometheus_web_password")
    if user is not _ABSENT and user not in users:
        h.errors.append("%s: monitoring_prometheus_web_user is %r: the role's own calls log in as this user, which "
                        "monitoring_prometheus_web_users does not list: set one of %s"
                        % (h.name, user, ", ".join(sorted(map(str, users)))))
    if password in ("", None):
        h.errors.append("%s: monitoring_prometheus_web_password is not set: the role's own calls need the password "
                        "of monitoring_prometheus_web_user (Ansible Vault)" % h.name)


def _wheel_version(path):
    parts = str(path).rsplit("/", 1)[-1].split("-")
    return parts[1] if len(parts) >= 5 and str(path).endswith(".whl") else None


def _norm_version(version):
    return re.sub(r"[._-]?(a|b|rc|post|dev)", r"\1", str(version).lower())


def _check_yuanrong(h):
    node, dead = _int(h.get("yuanrong_node_timeout_s")), _int(h.get("yuanrong_node_dead_timeout_s"))
    if node is not None and dead is not None and node >= 1 and dead <= node:
        # The datasystem worker refuses to start: "node_dead_timeout_s must be greater than node_timeout_s".
        h.error("yuanrong_node_dead_timeout_s", h.get("yuanrong_node_dead_timeout_s"), "the datasystem worker "
                "refuses to start unless it is greater than yuanrong_node_timeout_s (%d): set a larger value "
                "(seed: 20 and 30)" % node)
    if node == 1:
        h.warn("yuanrong_node_timeout_s", 1, "the worker's etcd heartbeat is 1000 ms and must stay below "
               "node_timeout_s x 1000: set 2 or more (seed: 20)")
    source = h.get("yuanrong_install_from")
    version = h.get("yuanrong_package_version")
    for mode, key, example in (("url", "yuanrong_wheel_url", "https://.../openyuanrong_datasystem-0.7.6rc1-cp311-"
                                "cp311-manylinux_2_35_aarch64.whl"),
                               ("file", "yuanrong_wheel_src", "/path/on/the/controller/openyuanrong_datasystem-"
                                "0.8.1-cp311-cp311-manylinux_2_34_x86_64.whl")):
        wheel = h.get(key)
        if source != mode or wheel is _ABSENT:
            continue
        ok = isinstance(wheel, str) and wheel.endswith(".whl") and (
            mode == "file" or re.match(r"^https?://", wheel))
        if not ok:
            h.error(key, wheel, "yuanrong_install_from is %s: set the wheel's %s, e.g. %s"
                    % (mode, "URL" if mode == "url" else "path", example))
        elif isinstance(version, str) and _wheel_version(wheel) \
                and _norm_version(_wheel_version(wheel)) != _norm_version(version):
            h.warn(key, wheel, "the wheel is version %s but yuanrong_package_version is %s: the role compares the "
                   "installed version with the latter and reinstalls on every run; set them to the same version"
                   % (_wheel_version(wheel), version))
    _check_flag_dict(h, "yuanrong_worker_flags", "the worker", "rpc_thread_num: 32", True,
                     lambda flag: "the role sets --%s itself: set %s instead" % (flag, WORKER_FLAGS[flag])
                     if flag in WORKER_FLAGS else None)


def _env_layers(h, side):
    return [(name, h.get(name)) for name in ("vllm_env_common", "vllm_%s_env" % side, "vllm_env_extra")]


def merged_env(hv, side):
    """The engines' environment of a host as roles/vllm/vars merges it (common, then side, then extra),
    with the variable that set each value: {name: (value, variable)}."""
    h = _Host("", hv, [], [])
    out = {}
    for layer, env in _env_layers(h, side):
        if isinstance(env, dict):
            for key, value in env.items():
                out[str(key)] = (value, layer)
    return out


def _check_env(h, side):
    for layer, env in _env_layers(h, side):
        if not isinstance(env, dict):
            continue
        for key, value in env.items():
            if not _ENV_NAME_RE.match(str(key)):
                h.error(layer, {key: value}, "%r is not an environment variable name (bash refuses 'export' of it "
                        "when the engines start): set a name of letters, digits and '_'" % key)
            elif not isinstance(value, str):
                # run_dp_template.sh writes export KEY="<value>": YAML true/false come out as True/False, null as
                # None, 010 as 8, 1e3 as 1000.0.
                example = "1" if value is True else "0" if value is False else "" if value is None else value
                h.error(layer, {key: value}, "environment values are written as text, and unquoted YAML numbers, "
                        "booleans and null do not come out as written (true -> True, null -> None, 010 -> 8): set "
                        "it quoted, e.g. %s: \"%s\"" % (key, example))
    if side is None or not any(isinstance(env, dict) for _unused, env in _env_layers(h, side)):
        return
    env = merged_env(h.hv, side)
    unset = h.get("vllm_env_unset")
    unset = set(unset) if isinstance(unset, list) else set()
    layers = "vllm_env_common + vllm_%s_env + vllm_env_extra" % side
    seed = env.get("PYTHONHASHSEED")
    if "PYTHONHASHSEED" in unset:
        h.error("vllm_env_unset", sorted(unset), "it removes PYTHONHASHSEED, so every engine hashes KV blocks with "
                "its own random seed and the pool never hits: take PYTHONHASHSEED out of vllm_env_unset")
    elif seed is None:
        h.error("PYTHONHASHSEED (%s)" % layers, None, "vLLM seeds its KV block hashes from it, without it every "
                "engine hashes differently and the pool never hits: set PYTHONHASHSEED: \"0\" in vllm_env_common")
    else:
        number = _int(seed[0])  # an unquoted number is reported by the per-layer rule above
        if number is None or not 0 <= number <= 4294967295:
            h.error("PYTHONHASHSEED (%s, set in %s)" % (layers, seed[1]), seed[0], "Python accepts 'random' or an "
                    "integer 0..4294967295 and the pool needs one fixed value: set a quoted integer, e.g. \"0\"")
    backend = h.get("vllm_kv_pool_backend")
    for key, (ref, what) in sorted(DERIVED_ENV.items()):
        if key == "DS_WORKER_ADDR" and backend != "yuanrong":
            continue
        got = env.get(key)
        value = got[0] if got else None
        if key in unset:
            msg = "vllm_env_unset removes it; the engines need %s there" % what
            (h.error if key == "DS_WORKER_ADDR" else h.warn)(
                "vllm_env_unset", sorted(unset), "%s (%s): take %s out of vllm_env_unset" % (msg, key, key))
        elif got is None:
            if key == "DS_WORKER_ADDR":
                h.error("DS_WORKER_ADDR (%s)" % layers, None, "the yuanrong pool backend reads this node's worker "
                        "address from it and stops without it: set DS_WORKER_ADDR: $ds_worker_addr in vllm_env_common")
            else:
                h.warn("%s (%s)" % (key, layers), None, "the seed sets it to %s (%s): set %s: %s in vllm_env_common"
                       % (ref, what, key, ref))
        elif isinstance(value, str) and value.replace("${", "$").replace("}", "") != ref:
            h.warn("%s (set in %s)" % (key, got[1]), value, "it replaces the derived %s (%s), which the topology "
                   "keeps right per node and rank: remove it from %s unless this is intended" % (ref, what, got[1]))
    nixl, mooncake = "VLLM_NIXL_ABORT_REQUEST_TIMEOUT", "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT"
    if nixl in env and nixl not in unset and (mooncake not in env or mooncake in unset):
        # vllm-ascend v0.18.0's Mooncake connector frees a finished request's KV blocks on the prefill side after
        # VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (vLLM's envs, default 480 s); the NIXL variable is read by NixlConnector.
        h.warn("%s (set in %s)" % (nixl, env[nixl][1]), env[nixl][0], "the Mooncake connector does not read it: it "
               "reads %s (default 480 s), so the prefill side frees the KV blocks of a request decode never pulled "
               "after 480 s, not after this (%s): set %s in vllm_env_common (seconds, e.g. \"480\")"
               % (mooncake, REF_ABORT_TIMEOUT, mooncake))


def _is_launcher_flag(flag):
    flag = flag.replace("_", "-")
    return flag in LAUNCHER_FLAGS or flag.startswith(LAUNCHER_FLAG_PREFIXES)


def _check_serve_args(h, side):
    layers = [(name, h.get(name)) for name in ("vllm_serve_args_common", "vllm_%s_serve_args" % side)]
    merged = {}
    for layer, args in layers:
        if not isinstance(args, dict):
            continue
        for flag, value in args.items():
            flag_s = str(flag)
            if flag_s.startswith("-"):
                h.error(layer, {flag: value}, "the role adds the dashes itself (this becomes --%s): set the flag "
                        "as %s" % (flag_s, flag_s.lstrip("-")))
                continue
            if not _FLAG_RE.match(flag_s):
                h.error(layer, {flag: value}, "%r is not a vllm serve flag name: set the long flag without "
                        "dashes, e.g. max-model-len" % flag_s)
                continue
            if _is_launcher_flag(flag_s):
                h.error(layer, {flag: value}, "run_dp_template.sh sets --%s itself (from launch_online_dp.py and the "
                        "topology), a second one conflicts: remove it and set the inventory variable instead "
                        "(vllm_api_port, vllm_dp_*, vllm_<side>_tp_size, a3_listen_address, vllm_model_path, "
                        "vllm_<side>_kv_port)" % flag_s)
                continue
            merged[flag_s.replace("_", "-")] = (value, layer)
    if side is None:
        return
    for flag, (value, layer) in sorted(merged.items()):
        if _templated(value) or value is None or value is False:
            continue
        shown = {flag: value}
        if flag == "max-model-len":
            if isinstance(value, bool) or not _MODEL_LEN_RE.match(str(value)) or _int(value) in (0,) \
                    or (_int(value) is not None and _int(value) < -1):
                h.error(layer, shown, "set a positive token count (e.g. 202752, 128k), or -1/auto")
        elif flag in ("max-num-seqs", "max-num-batched-tokens", "block-size", "seed"):
            number = _int(value)
            if number is None or number < (0 if flag == "seed" else 1):
                h.error(layer, shown, "set a positive integer")
        elif flag == "gpu-memory-utilization":
            number = _float(value)
            if number is None or not 0 < number <= 1:
                h.error(layer, shown, "set the fraction of NPU memory vLLM may use, above 0 and at most 1 (e.g. 0.9)")
        elif flag.endswith("-config"):
            parsed = value
            if isinstance(value, str):
                try:
                    parsed = json.loads(value)
                except ValueError:
                    parsed = None
            ok = isinstance(parsed, dict) or (flag == "compilation-config" and _int(value) is not None)
            if not ok:
                h.error(layer, shown, "vLLM reads --%s as JSON: set a mapping, e.g. %s: {key: value}" % (flag, flag))
            elif flag == "speculative-config":
                tokens = parsed.get("num_speculative_tokens", 1)
                if _int(tokens) is None or _int(tokens) < 1:
                    h.error(layer, shown, "num_speculative_tokens must be a positive integer: set e.g. "
                            "{num_speculative_tokens: 3, method: deepseek_mtp}")
    _check_field_serve_args(h, side, merged)
    name = merged.get("served-model-name")
    want = h.get("vllm_served_model_name")
    if not any(isinstance(args, dict) for _unused, args in layers):
        return
    if isinstance(want, str) and want and name is None:
        h.error("vllm_serve_args_common", None, "served-model-name is missing, so vLLM names the model after its "
                "path and requests for %r (gate, canary, clients) get 404: set served-model-name: \"{{ "
                "vllm_served_model_name }}\"" % want)
    elif isinstance(want, str) and name is not None and not _templated(name[0]) and str(name[0]) != want:
        h.error(name[1], {"served-model-name": name[0]}, "vllm_served_model_name is %r, which the gate, the canary "
                "and the proxy's clients send: set served-model-name: \"{{ vllm_served_model_name }}\"" % want)


def _check_field_serve_args(h, side, merged):
    """Rules from the field on one side's vllm serve flags (common combined with the side's: the role's combine
    is shallow, so a side's speculative-config or additional-config replaces the common mapping whole)."""
    def parsed(flag):
        value, layer = merged.get(flag, (None, None))
        return (None if _templated(value) else _mapping(value)), value, layer

    spec, spec_value, spec_layer = parsed("speculative-config")
    tokens = _int(spec.get("num_speculative_tokens", 1)) if spec is not None else 0
    # A prefill node only fills the KV cache and drafts nothing; vllm-ascend's PD guide asks for 1 there for
    # models other than hybrid Mamba ones (GLM-5.1 is not), and GLM-5 tool calls broke with 3.
    if side == "prefill" and tokens is not None and tokens > 1:
        h.warn(spec_layer, {"speculative-config": spec_value}, "num_speculative_tokens %d on the prefill side, which "
               "drafts nothing: upstream asks for 1 on P nodes of models that are not hybrid Mamba (GLM-5.1 is not), "
               "and GLM-5 tool-call arguments came out as broken JSON with more (%s): set speculative-config: %s in vllm_prefill_serve_args" % (
                   tokens, REF_SPEC_PREFILL, json.dumps(dict(spec, num_speculative_tokens=1))))
    extra, extra_value, extra_layer = parsed("additional-config")
    # vllm-ascend v0.18.0 (platform.py) installs the recompute scheduler on kv_producer as well as kv_consumer.
    if side == "prefill" and extra is not None and _bool(extra.get("recompute_scheduler_enable")):
        rest = {k: v for k, v in extra.items() if k != "recompute_scheduler_enable"}
        h.warn(extra_layer, {"additional-config": extra_value}, "recompute_scheduler_enable is on for the prefill "
               "side, where vllm-ascend v0.18.0 still runs the recompute scheduler and upstream found wrong answers; "
               "it belongs on decode (kv_consumer) only (%s): set additional-config: %s in vllm_prefill_serve_args "
               "(the whole mapping: it replaces the common one)" % (REF_RECOMPUTE, json.dumps(rest)))
    seqs = _int(merged.get("max-num-seqs", (None,))[0])
    batched = _int(merged.get("max-num-batched-tokens", (None,))[0])
    if not (seqs and batched and seqs > 0 and batched > 0):
        return  # unset (vLLM's defaults fit) or reported by the per-flag rule
    label = "vllm_serve_args_common + vllm_%s_serve_args" % side
    shown = {"max-num-seqs": seqs, "max-num-batched-tokens": batched}
    if batched < seqs:
        # SchedulerConfig refuses it: the engine does not start.
        h.error(label, shown, "vLLM refuses to start when max-num-batched-tokens is below max-num-seqs (%s): set "
                "max-num-batched-tokens to at least %d or max-num-seqs to at most %d" % (REF_BATCHED, seqs, batched))
    elif side == "decode" and tokens and batched < seqs * (1 + tokens):
        # Each decode request schedules 1 + num_speculative_tokens tokens a step within the budget of
        # max-num-batched-tokens, which also caps the decode graph sizes.
        shown["num_speculative_tokens"] = tokens
        h.warn(label, shown, "a full decode batch needs max-num-seqs x (1 + num_speculative_tokens) = %d tokens a "
               "step, but the step budget is max-num-batched-tokens, so only %d requests get all their tokens a step "
               "and the decode graphs stop at %d (%s): set max-num-batched-tokens to %d (seed: 8 x (1 + 3) = 32) or "
               "lower max-num-seqs to %d" % (seqs * (1 + tokens), batched // (1 + tokens), batched,
                                             REF_BATCHED_SPEC, seqs * (1 + tokens), max(1, batched // (1 + tokens))))


def _check_kv(h):
    top = h.get("vllm_kv_top_level_extra")
    if isinstance(top, dict):
        for key in top:
            if key in ("kv_connector", "kv_role"):
                h.error("vllm_kv_top_level_extra", {key: top[key]}, "it replaces the MultiConnector's own %s, which "
                        "breaks the P/D transfer and the pool: remove it" % key)
            elif key in ("kv_connector_extra_config", "engine_id"):
                h.warn("vllm_kv_top_level_extra", {key: top[key]}, "%s is derived (%s): remove it" % (
                    key, "the connector list is written over it" if key != "engine_id"
                    else "set vllm_<side>_engine_id instead"))
    if isinstance(top, dict) and "kv_load_failure_policy" in top \
            and top["kv_load_failure_policy"] not in KV_LOAD_FAILURE_POLICIES and not _templated(top["kv_load_failure_policy"]):
        h.error("vllm_kv_top_level_extra", {"kv_load_failure_policy": top["kv_load_failure_policy"]}, "vLLM 0.18.0 "
                "accepts only %s and refuses to start otherwise (vllm/config/kv_transfer.py@v0.18.0): set one of them"
                % " or ".join(KV_LOAD_FAILURE_POLICIES))
    mc = h.get("vllm_mooncake_extra_config")
    # The scheduler reads the policy of the MultiConnector (top level) only; in the Mooncake child's extra config
    # nothing reads it and the policy stays 'fail'.
    if isinstance(mc, dict) and "kv_load_failure_policy" in mc:
        h.error("vllm_mooncake_extra_config", {"kv_load_failure_policy": mc["kv_load_failure_policy"]}, "it lands in "
                "the Mooncake child connector's kv_connector_extra_config, where nothing reads it, so failed KV loads "
                "still fail the request (%s): remove it here and set it in vllm_kv_top_level_extra" % REF_FAILURE_POLICY)
    mc = h.get("vllm_mooncake_extra_config")
    if isinstance(mc, dict):
        for key in ("prefill", "decode"):
            if key in mc:
                h.warn("vllm_mooncake_extra_config", {key: mc[key]}, "the %s dp/tp block is derived from the "
                       "topology and replaces this: remove it" % key)
    for side in SIDES:
        key = "vllm_%s_engine_id" % side
        value = h.get(key)
        if value is not _ABSENT and value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
            h.error(key, value, "set a quoted string (seed: \"0\" on prefill) or null")


def _check_flag_dict(h, key, program, example, booleans, owned):
    """A {flag: value} option passed as --flag value (ascend.vllm_pd.valued_flags): each flag without dashes, not
    one the role sets itself (owned(flag): why and what to set, or None), each value a scalar (booleans only when
    the program takes true/false)."""
    flags = h.get(key)
    if not isinstance(flags, dict):
        return
    for flag, value in flags.items():
        flag_s = str(flag)
        if flag_s.startswith("-") or not _FLAG_RE.match(flag_s):
            h.error(key, {flag: value}, "set %s's flag without dashes, e.g. %s" % (program, example))
        elif owned(flag_s):
            h.error(key, {flag: value}, owned(flag_s))
        elif value is None or isinstance(value, (dict, list)) or (isinstance(value, bool) and not booleans):
            h.error(key, {flag: value}, "%s takes '--%s <value>': set %s" % (
                program, flag_s, "a number, a string or a boolean" if booleans else "a number or a string"))


def _check_proxy(h):
    _check_flag_dict(h, "proxy_extra_args", "the proxy", "max-retries: 3", False,
                     lambda flag: "the role sets --%s itself (from the topology and the proxy_* variables): remove "
                     "it" % flag if flag in PROXY_FLAGS or flag.startswith("a3-") else None)


def _secret_problem(value):
    """What is wrong with a key or token (never its value), or None: a string without white space or quotes, which
    travels in an HTTP header and a JSON file."""
    if not isinstance(value, str) or isinstance(value, bool):
        return "is not a string: set a quoted string (Ansible Vault gives one)"
    if value != value.strip() or any(c.isspace() for c in value) or '"' in value or "\\" in value:
        return "contains white space, a quote or a backslash, which an HTTP header cannot carry: set another value"
    if PLACEHOLDER_RE.search(value):
        return "is still a placeholder: set the real value"
    return None


def _check_curve(h):
    if _bool(h.get("yuanrong_curve_zmq")):
        h.error("yuanrong_curve_zmq", True, "the workers would refuse the engines: vllm-ascend's yuanrong backend "
                "connects without the CURVE client keys, which the vllm role does not pass yet (the KV pool would break "
                "silently): set false and keep the worker port on the business network (README 'Security')")


def _check_security(h, etcd_host):
    """The proxy's admin listener and the keys (checked on the proxy host, where the proxy reads them). No message
    shows a key's value. Returns what listens without credentials, for one warning of the whole inventory."""
    admin = h.get("proxy_admin_bind_host")
    open_listeners = []
    if admin is not _ABSENT:
        try:
            addr = ipaddress.ip_address(str(admin))
        except ValueError:
            addr = None
        ip = h.hv.get("a3_business_ip")
        if addr is None or not (addr.is_loopback or addr.is_unspecified or str(admin) == str(ip)):
            h.error("proxy_admin_bind_host", admin, "set 127.0.0.1 (the proxy host's loopback, the default: the roles "
                    "call the admin listener from that host), the proxy host's business IP or 0.0.0.0")
        elif not addr.is_loopback and not h.get("proxy_admin_token"):
            h.warn("proxy_admin_bind_host", admin, "the proxy's admin listener (drain, /instances/add) is reachable "
                   "from the network without a token: set proxy_admin_token (Ansible Vault) or keep 127.0.0.1")
    keys = h.get("proxy_api_keys")
    if keys is not _ABSENT:
        if not isinstance(keys, list):
            h.errors.append("%s: proxy_api_keys is not a list: set a list of keys (Ansible Vault), or [] for none"
                            % h.name)
        else:
            for index, key in enumerate(keys):
                problem = _secret_problem(key)
                if problem:
                    h.errors.append("%s: proxy_api_keys[%d] %s" % (h.name, index, problem))
            named = [k for k in keys if isinstance(k, str)]
            if len(set(named)) != len(named):
                h.errors.append("%s: proxy_api_keys lists a key twice: remove the repeated one" % h.name)
        if not keys:
            open_listeners.append("the proxy's public port (set proxy_api_keys)")
    for key in ("proxy_admin_token", "vllm_api_key"):
        value = h.get(key)
        if value is _ABSENT or value in ("", None):
            continue
        problem = _secret_problem(value)
        if problem:
            h.errors.append("%s: %s %s" % (h.name, key, problem))
    if h.get("vllm_api_key") in ("", None):
        open_listeners.append("the engines' /v1 routes (set vllm_api_key)")
    if _bool(h.get("etcd_tls")) is False:
        open_listeners.append("etcd on %s (set etcd_tls: true)" % etcd_host)
    return open_listeners


def _check_supervise(h):
    names = {}
    for key in ("supervise_worker_service", "supervise_engine_service", "etcd_service_name"):
        value = h.get(key)
        if value is _ABSENT:
            continue
        if not (isinstance(value, str) and _UNIT_RE.match(value)) or value.endswith(".service"):
            h.error(key, value, "set a systemd unit name without .service (letters, digits, ':', '_', '.', "
                    "'-'), e.g. ascend-vllm")
        else:
            names.setdefault(value, []).append(key)
    for value, keys in names.items():
        if len(keys) > 1:
            h.error(keys[-1], value, "%s has the same unit name: set different names" % " and ".join(keys[:-1]))
    base, cap = _int(h.get("supervise_backoff_base")), _int(h.get("supervise_backoff_max"))
    if base is not None and cap is not None and 0 <= cap < base:
        h.warn("supervise_backoff_max", cap, "it is below supervise_backoff_base (%d), so every restart waits "
               "the cap: set it at least as large" % base)
    interval, timeout = _int(h.get("vllm_health_interval")), _int(h.get("vllm_health_timeout"))
    if interval and timeout and interval >= timeout > 0:
        h.error("vllm_health_interval", interval, "it is not below vllm_health_timeout (%d), so the start is "
                "judged on one poll: set a shorter interval (default 5)" % timeout)
    log = h.get("vllm_log_file")
    if log is not _ABSENT and not (isinstance(log, str) and log.strip() and not log.startswith("/")
                                   and ".." not in log.split("/")):
        h.error("vllm_log_file", log, "it is a file name in a3_work_dir: set e.g. vllm_log.log")


def _check_preflight(h):
    checks = h.get("preflight_hccn_checks")
    if isinstance(checks, list):
        bad = [c for c in checks if c not in HCCN_CHECKS]
        if bad:
            h.error("preflight_hccn_checks", checks, "%s unknown: set a list of %s" % (
                ", ".join(repr(b) for b in bad), ", ".join(HCCN_CHECKS)))
    page = _int(h.get("preflight_page_size"))
    if h.get("preflight_page_size") is not _ABSENT and (page is None or page < 4096 or page & (page - 1)):
        h.error("preflight_page_size", h.get("preflight_page_size"), "set the kernel page size in bytes "
                "(getconf PAGE_SIZE): 4096, or 65536 with the 64k openYuanrong package")
    for key in ("preflight_min_hdk", "preflight_min_cann", "preflight_fabric_min_hdk", "preflight_fabric_min_cann"):
        value = h.get(key)
        if value is not _ABSENT and value not in (None, "") and not _VERSION_RE.match(str(value)):
            h.error(key, value, "set a dotted version such as 25.5.0, or \"\" to skip the check")
    reserve = h.get("preflight_memory_reserve")
    if reserve is not _ABSENT:
        try:
            parse_size(reserve)
        except ValueError:
            h.error("preflight_memory_reserve", reserve, "set a size such as 16G, or 0")
    for key in ("preflight_port_owner_names", "preflight_port_owner_cmdlines", "gate_expect_pattern"):
        value = h.get(key)
        for pattern in (value if isinstance(value, list) else [value] if isinstance(value, str) else []):
            try:
                re.compile(pattern)
            except re.error as exc:
                h.error(key, pattern, "not a regular expression (%s): set a valid Python regular expression "
                        "(escape literal characters with \\)" % exc)


def check_hosts(inv: dict, ordered: list, sides: dict):
    """Per-host rules. `sides` maps each host to 'prefill', 'decode' or None (in both groups).
    Returns (errors, warnings)."""
    errors, warnings = [], []
    hosts = inv.get("hosts") or {}
    for name in ordered:
        h = _Host(name, hosts.get(name) or {}, errors, warnings)
        side = sides.get(name)
        _check_types(h)
        _check_site(h)
        _check_hugepages(h)
        _check_container(h)
        _check_patches(h)
        _check_yuanrong(h)
        _check_env(h, side)
        _check_serve_args(h, side)
        _check_kv(h)
        _check_supervise(h)
        _check_preflight(h)
        _check_curve(h)
    errors_g, warnings_g = _check_same_everywhere(hosts, ordered, sides)
    return errors + errors_g, warnings + warnings_g


def check_service_hosts(inv: dict, etcd_host, proxy_host):
    """Rules for variables only the etcd host and the proxy host read."""
    errors, warnings = [], []
    hosts = inv.get("hosts") or {}
    if etcd_host in hosts:
        _check_etcd(_Host(etcd_host, hosts[etcd_host], errors, warnings))
        _check_etcd_tls(_Host(etcd_host, hosts[etcd_host], errors, warnings))
    if proxy_host in hosts:
        h = _Host(proxy_host, hosts[proxy_host], errors, warnings)
        _check_proxy(h)
        _check_prometheus_web(h)
        open_listeners = _check_security(h, etcd_host)
        if open_listeners:
            warnings.append("listeners that take requests without credentials: %s. That is the seed's configuration; "
                            "README 'Security' says how to turn each protection on" % "; ".join(open_listeners))
    return errors, warnings


# Values one deployment must share on every node: (variable or env name, why, error?).
_SAME = (
    ("vllm_served_model_name", "the proxy passes the client's model name to both sides; a side that serves another "
     "name answers 404", True),
    ("vllm_kv_pool_backend", "every instance shares one KV pool", True),
    ("vllm_kv_pool_enabled", "some instances would use the KV pool and others not (a benchmark A/B of the pool "
     "measures neither arm); set it for all hosts", False),
    ("container_image_tag", "prefill and decode must run the same vllm-ascend (the KV transfer and the patch set)",
     False),
    ("yuanrong_package_version", "the workers form one datasystem cluster in etcd", False),
)


def _check_same_everywhere(hosts, ordered, sides):
    errors, warnings = [], []
    names = [h for h in ordered if h in hosts]

    def differs(values, label, why, is_error, what):
        shown = {h: v for h, v in values.items() if v is not _ABSENT and not _templated(v)}
        if len({json.dumps(v, sort_keys=True, default=str) for v in shown.values()}) > 1:
            msg = ("%s: %s differs between the hosts (%s): %s; %s" % (
                ", ".join(shown), label, ", ".join("%s=%r" % kv for kv in shown.items()), why, what))
            (errors if is_error else warnings).append(msg)

    for key, why, is_error in _SAME:
        differs({h: hosts[h].get(key, _ABSENT) for h in names}, key, why, is_error,
                "set one value for every host (group_vars/all)")
    seeds = {}
    for h in names:
        if sides.get(h):
            got = merged_env(hosts[h], sides[h]).get("PYTHONHASHSEED")
            if got is not None:
                seeds[h] = str(got[0])
    differs(seeds, "PYTHONHASHSEED (vllm_env_common + vllm_<side>_env + vllm_env_extra)",
            "vLLM seeds its KV block hashes from it, so engines with different seeds never find each other's blocks "
            "in the pool", True, "set the same value on every host (one value in vllm_env_common, none in host_vars "
            "or vllm_env_extra of one host)")
    return errors, warnings


def check_topology(inv: dict, topo: dict):
    """Rules on the derived topology: port ranges that run past 65535."""
    errors = []
    for name, me in topo["hosts"].items():
        for inst in me["instances"]:
            if inst["api_port"] > 65535:
                errors.append("%s: vllm_api_port is %d: dp rank %d listens on %d, above 65535: set vllm_api_port "
                              "to at most %d" % (name, me["vllm_start_port"], inst["dp_rank"], inst["api_port"],
                                                 65535 - me["dp_size_local"] + 1))
            if inst["kv_ports"][1] > 65535:
                setting = int(inv["hosts"][name]["vllm_%s_kv_port" % me["side"]])
                instances = topo["sides"][me["side"]].get("instances", me["dp_size"])
                errors.append("%s: vllm_%s_kv_port is %d: dp rank %d's Mooncake ports end at %d, above 65535: set "
                              "vllm_%s_kv_port to at most %d" % (name, me["side"], setting, inst["dp_rank"],
                                                                 inst["kv_ports"][1], me["side"],
                                                                 65536 - instances * me["tp_size"]))
    return errors, []
