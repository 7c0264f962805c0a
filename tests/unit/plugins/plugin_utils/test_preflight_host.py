# -*- coding: utf-8 -*-
"""plugins/plugin_utils/_preflight.py: the preflight's host judgments (roles/preflight/tasks/host.yml).

Each case is a synthetic host read (the sections of the one raw task) and the role's settings; the
expected messages are the ones the Jinja judgments printed before they moved to Python (compared case by
case through ansible-playbook), and molecule's preflight_faults scenario asserts some of them on the
simulated cluster."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from helpers import ROOT, venv_bin

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._preflight import (
    SETTINGS, judge_host, judge_host_read, numeric_version, version_below, wanted_ports)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._render import engine_env

NODE = {
    "side": "prefill", "index": 0, "business_ip": "10.0.0.11", "nic_name": "eth0", "dp_size": 4, "dp_size_local": 2,
    "dp_rank_start": 0, "dp_address": "10.0.0.11", "dp_rpc_port": 9100, "tp_size": 8, "kv_port": 30000,
    "vllm_start_port": 9000,
    "instances": [
        {"local_rank": 0, "dp_rank": 0, "api_port": 9000, "devices": list(range(8)), "kv_ports": [30000, 30007],
         "lookup_rpc_port": 0},
        {"local_rank": 1, "dp_rank": 1, "api_port": 9001, "devices": list(range(8, 16)), "kv_ports": [30008, 30015],
         "lookup_rpc_port": 1}],
    "ds_worker_addr": "10.0.0.11:18481", "is_etcd_host": True, "is_proxy_host": True,
}
# the second node of the decode side: no dp rank 0 (no DP RPC port), not the etcd or proxy host
NODE_D1 = dict(NODE, side="decode", index=1, business_ip="10.0.0.14", dp_rank_start=2, dp_address="10.0.0.13",
               is_etcd_host=False, is_proxy_host=False,
               instances=[dict(NODE["instances"][0], dp_rank=2, kv_ports=[30016, 30023]),
                          dict(NODE["instances"][1], dp_rank=3, kv_ports=[30024, 30031])])

DRV = "/usr/local/Ascend/driver/version.info"
CFG = "/usr/local/Ascend/ascend-toolkit/latest/version.cfg"
INFO = "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"


def _role_defaults():
    values = {}
    for path in ("roles/common/defaults/main.yml", "roles/preflight/defaults/main.yml", "roles/preflight/vars/main.yml"):
        values.update(yaml.safe_load((ROOT / path).read_text()))
    return values


def settings(**changes):
    """The role's shipped settings (the seed's), with what host.yml templates filled in plainly."""
    shipped = _role_defaults()
    out = dict((key, shipped[key]) for key in SETTINGS if key in shipped and "{{" not in str(shipped[key]))
    out.update(inventory_hostname="p0", preflight_node=NODE, a3_listen_address="0.0.0.0", container_shm_size="500g",
               preflight_python="/usr/bin/python3", preflight_fabric_mem=False,
               preflight_engine_env=engine_env(shipped["vllm_env_common"], shipped["vllm_prefill_env"]),
               preflight_port_owner_cmdlines=["vllm serve", r"vllm\.entrypoints", r"serve /data/GLM\-5\.1\-w8a8",
                                              "launch_online_dp", "load_balance_proxy_server", r"a3_proxy\.py",
                                              "datasystem", "dscli"])
    out.update(changes)
    assert sorted(out) == sorted(SETTINGS)
    return out


GOOD = {
    "page_size": ("4096", 0),
    "meminfo": ("MemTotal:       1584000000 kB\nHugePages_Total:       0\nHugepagesize:       2048 kB", 0),
    "versions": ("%s:Version=25.5.0\n%s:toolkit_installed_version=[8.5.0:8.5.0]" % (DRV, CFG), 0),
    "files": ("regular file:120:/etc/hccn.conf\ndirectory:4096:/data/GLM-5.1-w8a8\n"
              "regular file:3000:/data/GLM-5.1-w8a8/config.json", 0),
    "addrs": ("1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
              "2: eth0    inet 10.0.0.11/24 brd 10.0.0.255 scope global eth0\\       valid_lft forever\n"
              "2: eth0    inet6 fe80::1/64 scope link \\       valid_lft forever", 0),
    "listeners": ('LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=1,fd=3))', 0),
    "cmdlines": ("      1 sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups", 0),
    "docker": ("28.0.1", 0),
    "docker_sdk": ("7.1.0", 0),
}


def read(crlf=False, **changes):
    """A registered result of the host read task: its sections, GOOD with ``changes`` (None drops one)."""
    sections = dict(GOOD)
    for name, value in changes.items():
        if value is None:
            sections.pop(name)
        else:
            sections[name] = value
    text = "".join("@@%s\n%s\n@@rc %d\n" % (name, out, rc) for name, (out, rc) in sections.items())
    return {"stdout": text.replace("\n", "\r\n") if crlf else text, "stderr": "", "rc": 0, "changed": False}


def listeners(*lines):
    return ("\n".join(['LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=1,fd=3))'] + list(lines)), 0)


def cmdlines(*lines):
    return ("\n".join(["      1 sshd: /usr/sbin/sshd -D"] + list(lines)), 0)


def versions(hdk=None, cann=None, info=None, rc=0):
    lines = ([] if hdk is None else ["%s:Version=%s" % (DRV, hdk)]) + \
        ([] if cann is None else ["%s:toolkit_installed_version=[%s:%s]" % (CFG, cann, cann)]) + \
        ([] if info is None else ["%s:version=%s" % (INFO, info)])
    return ("\n".join(lines), rc)


BUFFER_POOL = ('p0 [host/hdk] HDK 25.5.0 is in [25.5.0, 26.0.0): the Mooncake docs recommend ASCEND_BUFFER_POOL=4:8 on A3 '
               'with this driver and the vLLM environment does not set it (add ASCEND_BUFFER_POOL: "4:8" to '
               'vllm_env_common, or set preflight_buffer_pool_advice false)')
HCCN_TAIL = (": the vLLM container mounts it (container_volumes) and without it the service starts, looks healthy and "
             "returns garbage (vllm-ascend #7711); restore it (it is written when the NPU network is configured with "
             "hccn_tool -i N -ip -s ...; compare with another node) before deploying")
MEMORY_TAIL = ("(seed: 1T of RAM for 500G + 500g): lower hugepages_target (the shm size and the yuanrong shared memory "
               "derive from it) or add memory")
NIC_TAIL = (". HCCL_IF_IP, GLOO/TP/HCCL_SOCKET_IFNAME and the DP group use this pair (seed FAQ): fix a3_business_ip / "
            "a3_nic_name in the inventory or configure the address on the NIC")
MODEL_TAIL = ": copy the model weights (GLM-5.1-w8a8) there (the container mounts /data), or set vllm_model_path"
CONFIG_TAIL = ": the model directory is incomplete; copy the full model (config.json, tokenizer, *.safetensors) there"
FABRIC = ("p0 [host/fabric_mem] ASCEND_ENABLE_USE_FABRIC_MEM=1 is requested (preflight_fabric_mem) but needs HDK >= "
          "26.0.0 and CANN >= 9.0.0; this node has HDK %s and CANN %s: upgrade both, or remove "
          "ASCEND_ENABLE_USE_FABRIC_MEM from the vLLM environment")
NO_CANN = ("p0 [host/cann] no CANN version found in /usr/local/Ascend/ascend-toolkit/latest/version.cfg, "
           "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info, "
           "/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_toolkit_install.info, "
           "/usr/local/Ascend/ascend-toolkit/latest/ascend_toolkit_install.info: install CANN >= 8.5.0 (seed), or set "
           "preflight_cann_version_file to its version.cfg / ascend_toolkit_install.info, or set preflight_min_cann to "
           "\"\" when CANN comes only from the container image")
NO_DRIVER = ("p0 [host/hdk] no driver version found: /usr/local/Ascend/driver/version.info is missing or has no Version= "
             "line (%s): install the Ascend HDK (driver + firmware) >= 25.5.0, or set preflight_driver_version_file to "
             "its version.info")
SDK = ("p0 [host/docker] the Docker SDK for Python is not importable by /usr/bin/python3 (%s): the container role's "
       "community.docker modules need it; install python3-docker (or pip install docker) for that interpreter")
DOCKER = ("p0 [host/docker] the docker engine does not answer (docker version: %s). Install docker and start it "
          "(systemctl enable --now docker)%s")
TRACEBACK = ("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
             "ModuleNotFoundError: No module named 'docker'", 1)


def port(number, what, address, by, variable):
    return ("p0 [host/ports] port %s, the %s, is already listened on at %s by %s, which is not part of this deployment: "
            "stop it (ss -Htlnp 'sport = :%s' shows it) or move %s to a free port"
            % (number, what, address, by, number, variable))


INVISIBLE = "a process preflight cannot see (run it as root / with become)"

# (id, host read, setting changes, expected problems); advisories and versions are asserted separately
CASES = [
    ("good", read(), {}, []),
    ("good_crlf", read(crlf=True), {}, []),
    # --- page size
    ("page_64k", read(page_size=("65536", 0)), {}, [
        "p0 [host/page_size] getconf PAGE_SIZE is 65536 (a 64k-page kernel) but 4096 is expected: the openYuanrong "
        "datasystem wheel of yuanrong_wheel_url is built for 4k pages (seed step 4 note); get the 64k openYuanrong package "
        "from the openYuanrong support team, point yuanrong_wheel_url (or yuanrong_wheel_src) at it and set "
        "preflight_page_size: 65536"]),
    ("page_64k_expected", read(page_size=("65536", 0)), {"preflight_page_size": 65536}, []),
    ("page_other", read(page_size=("16384", 0)), {}, [
        "p0 [host/page_size] getconf PAGE_SIZE is 16384, expected 4096: the openYuanrong package must match the kernel "
        "page size; use a kernel with 4096-byte pages or the matching package and set preflight_page_size"]),
    ("page_failed", read(page_size=("sh: 1: getconf: not found", 127)), {}, [
        "p0 [host/page_size] getconf PAGE_SIZE failed (rc 127: sh: 1: getconf: not found): check that getconf "
        "(libc-bin) is installed"]),
    ("page_not_read", read(page_size=None), {}, [
        "p0 [host/page_size] getconf PAGE_SIZE failed (rc -1: not run): check that getconf (libc-bin) is installed"]),
    # --- memory
    ("memory_low", read(meminfo=("MemTotal:       515000000 kB", 0)), {}, [
        "p0 [host/memory] MemTotal is 491.1 GiB, but hugepages_target 500G + container shm 500g need 1000.0 GiB "
        + MEMORY_TAIL]),
    ("memory_low_reserve", read(meminfo=("MemTotal:       1048000000 kB", 0)), {"preflight_memory_reserve": "16G"}, [
        "p0 [host/memory] MemTotal is 999.5 GiB, but hugepages_target 500G + container shm 500g + "
        "preflight_memory_reserve 16G need 1016.0 GiB " + MEMORY_TAIL]),
    ("memory_1t_target", read(), {"hugepages_target": "1T", "container_shm_size": "1024g"}, [
        "p0 [host/memory] MemTotal is 1510.6 GiB, but hugepages_target 1T + container shm 1024g need 2048.0 GiB "
        + MEMORY_TAIL]),
    ("memory_no_memtotal", read(meminfo=("HugePages_Total:       0", 0)), {}, [
        "p0 [host/memory] could not read MemTotal from /proc/meminfo (HugePages_Total:       0)"]),
    ("memory_grep_failed", read(meminfo=("grep: /proc/meminfo: No such file or directory", 2)), {}, [
        "p0 [host/memory] could not read MemTotal from /proc/meminfo (grep: /proc/meminfo: No such file or directory)"]),
    ("memory_check_off", read(meminfo=("", 1)), {"preflight_memory_check": False}, []),
    # --- versions
    ("hdk_below", read(versions=versions("24.1.rc3.7", "8.5.0")), {}, [
        "p0 [host/hdk] driver (HDK) 24.1.rc3.7 from /usr/local/Ascend/driver/version.info is below preflight_min_hdk "
        "25.5.0 (the seed requires HDK >= 25.5.0): upgrade the Ascend driver and firmware"]),
    ("hdk_release_candidate", read(versions=versions("25.5.RC1", "8.5.0")), {}, [
        "p0 [host/hdk] driver (HDK) 25.5.RC1 from /usr/local/Ascend/driver/version.info is below preflight_min_hdk "
        "25.5.0 (the seed requires HDK >= 25.5.0): upgrade the Ascend driver and firmware"]),
    ("no_driver_file", read(versions=versions(cann="8.5.0", rc=2)), {}, [NO_DRIVER % "nothing read"]),
    ("driver_not_a_number", read(versions=versions("unknown", "8.5.0")), {}, [NO_DRIVER % "unknown"]),
    ("hdk_check_off", read(versions=versions(cann="8.5.0", rc=2)), {"preflight_min_hdk": ""}, []),
    ("cann_below", read(versions=versions("25.5.0", "8.3.RC1")), {}, [
        "p0 [host/cann] CANN 8.3.RC1 from /usr/local/Ascend/ascend-toolkit/latest/version.cfg is below preflight_min_cann "
        "8.5.0 (the seed requires CANN >= 8.5.0): upgrade the CANN toolkit"]),
    ("cann_missing", read(versions=versions("25.5.0", rc=2)), {}, [NO_CANN]),
    ("cann_check_off", read(versions=versions("25.5.0", rc=2)), {"preflight_min_cann": ""}, []),
    ("cann_from_fallback", read(versions=versions("25.5.0", info="8.5.1")), {}, []),
    ("versions_not_read", read(versions=None), {}, [NO_DRIVER % "nothing read", NO_CANN]),
    ("fabric_old_hdk_and_cann", read(), {"preflight_fabric_mem": True}, [FABRIC % ("25.5.0", "8.5.0")]),
    ("fabric_old_cann", read(versions=versions("26.0.0", "8.5.0")), {"preflight_fabric_mem": "True"},
     [FABRIC % ("26.0.0", "8.5.0")]),
    ("fabric_new_enough", read(versions=versions("26.0.0", "9.0.0")), {"preflight_fabric_mem": True}, []),
    # --- files
    ("hccn_missing", read(files=("stat: cannot statx '/etc/hccn.conf': No such file or directory\n"
                                 "directory:4096:/data/GLM-5.1-w8a8\nregular file:3000:/data/GLM-5.1-w8a8/config.json", 1)),
     {}, ["p0 [host/hccn.conf] /etc/hccn.conf is missing" + HCCN_TAIL]),
    ("hccn_empty", read(files=("regular empty file:0:/etc/hccn.conf\ndirectory:4096:/data/GLM-5.1-w8a8\n"
                               "regular file:3000:/data/GLM-5.1-w8a8/config.json", 0)),
     {}, ["p0 [host/hccn.conf] /etc/hccn.conf is an empty file" + HCCN_TAIL]),
    ("hccn_directory", read(files=("directory:4096:/etc/hccn.conf\ndirectory:4096:/data/GLM-5.1-w8a8\n"
                                   "regular file:3000:/data/GLM-5.1-w8a8/config.json", 0)),
     {}, ["p0 [host/hccn.conf] /etc/hccn.conf is a directory" + HCCN_TAIL]),
    ("model_missing", read(files=("regular file:120:/etc/hccn.conf\nstat: cannot statx '/data/GLM-5.1-w8a8': No such "
                                  "file", 1)),
     {}, ["p0 [host/model] vllm_model_path /data/GLM-5.1-w8a8 does not exist on this node" + MODEL_TAIL]),
    ("model_is_a_file", read(files=("regular file:120:/etc/hccn.conf\nregular file:10:/data/GLM-5.1-w8a8", 1)),
     {}, ["p0 [host/model] vllm_model_path /data/GLM-5.1-w8a8 is a regular file on this node" + MODEL_TAIL]),
    ("model_no_config", read(files=("regular file:120:/etc/hccn.conf\ndirectory:4096:/data/GLM-5.1-w8a8", 1)),
     {}, ["p0 [host/model] /data/GLM-5.1-w8a8 has no config.json" + CONFIG_TAIL]),
    ("model_empty_config", read(files=("regular file:120:/etc/hccn.conf\ndirectory:4096:/data/GLM-5.1-w8a8\n"
                                       "regular empty file:0:/data/GLM-5.1-w8a8/config.json", 0)),
     {}, ["p0 [host/model] /data/GLM-5.1-w8a8 has an empty config.json" + CONFIG_TAIL]),
    ("model_check_off", read(files=("regular file:120:/etc/hccn.conf", 1)), {"preflight_model_check": False}, []),
    ("files_not_read", read(files=None), {}, [
        "p0 [host/hccn.conf] /etc/hccn.conf is missing" + HCCN_TAIL,
        "p0 [host/model] vllm_model_path /data/GLM-5.1-w8a8 does not exist on this node" + MODEL_TAIL]),
    # --- NIC
    ("nic_ip_elsewhere", read(addrs=("2: eth0    inet 10.0.0.99/24 brd x scope global eth0\n"
                                     "3: bond0    inet 10.0.0.11/24 brd x scope global bond0\n"
                                     "3: bond0    inet 10.0.0.12/24 brd x scope global secondary bond0", 0)), {}, [
        "p0 [host/nic] the business IP 10.0.0.11 (a3_business_ip) is not configured on eth0 (a3_nic_name): eth0 has "
        "10.0.0.99; the IP is on bond0" + NIC_TAIL]),
    ("nic_address_missing", read(addrs=("1: lo    inet 127.0.0.1/8 scope host lo", 0)), {}, [
        "p0 [host/nic] the business IP 10.0.0.11 (a3_business_ip) is not configured on eth0 (a3_nic_name): eth0 has no "
        "address or does not exist; no interface has it" + NIC_TAIL]),
    ("nic_vlan_name", read(addrs=("5: eth0@if9    inet 10.0.0.11/24 brd x scope global eth0", 0)), {}, []),
    ("nic_ip_failed", read(addrs=("sh: 1: ip: not found", 127)), {}, [
        "p0 [host/nic] ip -o addr show failed (sh: 1: ip: not found): install iproute2"]),
    ("nic_not_read", read(addrs=None), {}, ["p0 [host/nic] ip -o addr show failed (not run): install iproute2"]),
    ("nic_check_off", read(addrs=("", 127)), {"preflight_nic_check": False}, []),
    # --- docker
    ("docker_missing", read(docker=("sh: 1: docker: not found", 127), docker_sdk=TRACEBACK), {}, [
        DOCKER % ("sh: 1: docker: not found", ", or set preflight_docker_host to its address"),
        SDK % "ModuleNotFoundError: No module named 'docker'"]),
    ("docker_down_with_host", read(docker=("Cannot connect to the Docker daemon at tcp://1.2.3.4:2375.", 1)),
     {"preflight_docker_host": "tcp://1.2.3.4:2375"}, [DOCKER % ("Cannot connect to the Docker daemon at tcp://1.2.3.4:2375.", "")]),
    ("docker_sdk_missing", read(docker_sdk=TRACEBACK), {}, [SDK % "ModuleNotFoundError: No module named 'docker'"]),
    ("docker_sdk_no_output", read(docker_sdk=("", 1)), {}, [SDK % "no output"]),
    ("docker_not_read", read(docker=None, docker_sdk=None), {}, [
        DOCKER % ("not run", ", or set preflight_docker_host to its address"), SDK % "no output"]),
    ("docker_check_off", read(docker=None, docker_sdk=None), {"preflight_docker_check": False}, []),
    # --- ports
    ("port_foreign_owner", read(
        listeners=listeners('LISTEN 0 5 10.0.0.11:18481 0.0.0.0:* users:(("python3",pid=4242,fd=3))',
                            'LISTEN 0 5 127.0.0.1:9000 0.0.0.0:* users:(("nginx",pid=77,fd=6),("nginx",pid=78,fd=6))',
                            'LISTEN 0 5 [::]:30003 [::]:* users:(("redis-server",pid=90,fd=6))',
                            'LISTEN 0 5 127.0.0.1:30004 0.0.0.0:* users:(("redis-server",pid=91,fd=6))'),
        cmdlines=cmdlines("   4242 python3 -c import socket, time; s = socket.socket(); s.bind(('10.0.0.11', 18481)); "
                          "s.listen(); time.sleep(300) not-ours and a long tail that goes past one hundred and twenty "
                          "characters for sure", "     77 nginx: master process",
                          "     90 /usr/bin/redis-server *:30003")), {}, [
        port(9000, "vLLM API port of dp rank 0 (vllm_api_port)", "127.0.0.1",
             "nginx (pid 77: nginx: master process), nginx (pid 78)", "vllm_api_port"),
        port(30003, "Mooncake kv ports 30000-30007 of dp rank 0 (vllm_prefill_kv_port + rank x tp)", "::",
             "redis-server (pid 90: /usr/bin/redis-server *:30003)", "vllm_prefill_kv_port"),
        port(18481, "openYuanrong worker port (yuanrong_worker_port)", "10.0.0.11",
             "python3 (pid 4242: python3 -c import socket, time; s = socket.socket(); s.bind(('10.0.0.11', 18481)); "
             "s.listen(); time.sleep(300) not-ours )", "yuanrong_worker_port")]),
    ("port_own_owners", read(
        listeners=listeners('LISTEN 0 5 10.0.0.11:18481 0.0.0.0:* users:(("python3",pid=4242,fd=3))',
                            'LISTEN 0 5 10.0.0.11:2379 0.0.0.0:* users:(("etcd",pid=55,fd=7))',
                            'LISTEN 0 5 0.0.0.0:9000 0.0.0.0:* users:(("vllm",pid=60,fd=7))',
                            'LISTEN 0 5 0.0.0.0:8088 0.0.0.0:* users:(("python3",pid=61,fd=7))',
                            'LISTEN 0 5 [::ffff:10.0.0.11]:9100 *:* users:(("VLLM::EngineCor",pid=62,fd=7))'),
        cmdlines=cmdlines("   4242 python3 -c import socket, time; time.sleep(300) datasystem_worker",
                          "     61 python3 /opt/a3_proxy.py --port 8088")), {}, []),
    ("port_model_cmdline", read(
        listeners=listeners('LISTEN 0 5 0.0.0.0:9001 0.0.0.0:* users:(("python3.11",pid=70,fd=7))'),
        cmdlines=cmdlines("     70 /usr/bin/python3.11 /usr/local/bin/vllm-wrapper serve /data/GLM-5.1-w8a8 --port 9001")),
     {}, []),
    ("port_owner_not_visible", read(listeners=listeners("LISTEN 0 5 10.0.0.11:30000 0.0.0.0:*",
                                                        "LISTEN 0 5 0.0.0.0:2380 0.0.0.0:*")), {}, [
        port(30000, "Mooncake kv ports 30000-30007 of dp rank 0 (vllm_prefill_kv_port + rank x tp)", "10.0.0.11",
             INVISIBLE, "vllm_prefill_kv_port"),
        port(2380, "etcd peer port (etcd_peer_port)", "0.0.0.0", INVISIBLE, "etcd_peer_port")]),
    ("port_one_foreign_owner_of_two", read(
        listeners=listeners('LISTEN 0 5 0.0.0.0:8088 0.0.0.0:* users:(("vllm",pid=60,fd=7),("bash",pid=99,fd=7))')), {}, [
        port(8088, "proxy port (proxy_port)", "0.0.0.0", "bash (pid 99)", "proxy_port")]),
    ("port_listen_on_business_ip", read(
        listeners=listeners('LISTEN 0 5 127.0.0.1:9000 0.0.0.0:* users:(("nginx",pid=77,fd=6))',
                            'LISTEN 0 5 10.0.0.11:8088 0.0.0.0:* users:(("nginx",pid=77,fd=6))')),
     {"a3_listen_address": "10.0.0.11"}, [port(8088, "proxy port (proxy_port)", "10.0.0.11", "nginx (pid 77)", "proxy_port")]),
    ("port_no_rank0_no_etcd", read(
        addrs=("2: eth0    inet 10.0.0.14/24 brd 10.0.0.255 scope global eth0", 0),
        listeners=listeners('LISTEN 0 5 0.0.0.0:9100 0.0.0.0:* users:(("nc",pid=5,fd=3))',
                            'LISTEN 0 5 0.0.0.0:2379 0.0.0.0:* users:(("nc",pid=6,fd=3))',
                            'LISTEN 0 5 10.0.0.14:30020 0.0.0.0:* users:(("nc",pid=7,fd=3))')), {"preflight_node": NODE_D1}, [
        port(30020, "Mooncake kv ports 30016-30023 of dp rank 2 (vllm_decode_kv_port + rank x tp)", "10.0.0.14",
             "nc (pid 7)", "vllm_decode_kv_port")]),
    ("port_no_owner_patterns", read(
        listeners=listeners('LISTEN 0 5 10.0.0.11:18481 0.0.0.0:* users:(("etcd",pid=3,fd=3))')),
     {"preflight_port_owner_names": [], "preflight_port_owner_cmdlines": []}, [
        port(18481, "openYuanrong worker port (yuanrong_worker_port)", "10.0.0.11", "etcd (pid 3)", "yuanrong_worker_port")]),
    ("ss_failed", read(listeners=("sh: 1: ss: not found", 127), cmdlines=("", 0)), {}, [
        "p0 [host/ports] ss -Htlnp failed (sh: 1: ss: not found): install iproute2 or set preflight_port_check false"]),
    ("ss_not_read", read(listeners=None, cmdlines=None), {}, [
        "p0 [host/ports] ss -Htlnp failed (not run): install iproute2 or set preflight_port_check false"]),
    ("port_check_off", read(listeners=listeners("LISTEN 0 5 10.0.0.11:18481 0.0.0.0:*")), {"preflight_port_check": False},
     []),
]


@pytest.mark.parametrize("result,changes,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_host_judgement(result, changes, expected):
    assert judge_host_read(result, settings(**changes))["problems"] == expected


def test_every_problem_at_once_in_the_role_order():
    result = read(page_size=("65536", 0), meminfo=("MemTotal: 1000 kB", 0), versions=("", 2), files=("", 1),
                  addrs=("", 0), listeners=('LISTEN 0 5 *:8088 *:* users:(("x",pid=1,fd=1))', 0), cmdlines=("", 0),
                  docker=("no", 1), docker_sdk=("no", 1))
    got = judge_host_read(result, settings())["problems"]
    assert [p.split("]")[0] + "]" for p in got] == [
        "p0 [host/ports]", "p0 [host/page_size]", "p0 [host/memory]", "p0 [host/hdk]", "p0 [host/cann]",
        "p0 [host/hccn.conf]", "p0 [host/model]", "p0 [host/docker]", "p0 [host/docker]", "p0 [host/nic]"]
    assert got[2] == ("p0 [host/memory] MemTotal is 0.0 GiB, but hugepages_target 500G + container shm 500g need "
                      "1000.0 GiB " + MEMORY_TAIL)


NOT_RUN = ("p0 [host] the host read (getconf, /proc/meminfo, version files, stat, ip, ss, docker) did not run on this "
           "node (%s): every host check needs it; check that the node is up and that Ansible can run commands on it "
           "(ansible p0 -m ansible.builtin.command -a true)")


@pytest.mark.parametrize("result,why", [
    ({"stdout": "", "stderr": "Error response from daemon: Container abc is not running\n", "rc": 1},
     "Error response from daemon: Container abc is not running"),
    ({"module_stderr": "  ssh: connect to host p0 port 22: No route\n", "msg": "MODULE FAILURE", "rc": 255},
     "ssh: connect to host p0 port 22: No route"),
    ({"msg": "Failed to connect to the host via ssh", "unreachable": True}, "Failed to connect to the host via ssh"),
    ({"stdout": "sh: 1: syntax error\n", "stderr": "  ", "rc": 2}, "no output"),
    ({"skipped": True, "changed": False}, "no output"),
    (None, "no output"),
], ids=["stderr", "module_stderr", "msg", "no_section", "skipped", "undefined"])
def test_the_read_did_not_run(result, why):
    """One problem instead of every check reporting its tool as missing. (The Jinja version had a line
    break after "every host check", an artefact of YAML folding; the message is one line now.)"""
    assert judge_host_read(result, settings()) == {"problems": [NOT_RUN % why], "advisories": [],
                                                   "versions": {"hdk": "", "cann": "", "cann_file": ""}}


def test_versions_found():
    assert judge_host_read(read(), settings())["versions"] == {"hdk": "25.5.0", "cann": "8.5.0", "cann_file": CFG}
    got = judge_host_read(read(versions=versions("25.5.0", info="8.5.1")), settings())["versions"]
    assert got == {"hdk": "25.5.0", "cann": "8.5.1", "cann_file": INFO}
    assert judge_host_read(read(versions=None), settings())["versions"] == {"hdk": "", "cann": "", "cann_file": ""}


@pytest.mark.parametrize("result,changes,advice", [
    (read(), {}, [BUFFER_POOL]),
    (read(versions=versions("26.0.0", "9.0.0")), {}, []),
    (read(versions=versions("25.3.0", "8.5.0")), {}, []),
    (read(), {"preflight_buffer_pool_advice": False}, []),
    (read(), {"preflight_engine_env": {"ASCEND_BUFFER_POOL": "4:8"}}, []),
], ids=["hdk_25_5", "hdk_26", "hdk_below_25_5", "advice_off", "set"])
def test_buffer_pool_advice(result, changes, advice):
    assert judge_host_read(result, settings(**changes))["advisories"] == advice


def test_a_flag_set_only_in_vllm_env_extra_counts():
    """The drift the port fixed: preflight merged vllm_env_common and vllm_<side>_env itself and ignored
    vllm_env_extra. Both now read engine_env, which the vllm role's vllm_side_env is."""
    shipped = _role_defaults()
    env = engine_env(shipped["vllm_env_common"], shipped["vllm_prefill_env"], {"ASCEND_BUFFER_POOL": "4:8"})
    assert judge_host_read(read(), settings(preflight_engine_env=env))["advisories"] == []


