"""Host facts the simulated engine checks: NPU device nodes, network
interfaces and their addresses, /etc/hccn.conf, the model directory.

Address rule (documented in README): an IPv4 address counts as configured on
an interface only if it is listed *exactly* among that interface's addresses
(`ip -o -4 addr show dev IF`, or a netlink dump when `ip` is missing). The
implicit 127.0.0.0/8 route on `lo` does not count: on `lo` only 127.0.0.1
(listed as 127.0.0.1/8) and addresses explicitly added (the simulation adds
each node IP as /32) count. The same rule decides whether an address is "local"
for binding the API, DP master and Mooncake ports, so a loopback address
stands for one host.
"""

import ipaddress
import os
import re
import shutil
import socket
import struct
import subprocess

SYS_NET = "/sys/class/net"


def env_path(name, default):
    value = os.environ.get(name)
    return value if value else default


# --------------------------------------------------------------------------- addresses

def _netlink_ipv4_addrs():
    """[(ifname, ip, prefixlen)] via an RTM_GETADDR dump (no iproute2 needed)."""
    RTM_NEWADDR, RTM_GETADDR = 20, 22
    NLM_F_REQUEST, NLM_F_DUMP = 1, 0x300
    NLMSG_ERROR, NLMSG_DONE = 2, 3
    IFA_ADDRESS, IFA_LOCAL = 1, 2
    out = []
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    try:
        s.bind((0, 0))
        req = struct.pack("=LHHLL", 24, RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
        req += struct.pack("=BBBBL", socket.AF_INET, 0, 0, 0, 0)
        s.send(req)
        done = False
        while not done:
            data = s.recv(1 << 16)
            if not data:
                break
            off = 0
            while off + 16 <= len(data):
                length, mtype, _flags, _seq, _pid = struct.unpack_from("=LHHLL", data, off)
                if length < 16:
                    done = True
                    break
                if mtype == NLMSG_DONE:
                    done = True
                    break
                if mtype == NLMSG_ERROR:
                    raise OSError("netlink error")
                if mtype == RTM_NEWADDR:
                    _fam, plen, _fl, _scope, index = struct.unpack_from("=BBBBL", data, off + 16)
                    aoff = off + 24
                    addr = local = None
                    while aoff + 4 <= off + length:
                        rlen, rtype = struct.unpack_from("=HH", data, aoff)
                        if rlen < 4:
                            break
                        payload = data[aoff + 4:aoff + rlen]
                        if rtype == IFA_LOCAL and len(payload) == 4:
                            local = socket.inet_ntoa(payload)
                        elif rtype == IFA_ADDRESS and len(payload) == 4:
                            addr = socket.inet_ntoa(payload)
                        aoff += (rlen + 3) & ~3
                    try:
                        name = socket.if_indextoname(index)
                    except OSError:
                        name = str(index)
                    ip = local or addr
                    if ip:
                        out.append((name, ip, plen))
                off += (length + 3) & ~3
    finally:
        s.close()
    return out


_INET_RE = re.compile(r"\binet (\d+\.\d+\.\d+\.\d+)(?:/(\d+))?")


def interface_addresses(ifname):
    """List of 'ip/prefix' strings configured on ifname (IPv4), [] if none."""
    ip_cmd = shutil.which("ip")
    if ip_cmd:
        try:
            res = subprocess.run([ip_cmd, "-o", "-4", "addr", "show", "dev", ifname],
                                 capture_output=True, text=True, timeout=10, check=False)
            if res.returncode == 0:
                return [f"{m.group(1)}/{m.group(2) or 32}" for m in _INET_RE.finditer(res.stdout)]
            return []
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        return [f"{ip}/{plen}" for name, ip, plen in _netlink_ipv4_addrs() if name == ifname]
    except OSError:
        return []


def all_local_ipv4():
    """Set of IPv4 addresses configured on any interface (exact)."""
    try:
        return {ip for _name, ip, _plen in _netlink_ipv4_addrs()}
    except OSError:
        pass
    addrs = set()
    for ifname in list_interfaces():
        addrs.update(a.split("/")[0] for a in interface_addresses(ifname))
    return addrs


def list_interfaces():
    try:
        return sorted(os.listdir(SYS_NET))
    except OSError:
        return [name for _idx, name in socket.if_nameindex()]


def interface_exists(ifname):
    return bool(ifname) and "/" not in ifname and os.path.exists(os.path.join(SYS_NET, ifname))


def resolve_host(host):
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def is_wildcard(host):
    return host in (None, "", "0.0.0.0", "::", "*")


def is_local_address(host):
    """True if `host` may be bound here (wildcard or configured exactly)."""
    if is_wildcard(host):
        return True
    ip = resolve_host(host)
    try:
        ipaddress.IPv4Address(ip)
    except ValueError:
        return True  # IPv6 or odd names: let bind() decide
    return ip in all_local_ipv4()


def local_ip():
    """The IP vLLM-Ascend advertises (HCCL_IF_IP, else VLLM_HOST_IP, else 127.0.0.1)."""
    return os.environ.get("HCCL_IF_IP") or os.environ.get("VLLM_HOST_IP") or "127.0.0.1"


# --------------------------------------------------------------------------- NPUs

def visible_devices(dev_dir):
    """(requested ids or None, present ids)."""
    present = set()
    try:
        for name in os.listdir(dev_dir):
            m = re.fullmatch(r"davinci(\d+)", name)
            if m:
                present.add(int(m.group(1)))
    except OSError:
        pass
    spec = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if spec is None:
        return None, sorted(present)
    return spec, sorted(present)


def hccn_conf_present():
    return os.path.isfile(env_path("A3SIM_HCCN_CONF", "/etc/hccn.conf"))
