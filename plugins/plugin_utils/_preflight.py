# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight role's host judgments (roles/preflight/tasks/host.yml), as plain functions.

``judge_host(state, settings)`` takes the parsed host read (``parse_sections`` of its output) and the
plain values the checks read (role settings, the node's topology entry, the engine environment) and
returns every problem, every advisory and the versions found, each message starting with the node and
the check (``p0 [host/page_size] ...``). No Ansible imports: the ``preflight_host`` filter and the unit
tests call it alike."""

from __future__ import annotations

import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._host import (
    cann_version, parse_meminfo, parse_sections, parse_stat, port_hits)
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import host_ports, parse_size

# Every setting judge_host reads (the names of the variables the preflight role passes); a missing one is
# an error naming it. The default of the role ships in roles/preflight/defaults or roles/common/defaults.
SETTINGS = (
    "inventory_hostname", "preflight_node", "preflight_engine_env",
    "preflight_page_size", "preflight_memory_check", "preflight_memory_reserve", "hugepages_target", "container_shm_size",
    "preflight_driver_version_file", "preflight_cann_version_file", "preflight_cann_version_fallbacks",
    "preflight_min_hdk", "preflight_min_cann", "preflight_fabric_mem", "preflight_fabric_min_hdk",
    "preflight_fabric_min_cann", "preflight_buffer_pool_advice", "preflight_hccn_conf", "preflight_model_check",
    "vllm_model_path", "preflight_docker_check", "preflight_docker_host", "preflight_python", "preflight_nic_check",
    "preflight_port_check", "preflight_port_owner_names", "preflight_port_owner_cmdlines",
    "preflight_wildcard_addresses", "a3_listen_address",
    "yuanrong_worker_port", "etcd_client_port", "etcd_peer_port", "proxy_port", "proxy_admin_port",
)
NOT_RUN = {"out": "not run", "rc": -1}

# --- the Jinja semantics the checks had, where Python differs ----------------------------------------


def _bool(value):
    """Ansible's bool filter: True, 'yes', 'on', '1', 'true' (any case) and 1 are true."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    return str(value).strip().lower() in ("yes", "on", "1", "true")


def _int(value):
    """Jinja's int filter: the integer, else the integer part of a float, else 0."""
    try:
        return int(str(value).strip(), 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


_LOOSE = re.compile(r"(\d+ | [a-z]+ | \.)", re.VERBOSE)


def _loose(text):
    """The components of LooseVersion (what Ansible's ``version(..., version_type='loose')`` compares)."""
    parts = [x for x in _LOOSE.split(str(text)) if x and x != "."]
    return [int(x) if x.isdigit() else x for x in parts]


def version_below(found, minimum):
    """``found is version(minimum, '<', version_type='loose')``."""
    return _loose(found) < _loose(minimum)


_NUMERIC = re.compile(r"^\d+(\.\d+)*")


def numeric_version(text):
    """The numeric prefix of a version: 8.5.RC1 -> 8.5 (below 8.5.0, as a release candidate is),
    24.1.rc3.7 -> 24.1; '' when it does not start with a digit."""
    match = _NUMERIC.search(str(text or ""))
    return match.group(0) if match else ""


def _section(state, name):
    return state.get(name) or NOT_RUN


# --- ports --------------------------------------------------------------------------------------------

_PORT_VARIABLE = re.compile(r"\(([a-z_<>]+)")


def wanted_ports(node, ports, listen_any):
    """The ports the deployment binds on this node (``_topology.host_ports``, the list validation checks
    for overlaps) as ``port_hits``'s ``[{'first', 'last', 'what', 'any'}]``, in its order.

    ``node``: the node's topology entry (a3_self); ``ports``: yuanrong_worker_port, etcd_client_port,
    etcd_peer_port and proxy_port; ``listen_any``: the services that bind a3_listen_address (vLLM API,
    etcd, proxy) bind every address, so a listener on any address clashes with them."""
    side = node["side"]
    by_api = dict((inst["api_port"], inst) for inst in node["instances"])
    by_kv = dict((tuple(inst["kv_ports"]), inst) for inst in node["instances"])
    wanted = []
    for first, last, what in host_ports("node", {"hosts": {"node": node}}, ports):
        match = _PORT_VARIABLE.search(what)
        variable = match.group(1) if match else ""
        any_address = False
        if variable == "vllm_api_port" and first in by_api:
            what = "vLLM API port of dp rank %s (vllm_api_port)" % by_api[first]["dp_rank"]
            any_address = listen_any
        elif variable == "vllm_%s_kv_port" % side and (first, last) in by_kv:
            what = ("Mooncake kv ports %s-%s of dp rank %s (vllm_%s_kv_port + rank x tp)"
                    % (first, last, by_kv[(first, last)]["dp_rank"], side))
        elif variable == "vllm_dp_rpc_port":
            what = "DP RPC port of the %s group (vllm_dp_rpc_port)" % side
        elif variable == "yuanrong_worker_port":
            what = "openYuanrong worker port (yuanrong_worker_port)"
        elif variable in ("etcd_client_port", "etcd_peer_port", "proxy_port", "proxy_admin_port"):
            any_address = listen_any
        wanted.append({"first": first, "last": last, "what": what, "any": any_address})
    return wanted


_CMDLINE = re.compile(r"^\s*(\d+)\s+(.*)$", re.MULTILINE)


def port_problems(state, settings):
    """``[host/ports]`` problems: a wanted port listened on by a process that is not this deployment's
    (see preflight_port_owner_names / preflight_port_owner_cmdlines in roles/preflight/defaults)."""
    me, node = settings["inventory_hostname"], settings["preflight_node"]
    listeners = state.get("listeners") or {}
    problems = []
    if listeners.get("rc", -1) != 0:
        problems.append("%s [host/ports] ss -Htlnp failed (%s): install iproute2 or set preflight_port_check false"
                        % (me, str(listeners.get("out", "not run")).strip()))
    wildcard = list(settings["preflight_wildcard_addresses"])
    listen_any = settings["a3_listen_address"] in wildcard
    ports = dict((key, settings[key]) for key in ("yuanrong_worker_port", "etcd_client_port", "etcd_peer_port",
                                                  "proxy_port", "proxy_admin_port"))
    hits = port_hits(listeners.get("out", ""), wanted_ports(node, ports, listen_any),
                     [node["business_ip"], "::ffff:%s" % node["business_ip"]] + wildcard)
    cmdlines = dict(_CMDLINE.findall(str((state.get("cmdlines") or {}).get("out", ""))))
    names = list(settings["preflight_port_owner_names"] or [])
    commands = list(settings["preflight_port_owner_cmdlines"] or [])
    for hit in hits:
        foreign = []
        for owner in hit["owners"]:
            name_ok = bool(names) and re.search("|".join(names), owner["name"]) is not None
            cmd = cmdlines.get(owner["pid"], "")
            cmd_ok = (re.match("python", owner["name"]) is not None and bool(commands)
                      and re.search("|".join(commands), cmd) is not None)
            if not (name_ok or cmd_ok):
                foreign.append("%s (pid %s%s)" % (owner["name"], owner["pid"], (": " + cmd[:120]) if cmd else ""))
        if not hit["owners"] or foreign:
            match = _PORT_VARIABLE.search(hit["what"])
            problems.append(
                "%s [host/ports] port %s, the %s, is already listened on at %s by %s, which is not part of this "
                "deployment: stop it (ss -Htlnp 'sport = :%s' shows it) or move %s to a free port"
                % (me, hit["port"], hit["what"], hit["address"],
                   ", ".join(foreign) if hit["owners"] else "a process preflight cannot see (run it as root / with become)",
                   hit["port"], match.group(1) if match else "the port"))
    return problems


# --- the host checks ----------------------------------------------------------------------------------


def _page_problem(me, state, s):
    page = _section(state, "page_size")
    value = str(page["out"]).strip()
    want = s["preflight_page_size"]
    if page["rc"] != 0:
        return ("%s [host/page_size] getconf PAGE_SIZE failed (rc %s: %s): check that getconf (libc-bin) is installed"
                % (me, page["rc"], value))
    if _int(value) == _int(want):
        return ""
    if _int(value) == 65536:
        return ("%s [host/page_size] getconf PAGE_SIZE is 65536 (a 64k-page kernel) but %s is expected: the openYuanrong "
                "datasystem wheel of yuanrong_wheel_url is built for 4k pages (seed step 4 note); get the 64k openYuanrong "
                "package from the openYuanrong support team, point yuanrong_wheel_url (or yuanrong_wheel_src) at it and "
                "set preflight_page_size: 65536" % (me, want))
    return ("%s [host/page_size] getconf PAGE_SIZE is %s, expected %s: the openYuanrong package must match the kernel "
            "page size; use a kernel with %s-byte pages or the matching package and set preflight_page_size"
            % (me, value, want, want))


def _memory_problem(me, state, s):
    if not _bool(s["preflight_memory_check"]):
        return ""
    section = _section(state, "meminfo")
    mem = parse_meminfo(section["out"])
    if section["rc"] != 0 or "MemTotal" not in mem:
        return "%s [host/memory] could not read MemTotal from /proc/meminfo (%s)" % (me, str(section["out"]).strip())
    total = parse_size(mem["MemTotal"])
    target, shm, reserve = s["hugepages_target"], s["container_shm_size"], s["preflight_memory_reserve"]
    need = parse_size(target) + parse_size(shm) + parse_size(reserve)
    if total >= need:
        return ""
    return ("%s [host/memory] MemTotal is %s GiB, but hugepages_target %s + container shm %s%s need %s GiB (seed: 1T "
            "of RAM for 500G + 500g): lower hugepages_target (the shm size and the yuanrong shared memory derive from "
            "it) or add memory"
            % (me, round(total / 1024 ** 3, 1), target, shm,
               (" + preflight_memory_reserve %s" % reserve) if str(reserve) != "0" else "", round(need / 1024 ** 3, 1)))


def _driver_version(lines, path):
    """The Version= value of the driver's version.info among the ``grep -H`` lines ('' when none)."""
    for line in lines:
        if line.startswith("%s:Version=" % path):
            return re.sub(r"^.*?:Version=\s*", "", line).strip()
    return ""


def judge_host(state, settings):
    """Every host judgement of the preflight on one node.

    ``state``: ``parse_sections`` of the host read (``{}`` when it did not run: the caller reports that,
    see ``judge_host_read``). ``settings``: the variables named in ``SETTINGS``.
    Returns ``{'problems': [...], 'advisories': [...], 'versions': {'hdk', 'cann', 'cann_file'}}``; the
    problems in the order the role reported them: ports, page size, memory, HDK, CANN, fabric memory,
    hccn.conf, model, docker, Docker SDK, NIC."""
    missing = [key for key in SETTINGS if key not in settings]
    if missing:
        raise KeyError("preflight host settings lack %s" % ", ".join(missing))
    s = settings
    me, node = s["inventory_hostname"], s["preflight_node"]
    problems = port_problems(state, s) if _bool(s["preflight_port_check"]) else []
    problems.append(_page_problem(me, state, s))
    problems.append(_memory_problem(me, state, s))

    # --- versions (driver: Version=X; CANN: [version, file], see cann_version in _host.py)
    lines = (state.get("versions") or {}).get("lines") or []
    driver_file = s["preflight_driver_version_file"]
    cann_files = [s["preflight_cann_version_file"]] + list(s["preflight_cann_version_fallbacks"] or [])
    hdk = _driver_version(lines, driver_file)
    cann, cann_file = cann_version(lines, cann_files)
    hdk_num, cann_num = numeric_version(hdk), numeric_version(cann)
    min_hdk, min_cann = s["preflight_min_hdk"], s["preflight_min_cann"]
    if not min_hdk:
        pass
    elif not hdk_num:
        problems.append("%s [host/hdk] no driver version found: %s is missing or has no Version= line (%s): install the "
                        "Ascend HDK (driver + firmware) >= %s, or set preflight_driver_version_file to its version.info"
                        % (me, driver_file, hdk or "nothing read", min_hdk))
    elif version_below(hdk_num, min_hdk):
        problems.append("%s [host/hdk] driver (HDK) %s from %s is below preflight_min_hdk %s (the seed requires HDK >= "
                        "25.5.0): upgrade the Ascend driver and firmware" % (me, hdk, driver_file, min_hdk))
    if not min_cann:
        pass
    elif not cann_num:
        problems.append("%s [host/cann] no CANN version found in %s: install CANN >= %s (seed), or set "
                        "preflight_cann_version_file to its version.cfg / ascend_toolkit_install.info, or set "
                        "preflight_min_cann to \"\" when CANN comes only from the container image"
                        % (me, ", ".join(str(f) for f in cann_files), min_cann))
    elif version_below(cann_num, min_cann):
        problems.append("%s [host/cann] CANN %s from %s is below preflight_min_cann %s (the seed requires CANN >= "
                        "8.5.0): upgrade the CANN toolkit" % (me, cann, cann_file, min_cann))
    fabric_hdk, fabric_cann = s["preflight_fabric_min_hdk"], s["preflight_fabric_min_cann"]
    if (_bool(s["preflight_fabric_mem"]) and hdk_num and cann_num
            and (version_below(hdk_num, fabric_hdk) or version_below(cann_num, fabric_cann))):
        problems.append("%s [host/fabric_mem] ASCEND_ENABLE_USE_FABRIC_MEM=1 is requested (preflight_fabric_mem) but "
                        "needs HDK >= %s and CANN >= %s; this node has HDK %s and CANN %s: upgrade both, or remove "
                        "ASCEND_ENABLE_USE_FABRIC_MEM from the vLLM environment"
                        % (me, fabric_hdk, fabric_cann, hdk, cann))
    advisories = []
    if (_bool(s["preflight_buffer_pool_advice"]) and hdk_num and not version_below(hdk_num, "25.5.0")
            and version_below(hdk_num, "26.0.0") and "ASCEND_BUFFER_POOL" not in (s["preflight_engine_env"] or {})):
        advisories.append("%s [host/hdk] HDK %s is in [25.5.0, 26.0.0): the Mooncake docs recommend ASCEND_BUFFER_POOL=4:8 "
                          "on A3 with this driver and the vLLM environment does not set it (add ASCEND_BUFFER_POOL: "
                          "\"4:8\" to vllm_env_common, or set preflight_buffer_pool_advice false)" % (me, hdk))

    # --- files: {path: type} for each path that exists ('empty file' for a regular file of size 0)
    stat = parse_stat((state.get("files") or {}).get("out", ""))
    conf = s["preflight_hccn_conf"]
    if stat.get(conf, "") != "regular file":
        seen = ("is an empty file" if stat.get(conf, "") == "empty file"
                else "is a %s" % stat[conf] if conf in stat else "is missing")
        problems.append("%s [host/hccn.conf] %s %s: the vLLM container mounts it (container_volumes) and without it the "
                        "service starts, looks healthy and returns garbage (vllm-ascend #7711); restore it (it is written "
                        "when the NPU network is configured with hccn_tool -i N -ip -s ...; compare with another node) "
                        "before deploying" % (me, conf, seen))
    model = s["vllm_model_path"]
    config = "%s/config.json" % model
    if not _bool(s["preflight_model_check"]):
        pass
    elif stat.get(model, "") != "directory":
        problems.append("%s [host/model] vllm_model_path %s %s on this node: copy the model weights (GLM-5.1-w8a8) there "
                        "(the container mounts /data), or set vllm_model_path"
                        % (me, model, "is a %s" % stat[model] if model in stat else "does not exist"))
    elif stat.get(config, "") != "regular file":
        problems.append("%s [host/model] %s %s: the model directory is incomplete; copy the full model (config.json, "
                        "tokenizer, *.safetensors) there"
                        % (me, model, "has an empty config.json" if stat.get(config, "") == "empty file"
                           else "has no config.json"))

    # --- docker
    if _bool(s["preflight_docker_check"]):
        docker, sdk = _section(state, "docker"), _section(state, "docker_sdk")
        if docker["rc"] != 0:
            problems.append("%s [host/docker] the docker engine does not answer (docker version: %s). Install docker and "
                            "start it (systemctl enable --now docker)%s"
                            % (me, str(docker["out"]).strip(),
                               "" if s["preflight_docker_host"] else ", or set preflight_docker_host to its address"))
        if sdk["rc"] != 0:
            sdk_lines = sdk.get("lines") or []
            problems.append("%s [host/docker] the Docker SDK for Python is not importable by %s (%s): the container "
                            "role's community.docker modules need it; install python3-docker (or pip install docker) "
                            "for that interpreter"
                            % (me, s["preflight_python"], str(sdk_lines[-1]).strip() if sdk_lines else "no output"))

    # --- NIC: "2: eth0    inet 10.0.0.11/24 brd ..." -> (eth0, 10.0.0.11)
    if _bool(s["preflight_nic_check"]):
        problems.append(_nic_problem(me, node, state))
    return {"problems": [p for p in problems if p], "advisories": advisories,
            "versions": {"hdk": hdk, "cann": cann, "cann_file": cann_file}}


_ADDR = re.compile(r"^\d+:\s+([^\s@:]+)\S*\s+inet6?\s+([^/\s]+)", re.MULTILINE)


def _nic_problem(me, node, state):
    addrs = state.get("addrs") or {}
    if addrs.get("rc", -1) != 0:
        return "%s [host/nic] ip -o addr show failed (%s): install iproute2" % (me, str(addrs.get("out", "not run")).strip())
    pairs = _ADDR.findall(str(addrs.get("out", "")))
    nic, ip = node["nic_name"], node["business_ip"]
    if (nic, ip) in pairs:
        return ""
    on_nic = [address for name, address in pairs if name == nic]
    where = [name for name, address in pairs if address == ip]
    return ("%s [host/nic] the business IP %s (a3_business_ip) is not configured on %s (a3_nic_name): %s %s%s. "
            "HCCL_IF_IP, GLOO/TP/HCCL_SOCKET_IFNAME and the DP group use this pair (seed FAQ): fix a3_business_ip / "
            "a3_nic_name in the inventory or configure the address on the NIC"
            % (me, ip, nic, nic, "has " + ", ".join(on_nic) if on_nic else "has no address or does not exist",
               "; the IP is on " + ", ".join(where) if where else "; no interface has it"))


def judge_host_read(result, settings):
    """``judge_host`` of a registered result of the host read task (``ansible.builtin.raw``): its stdout
    parsed into sections. When no section is there (the read did not run: node down, no shell) the one
    problem says so, instead of every check reporting its own tool as missing; nothing else is judged."""
    result = result or {}
    state = parse_sections(result.get("stdout", ""))
    if state:
        return judge_host(state, settings)
    me = settings["inventory_hostname"]
    why = (str(result.get("stderr") or "").strip() or str(result.get("module_stderr") or "").strip()
           or str(result.get("msg") or "") or "no output").strip()
    return {"problems": ["%s [host] the host read (getconf, /proc/meminfo, version files, stat, ip, ss, docker) did not "
                         "run on this node (%s): every host check needs it; check that the node is up and that Ansible "
                         "can run commands on it (ansible %s -m ansible.builtin.command -a true)" % (me, why, me)],
            "advisories": [], "versions": {"hdk": "", "cann": "", "cann_file": ""}}