def test_settings_are_all_required():
    with pytest.raises(KeyError, match="preflight_python"):
        judge_host({"page_size": {"out": "4096", "lines": ["4096"], "rc": 0}},
                   dict((k, v) for k, v in settings().items() if k != "preflight_python"))


def test_wanted_ports_are_the_ports_validation_checks():
    """_topology.host_ports (validation's overlap check) gives the ranges; preflight adds its wording and
    whether a listener on any address clashes (the services that bind a3_listen_address 0.0.0.0)."""
    ports = {"yuanrong_worker_port": 18481, "etcd_client_port": 2379, "etcd_peer_port": 2380, "proxy_port": 8088,
             "proxy_admin_port": 8089}
    assert wanted_ports(NODE, ports, True) == [
        {"first": 9000, "last": 9000, "any": True, "what": "vLLM API port of dp rank 0 (vllm_api_port)"},
        {"first": 30000, "last": 30007, "any": False,
         "what": "Mooncake kv ports 30000-30007 of dp rank 0 (vllm_prefill_kv_port + rank x tp)"},
        {"first": 9001, "last": 9001, "any": True, "what": "vLLM API port of dp rank 1 (vllm_api_port)"},
        {"first": 30008, "last": 30015, "any": False,
         "what": "Mooncake kv ports 30008-30015 of dp rank 1 (vllm_prefill_kv_port + rank x tp)"},
        {"first": 9100, "last": 9100, "any": False, "what": "DP RPC port of the prefill group (vllm_dp_rpc_port)"},
        {"first": 18481, "last": 18481, "any": False, "what": "openYuanrong worker port (yuanrong_worker_port)"},
        {"first": 2379, "last": 2379, "any": True, "what": "etcd client port (etcd_client_port)"},
        {"first": 2380, "last": 2380, "any": True, "what": "etcd peer port (etcd_peer_port)"},
        {"first": 8088, "last": 8088, "any": True, "what": "proxy port (proxy_port)"},
        {"first": 8089, "last": 8089, "any": True, "what": "proxy admin port (proxy_admin_port)"}]
    assert [w["first"] for w in wanted_ports(NODE_D1, ports, False)] == [9000, 30016, 9001, 30024, 18481]
    assert not any(w["any"] for w in wanted_ports(NODE, ports, False))


