#!/usr/bin/env -S python3 -S
"""Simulated `hccn_tool` of an Atlas 800 A3 node. Device ids are Phy-IDs 0..npus-1.

  hccn_tool -i N -vnic -g          vnic link status / ipaddr / netmask (vNIC ip from node.json)
  hccn_tool -i N -link -g          link status: UP|DOWN
  hccn_tool -i N -net_health -g    net health status: <state>
  hccn_tool -i N -tls -g           TLS state; exactly one line contains "switch"
  hccn_tool -i N -ip -g            ipaddr:<roce ip> / netmask:<mask>  (RoCE ip 127.32.<node index>.<N+1>)
  hccn_tool -i N -netdetect -g     netdetect address: <ip>
  hccn_tool -i N -gateway -g       gateway addr: <ip>
  hccn_tool -i N -lldp -g          LLDP neighbour TLVs
  hccn_tool -i N -hccs_ping -g address IP [cnt n]   (default 3 packets)

Exit codes:
  0   success
  1   operation failed: hccs_ping lost packets, hccs_ping unsupported on this device,
      invalid device id
  2   usage error (bad syntax, unknown operation, bad IP or count)
  3   simulator setup error (node.json missing/unreadable, faults.json unreadable; stderr)
  13  -ip: no RoCE ip preset ("no ip was preset")

Faults read (docs/SIM-CONTRACT.md): vnic_down, link_down, net_health {"N": state},
tls_switch {"N": 0|1}, no_ip, hccs_ping_unsupported, hccs_ping_fail, unreachable_ips
(list of peer IPs hccs_ping cannot reach; stands for faults on other nodes), delay_ms.
hccs_ping succeeds only if the target is a vNIC ip of some node in node.json, this device
is neither in vnic_down nor in hccs_ping_fail, the target is not in unreachable_ips and, when
the target is a device of this node, that device is not in vnic_down.
"""
import os
import sys

sys.dont_write_bytecode = True
# a3sim_tools.py sits beside the script; in a container where npu-smi is bind-mounted alone it is
# found in the mounted driver directory (beside hccn_tool).
sys.path[:0] = [os.path.dirname(os.path.realpath(__file__)), "/usr/local/lib/a3sim", "/usr/local/Ascend/driver/tools"]
from a3sim_tools import Sim, ToolError, jitter, run, warm  # noqa: E402

USAGE = """Usage: hccn_tool -i <device_id> <operation> -g [args]
operations: -vnic -link -net_health -tls -ip -netdetect -gateway -lldp
            -hccs_ping -g address <ip> [cnt <n>]"""
VNIC_MASK = "255.255.0.0"
ROCE_MASK = "255.255.255.0"
UNSUPPORTED = "This device does not support this function."


def roce_gateway(sim):
    return f"127.32.{sim.index}.254"


def op_vnic(sim, dev, args):
    state = "DOWN" if sim.in_list("vnic_down", dev) else "UP"
    return 0, f"vnic link status: {state}\nvnic ipaddr: {sim.own_vnic_ip(dev)}\nvnic netmask: {VNIC_MASK}"


def op_link(sim, dev, args):
    return 0, "link status: " + ("DOWN" if sim.in_list("link_down", dev) else "UP")


def op_net_health(sim, dev, args):
    return 0, "net health status: " + sim.per_dev("net_health", dev, "Success")


def op_tls(sim, dev, args):
    switch = int(sim.per_dev("tls_switch", dev, 0))
    return 0, "\n".join([
        f"dev_id:{dev}, tls switch[{switch}](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
        "tls alarm time threshold[60]days",
        f"dev_id:{dev}, tls cert num[0], tls crl num[0]",
        f"dev_id:{dev}, tls cert status: no certificate is imported"])


def op_ip(sim, dev, args):
    if sim.in_list("no_ip", dev):
        return 13, "no ip was preset"
    return 0, f"ipaddr:127.32.{sim.index}.{dev + 1}\nnetmask:{ROCE_MASK}"


def op_netdetect(sim, dev, args):
    return 0, f"netdetect address: {roce_gateway(sim)}"


def op_gateway(sim, dev, args):
    return 0, f"gateway addr: {roce_gateway(sim)}"


