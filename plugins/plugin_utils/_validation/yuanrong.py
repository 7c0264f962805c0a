# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the yuanrong role's values: what the openYuanrong datasystem worker accepts, the wheel to install,
the worker flags the role sets itself, and CURVE, which the engines cannot follow yet."""
from __future__ import annotations

import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import (
    ABSENT, as_bool, as_int, check_flag_dict, pep440, reads)

# Worker flags yuanrong_argv sets from yuanrong_* variables (yuanrong_worker_flags may not repeat them).
WORKER_FLAGS = {"worker_address": "yuanrong_worker_port", "etcd_address": "yuanrong_etcd_address",
                "shared_memory_size_mb": "yuanrong_shared_memory_size_mb",
                "node_timeout_s": "yuanrong_node_timeout_s", "node_dead_timeout_s": "yuanrong_node_dead_timeout_s",
                "arena_per_tenant": "yuanrong_arena_per_tenant", "enable_huge_tlb": "yuanrong_enable_huge_tlb",
                "liveness_check_path": "yuanrong_liveness_path", "enable_etcd_auth": "etcd_tls",
                "etcd_ca": "etcd_tls", "etcd_cert": "etcd_tls", "etcd_key": "etcd_tls",
                "etcd_target_name_override": "etcd_tls_cluster_name",
                "enable_curve_zmq": "yuanrong_curve_zmq", "curve_key_dir": "yuanrong_curve_zmq"}
WHEELS = (("url", "yuanrong_wheel_url", "https://.../openyuanrong_datasystem-0.7.6rc1-cp311-cp311-manylinux_2_35_"
           "aarch64.whl"),
          ("file", "yuanrong_wheel_src", "/path/on/the/controller/openyuanrong_datasystem-0.8.1-cp311-cp311-"
           "manylinux_2_34_x86_64.whl"))


@reads("yuanrong_node_timeout_s", "yuanrong_node_dead_timeout_s")
def check_timeouts(h, ctx):
    node, dead = as_int(h.get("yuanrong_node_timeout_s")), as_int(h.get("yuanrong_node_dead_timeout_s"))
    if node is not None and dead is not None and node >= 1 and dead <= node:
        # The datasystem worker refuses to start: "node_dead_timeout_s must be greater than node_timeout_s".
        h.error("yuanrong_node_dead_timeout_s", h.get("yuanrong_node_dead_timeout_s"), "the datasystem worker "
                "refuses to start unless it is greater than yuanrong_node_timeout_s (%d): set a larger value "
                "(seed: 20 and 30)" % node)
    if node == 1:
        h.warn("yuanrong_node_timeout_s", 1, "the worker's etcd heartbeat is 1000 ms and must stay below "
               "node_timeout_s x 1000: set 2 or more (seed: 20)")


def _wheel_version(path):
    parts = str(path).rsplit("/", 1)[-1].split("-")
    return parts[1] if len(parts) >= 5 and str(path).endswith(".whl") else None


@reads("yuanrong_install_from", "yuanrong_package_version", "yuanrong_wheel_url", "yuanrong_wheel_src",
       choices={"yuanrong_install_from": ("url", "file")})
def check_wheel(h, ctx):
    source, version = h.get("yuanrong_install_from"), h.get("yuanrong_package_version")
    # The role compares the installed package's version (its normalized PEP 440 text, as pip installed it) with
    # yuanrong_package_version's text: any other spelling of the same version reinstalls on every run.
    if isinstance(version, str) and pep440(version) not in (None, version):
        h.warn("yuanrong_package_version", version, "pip reads it as version %s, and the installed package reports "
               "that text, which the role compares with this one: it would reinstall on every run; set %s"
               % (pep440(version), pep440(version)))
    for mode, key, example in WHEELS:
        wheel = h.get(key)
        if source != mode or wheel is ABSENT:
            continue
        ok = isinstance(wheel, str) and wheel.endswith(".whl") and (mode == "file" or re.match(r"^https?://", wheel))
        if not ok:
            h.error(key, wheel, "yuanrong_install_from is %s: set the wheel's %s, e.g. %s"
                    % (mode, "URL" if mode == "url" else "path", example))
        elif isinstance(version, str) and _wheel_version(wheel) \
                and (pep440(_wheel_version(wheel)) or _wheel_version(wheel)) != (pep440(version) or version):
            h.warn(key, wheel, "the wheel is version %s but yuanrong_package_version is %s: the role compares the "
                   "installed version with the latter and reinstalls on every run; set them to the same version"
                   % (_wheel_version(wheel), version))


@reads("yuanrong_worker_flags")
def check_worker_flags(h, ctx):
    check_flag_dict(h, "yuanrong_worker_flags", "the worker", "rpc_thread_num: 32", True,
                    lambda flag: "the role sets --%s itself: set %s instead" % (flag, WORKER_FLAGS[flag])
                    if flag in WORKER_FLAGS else None)


@reads("yuanrong_curve_zmq")
def check_curve(h, ctx):
    if as_bool(h.get("yuanrong_curve_zmq")):
        h.error("yuanrong_curve_zmq", True, "the workers would refuse the engines: vllm-ascend's yuanrong backend "
                "connects without the CURVE client keys, which the vllm role does not pass yet (the KV pool would break "
                "silently): set false and keep the worker port on the business network (README 'Security')")