def test_versions_compare_as_ansible_loose_versions():
    assert numeric_version("8.5.RC1") == "8.5" and numeric_version("24.1.rc3.7") == "24.1"
    assert numeric_version("unknown") == "" and numeric_version("") == ""
    assert version_below("8.5", "8.5.0") and not version_below("8.5.0", "8.5.0") and version_below("9", "10.0")
    assert not version_below("26.0.0", "26.0.0") and version_below("25.10", "26")


# --- the role wiring: roles/preflight/tasks/host.yml with the role's own defaults and vars --------------------

PLAY = """
- name: The host judgement of roles/preflight with a synthetic host read
  hosts: all
  gather_facts: false
  vars_files: [%(root)s/roles/common/defaults/main.yml, %(root)s/roles/preflight/defaults/main.yml,
               %(root)s/roles/preflight/vars/main.yml]
  vars:
    preflight_node: "{{ a3_self }}"
    preflight_problems: []
    preflight_advisories: []
  tasks:
    - name: The role's host checks
      ansible.builtin.import_tasks: %(root)s/roles/preflight/tasks/host.yml
    - name: Write what they found
      ansible.builtin.copy:
        dest: "{{ out_file }}"
        content: "{{ {'problems': preflight_problems, 'advisories': preflight_advisories,
                      'fabric_mem': preflight_fabric_mem} | to_json }}"
        mode: "0600"
"""