def op_lldp(sim, dev, args):
    return 0, "\n".join([
        "Chassis ID TLV", f"\tMAC: 4c:f5:5b:a3:{sim.index:02x}:00",
        "Port ID TLV", f"\tIfname: 400GE1/0/{sim.index * sim.npus + dev + 1}",
        "Time to Live TLV", "\t121",
        "System Name TLV", f"\ta3sim-leaf-{sim.index // 2}",
        "Management Address TLV", f"\tIPV4: 127.33.0.{sim.index // 2 + 1}",
        "End Of LLDPDU TLV"])


def is_ipv4(text):
    """Dotted quad, four decimal octets 0-255 without leading zeros (what ipaddress.IPv4Address takes)."""
    parts = text.split(".")
    return len(parts) == 4 and all(p.isdigit() and p.isascii() and int(p) < 256 and (p == "0" or p[0] != "0")
                                   for p in parts)


def ping_args(args):
    keys = args[::2]
    if len(args) % 2 or "address" not in keys or len(set(keys)) != len(keys) or not set(keys) <= {"address", "cnt"}:
        raise ToolError(USAGE, 2)
    opts = dict(zip(keys, args[1::2]))
    try:
        if not is_ipv4(opts["address"]):
            raise ValueError(opts["address"])
        count = int(opts.get("cnt", 3))
    except ValueError:
        raise ToolError(USAGE, 2)
    if not 1 <= count <= 1000:
        raise ToolError(USAGE, 2)
    return opts["address"], count


def op_hccs_ping(sim, dev, args):
    ip, count = ping_args(args)
    if sim.faults.get("hccs_ping_unsupported"):
        return 1, UNSUPPORTED
    target = sim.vnic_ips().get(ip)
    ok = (target is not None and not sim.in_list("vnic_down", dev) and not sim.in_list("hccs_ping_fail", dev)
          and ip not in (sim.faults.get("unreachable_ips") or [])
          and not (target[0] == sim.node.get("name") and sim.in_list("vnic_down", target[1])))
    lines = [f"device {dev} PING {ip}", ""]
    times = [jitter(sim.index, dev, ip, seq, lo=8.0, span=6.0) for seq in range(count)] if ok else []
    for seq in range(count):
        lines += (["This pkt ping success!", f"recv seq {seq}, time = {times[seq]:.3f}us, L1 plane check result = 0x0"]
                  if ok else ["This pkt ping fail!", f"recv seq {seq} timeout, L1 plane check result = 0x1"]) + [""]
    received = len(times)
    loss = 100 * (count - received) / count
    lines.append(f"{count} packets transmitted, {received} received, {loss:.2f}% packets loss")
    if ok:
        ordered = sorted(times)
        tp95 = ordered[max(0, -(-95 * count // 100) - 1)]
        lines += [f"max time {ordered[-1]:.3f}us", f"min time {ordered[0]:.3f}us",
                  f"average time {sum(times) / count:.3f}us", f"TP95 time {tp95:.3f}us"]
    return (0 if ok else 1), "\n".join(lines)


OPS = {name[3:]: fn for name, fn in globals().items() if name.startswith("op_")}


def main(argv):
    if len(argv) < 4 or argv[0] != "-i" or argv[3] != "-g" or argv[2][:1] != "-" or argv[2][1:] not in OPS:
        raise ToolError(USAGE, 2)
    op, args = argv[2][1:], argv[4:]
    if args and op != "hccs_ping":
        raise ToolError(USAGE, 2)
    sim = Sim()
    if not argv[1].isdigit() or int(argv[1]) >= sim.npus:
        raise ToolError(f"Invalid device id: {argv[1]}. Valid device ids: 0-{sim.npus - 1}.", 1)
    sim.delay(op)
    code, text = OPS[op](sim, int(argv[1]), args)
    print(text)
    return code


def warm_queries(sim, ping_count=3):
    """Every query a preflight makes on this node: each device's plain reads, and its hccs_ping (the preflight's
    default packet count) of every vNIC address of the other nodes."""
    plain = [["-i", str(dev), "-" + op, "-g"] for dev in range(sim.npus) for op in OPS if op != "hccs_ping"]
    others = [ip for ip, where in sim.vnic_ips().items() if where[0] != sim.node.get("name")]
    pings = [["-i", str(dev), "-hccs_ping", "-g", "address", ip, "cnt", str(ping_count)]
             for dev in range(sim.npus) for ip in others]
    return plain + pings


if __name__ == "__main__":
    if sys.argv[1:] == ["--a3sim-warm"]:
        print("a3sim: hccn_tool answers stored: %d" % warm("hccn_tool", main, warm_queries(Sim())))
    else:
        run(main)