@pytest.mark.parametrize("env_vars,fabric", [
    ({}, False),
    ({"vllm_env_extra": {"ASCEND_ENABLE_USE_FABRIC_MEM": "1"}}, True),
    ({"vllm_prefill_env": {"ASCEND_ENABLE_USE_FABRIC_MEM": 1}}, True),
    ({"vllm_decode_env": {"ASCEND_ENABLE_USE_FABRIC_MEM": "1"}}, False),
], ids=["seed", "extra", "side", "other_side"])
def test_the_role_reads_the_engine_environment_the_vllm_role_runs(tmp_path, env_vars, fabric):
    """ASCEND_ENABLE_USE_FABRIC_MEM: "1" set only through vllm_env_extra triggers the fabric version check
    (the role's preflight_fabric_mem default reads preflight_engine_env, built by engine_env like
    vllm_side_env). The host read task itself is skipped (--start-at-task): the synthetic one stands in."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY % {"root": ROOT})
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps(dict(env_vars, a3_self=NODE, preflight_host_raw=read(), out_file=str(tmp_path / "out.json"),
                                     ansible_python_interpreter="/usr/bin/python3")))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".venv" / "collections"),
               ANSIBLE_LOCALHOST_WARNING="0")
    proc = subprocess.run([venv_bin("ansible-playbook"), "-i", "p0,", "-c", "local", str(playbook), "-e", "@%s" % extra,
                           "--start-at-task", "Judge the host state"], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = json.loads((tmp_path / "out.json").read_text())
    assert found["fabric_mem"] is fabric
    assert found["problems"] == ([FABRIC % ("25.5.0", "8.5.0")] if fabric else [])
    assert found["advisories"] == [BUFFER_POOL]
