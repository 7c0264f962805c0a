"""Tests of the simulated Ascend tools sim/tools/npu-smi and sim/tools/hccn_tool.

The tools run as subprocesses (the sh front end sim/tools/hccn_tool, also called as npu-smi, and the
Python implementation it starts) against temporary node.json / faults.json files (env A3SIM_NODE_FILE /
A3SIM_FAULTS_FILE) with a cache directory of the test's own (A3SIM_CACHE_DIR). Outputs are compared
with the real command output samples in tests/fixtures (provenance in tests/fixtures/PROVENANCE.md).
"""
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "sim" / "tools"
FIXTURES = REPO / "tests" / "fixtures"
NODES = ["p0", "p1", "d0", "d1"]
ME = "p1"  # the simulated node of most tests: index 1
PEER_IP = "127.31.2.5"  # d0, device 4


def fixture(name):
    return (FIXTURES / name).read_text()


def node_json(name=ME, npus=16):
    return {"name": name, "index": NODES.index(name), "business_ip": f"127.30.0.{11 + NODES.index(name)}",
            "npus": npus,
            "vnic_ips": {n: [f"127.31.{i}.{d + 1}" for d in range(npus)] for i, n in enumerate(NODES)}}


@pytest.fixture
def sim(tmp_path):
    """sim(tool, *args, faults=None, node=node_json()) -> CompletedProcess."""
    def run(tool, *args, faults=None, node=None, faults_text=None, timeout=30, env_extra=None):
        node_file, faults_file = tmp_path / "node.json", tmp_path / "faults.json"
        node_file.write_text(json.dumps(node or node_json()))
        faults_file.unlink(missing_ok=True)
        if faults is not None or faults_text is not None:
            faults_file.write_text(faults_text if faults_text is not None else json.dumps(faults))
        env = dict(os.environ, A3SIM_NODE_FILE=str(node_file), A3SIM_FAULTS_FILE=str(faults_file),
                   A3SIM_CACHE_DIR=str(tmp_path / "cache"), **(env_extra or {}))
        return subprocess.run([str(TOOLS / tool), *map(str, args)], capture_output=True, text=True,
                              env=env, timeout=timeout, check=False)
    return run


def ok(proc):
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


def diff(a, b):
    """{line index: (old, new)} of two outputs that must have the same number of lines."""
    a, b = a.splitlines(), b.splitlines()
    assert len(a) == len(b)
    return {i: (x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y}


# ---------------------------------------------------------------- npu-smi info

def chip_row(out, phy, second=False):
    """Index of the first (or second) table row of chip `phy`."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines[:-1])
                 if re.match(rf"\| {phy % 2} +{phy} +\| 0000:", lines[i + 1]))
    return first + 1 if second else first


def test_npu_smi_idle_matches_fixture_except_version(sim):
    want = fixture("npu-smi_info_a3_idle.txt").splitlines()
    got = ok(sim("npu-smi", "info")).splitlines()
    assert [len(x) for x in got] == [len(x) for x in want]
    assert [x for x in got if x.startswith("+")] == [x for x in want if x.startswith("+")]
    assert {i for i, (x, y) in enumerate(zip(got, want)) if x != y} == {1}
    assert re.fullmatch(r"\| npu-smi 25\.5\.0 +Version: 25\.5\.0 +\|", got[1])


def test_npu_smi_idle_structure(sim):
    out = ok(sim("npu-smi", "info"))
    health = re.findall(r"^\| (\d+) +Ascend910 +\| (\S+) +\|", out, re.M)
    assert health == [(str(phy // 2), "OK") for phy in range(16)]
    chips = re.findall(r"^\| ([01]) +(\d+) +\| 0000:[0-9A-F]{2}:00\.0  \|.* (\d+) */ 65536 +\|$", out, re.M)
    assert [(c, p) for c, p, _unused in chips] == [(str(p % 2), str(p)) for p in range(16)]
    assert all(3000 <= int(used) <= 3500 for _unused, _unused, used in chips)
    assert re.findall(r"No running processes found in NPU (\d+)", out) == [str(c) for c in range(8)]
    lines = out.splitlines()
    for phy in range(16):  # "-" bar after a card's chip 0, "=" bar after its chip 1
        assert lines[chip_row(out, phy, second=True) + 1][1] == ("=" if phy % 2 else "-")


def test_npu_smi_unhealthy_chip_defaults_to_alarm(sim):
    base = ok(sim("npu-smi", "info"))
    out = ok(sim("npu-smi", "info", faults={"unhealthy_chips": [3]}))
    changes = diff(base, out)
    assert list(changes) == [chip_row(base, 3)]
    old, new = changes[chip_row(base, 3)]
    assert new == old.replace("| OK            |", "| Alarm         |")


def test_npu_smi_chip_health_value(sim):
    base = ok(sim("npu-smi", "info"))
    out = ok(sim("npu-smi", "info", faults={"unhealthy_chips": [3, 10],
                                            "chip_health": {"3": "Warning", "5": "Warning"}}))
    changes = diff(base, out)
    assert set(changes) == {chip_row(base, 3), chip_row(base, 10)}
    assert "| Warning       |" in changes[chip_row(base, 3)][1]
    assert "| Alarm         |" in changes[chip_row(base, 10)][1]


def test_npu_smi_hbm_used(sim):
    base = ok(sim("npu-smi", "info"))
    out = ok(sim("npu-smi", "info", faults={"hbm_used_mb": {"0": 40000, "15": 65000}}))
    changes = diff(base, out)
    assert set(changes) == {chip_row(base, 0, True), chip_row(base, 15, True)}
    assert changes[chip_row(base, 0, True)][1].endswith(" 40000/ 65536         |")
    assert changes[chip_row(base, 15, True)][1].endswith(" 65000/ 65536         |")
    assert all(len(new) == 98 for _unused, new in changes.values())


def test_npu_smi_processes(sim):
    base = ok(sim("npu-smi", "info"))
    procs = [{"npu": 0, "chip": 0, "pid": 1234, "name": "python3", "mem_mb": 30000},
             {"npu": 6, "chip": 1, "pid": 77, "name": "vllm", "mem_mb": 2000},
             {"npu": 6, "chip": 0, "pid": 76, "name": "vllm", "mem_mb": 1000}]
    out = ok(sim("npu-smi", "info", faults={"processes": procs}))
    b, o = base.splitlines(), out.splitlines()
    assert len(o) == len(b) + 1  # NPU 6 has two rows instead of one
    assert "| 0       0                 | 1234          | python3                  | 30000                   |" in o
    i = o.index("| 6       0                 | 76            | vllm                     | 1000                    |")
    assert o[i + 1] == ("| 6       1                 | 77            | vllm                     "
                        "| 2000                    |")
    assert o[i + 2] == o[i - 1] == "+" + "+".join(["=" * 27, "=" * 15, "=" * 52]) + "+"
    assert re.findall(r"No running processes found in NPU (\d+)", out) == ["1", "2", "3", "4", "5", "7"]
    assert all(len(x) == 98 for x in o)
    # chip tables: only the HBM usage of the busy chips grows by their processes' memory
    head = b.index("| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |")
    changes = diff("\n".join(b[:head]), "\n".join(o[:head]))
    assert set(changes) == {chip_row(base, p, True) for p in (0, 12, 13)}
    for phy, extra in ((0, 30000), (12, 1000), (13, 2000)):
        old, new = changes[chip_row(base, phy, True)]
        used = int(re.search(r"(\d+) */ 65536", old)[1])
        assert re.search(r"(\d+) */ 65536", new)[1] == str(used + extra)


def test_npu_smi_works_without_node_file(tmp_path):
    env = dict(os.environ, A3SIM_NODE_FILE=str(tmp_path / "none"), A3SIM_FAULTS_FILE=str(tmp_path / "none"))
    proc = subprocess.run([str(TOOLS / "npu-smi"), "info"], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0 and proc.stdout.count("Ascend910") == 16


# ---------------------------------------------------------------- npu-smi spod-info

def spod(text):
    assert all(re.fullmatch(r"\t.{30} : \d+", line) for line in text.splitlines()), text
    return {k.strip(): int(v) for k, v in (line.split(" : ") for line in text.splitlines())}


def test_npu_smi_spod_info(sim):
    first = spod(ok(sim("npu-smi", "info", "-t", "spod-info", "-i", 0, "-c", 0)))
    last = spod(ok(sim("npu-smi", "info", "-t", "spod-info", "-i", 7, "-c", 1)))
    assert list(first) == ["SDID", "Super Pod Size", "Super Pod ID", "Server Index"]
    assert first["Server Index"] == last["Server Index"] == NODES.index(ME)
    assert first["Super Pod ID"] == last["Super Pod ID"]
    assert first["SDID"] != last["SDID"]
    other = spod(ok(sim("npu-smi", "info", "-t", "spod-info", "-i", 0, "-c", 0, node=node_json("d1"))))
    assert other["Server Index"] == 3 and other["SDID"] != first["SDID"]


@pytest.mark.parametrize("args", [("-i", 8, "-c", 0), ("-i", 0, "-c", 2), ("-i", "x", "-c", 0), ("-i", -1, "-c", 0)])
def test_npu_smi_spod_info_invalid_ids(sim, args):
    proc = sim("npu-smi", "info", "-t", "spod-info", *args)
    assert proc.returncode == 1 and "invalid" in proc.stdout and "SDID" not in proc.stdout


@pytest.mark.parametrize("args", [(), ("foo",), ("info", "-t", "board", "-i", 0, "-c", 0),
                                  ("info", "-t", "spod-info", "-i", 0), ("info", "extra")])
def test_npu_smi_usage(sim, args):
    proc = sim("npu-smi", *args)
    assert proc.returncode == 1 and proc.stdout.startswith("Usage: npu-smi")


# ---------------------------------------------------------------- hccn_tool status queries

def test_hccn_vnic(sim):
    want = fixture("hccn_vnic_up.txt").splitlines()
    got = ok(sim("hccn_tool", "-i", 3, "-vnic", "-g")).splitlines()
    assert [x.split(": ")[0] for x in got] == [x.split(": ")[0] for x in want]
    assert got == ["vnic link status: UP", "vnic ipaddr: 127.31.1.4", "vnic netmask: 255.255.0.0"]
    down = ok(sim("hccn_tool", "-i", 5, "-vnic", "-g", faults={"vnic_down": [5]}))
    assert diff(ok(sim("hccn_tool", "-i", 5, "-vnic", "-g")), down) == {
        0: ("vnic link status: UP", "vnic link status: DOWN")}
    assert ok(sim("hccn_tool", "-i", 4, "-vnic", "-g", faults={"vnic_down": [5]})).startswith("vnic link status: UP\n")


def test_hccn_link(sim):
    assert ok(sim("hccn_tool", "-i", 2, "-link", "-g")) == fixture("hccn_link_up.txt")
    assert ok(sim("hccn_tool", "-i", 2, "-link", "-g", faults={"link_down": [2]})) == fixture("hccn_link_down.txt")
    assert ok(sim("hccn_tool", "-i", 3, "-link", "-g", faults={"link_down": [2]})) == fixture("hccn_link_up.txt")


def test_hccn_net_health(sim):
    faults = {"net_health": {"4": "Init", "5": "Receive timeout"}}
    assert ok(sim("hccn_tool", "-i", 4, "-net_health", "-g")) == fixture("hccn_net_health_success.txt")
    assert ok(sim("hccn_tool", "-i", 4, "-net_health", "-g", faults=faults)) == fixture("hccn_net_health_init.txt")
    assert ok(sim("hccn_tool", "-i", 5, "-net_health", "-g", faults=faults)) == "net health status: Receive timeout\n"
    assert ok(sim("hccn_tool", "-i", 3, "-net_health", "-g", faults=faults)) == fixture("hccn_net_health_success.txt")


def test_hccn_tls_grep_switch(sim):
    outs = [ok(sim("hccn_tool", "-i", d, "-tls", "-g", faults={"tls_switch": {"1": 1}})) for d in (0, 1)]
    assert all(len(out.splitlines()) > 1 for out in outs)
    grepped = "".join(line + "\n" for out in outs for line in out.splitlines() if "switch" in line)
    assert grepped == fixture("hccn_tls_grep_switch.txt")
    assert "tls switch[0]" in ok(sim("hccn_tool", "-i", 1, "-tls", "-g"))


def test_hccn_ip(sim):
    want = fixture("hccn_ip_sample.txt").splitlines()
    got = ok(sim("hccn_tool", "-i", 3, "-ip", "-g")).splitlines()
    assert [x.split(":")[0] for x in got] == [x.split(":")[0] for x in want]
    assert got == ["ipaddr:127.32.1.4", "netmask:255.255.255.0"]
    proc = sim("hccn_tool", "-i", 1, "-ip", "-g", faults={"no_ip": [1]})
    assert (proc.returncode, proc.stdout) == (13, "no ip was preset\n")
    assert ok(sim("hccn_tool", "-i", 0, "-ip", "-g", faults={"no_ip": [1]})).startswith("ipaddr:127.32.1.1\n")


def test_hccn_netdetect_gateway_lldp(sim):
    assert ok(sim("hccn_tool", "-i", 0, "-netdetect", "-g")) == "netdetect address: 127.32.1.254\n"
    assert ok(sim("hccn_tool", "-i", 0, "-gateway", "-g")) == "gateway addr: 127.32.1.254\n"
    lldp = ok(sim("hccn_tool", "-i", 0, "-lldp", "-g")).splitlines()
    assert lldp[0] == "Chassis ID TLV" and lldp[-1] == "End Of LLDPDU TLV" and "Port ID TLV" in lldp


# ---------------------------------------------------------------- hccn_tool hccs_ping

def shape(text):
    """The output with its numbers and addresses blanked, to compare formats."""
    return re.sub(r"\d+(\.\d+)*", "N", text)


def ping(sim, dev, ip, *extra, faults=None):
    return sim("hccn_tool", "-i", dev, "-hccs_ping", "-g", "address", ip, *extra, faults=faults)


def test_hccs_ping_success_matches_fixture_format(sim):
    out = ok(ping(sim, 0, PEER_IP))
    assert shape(out) == shape(fixture("hccn_hccs_ping_synthetic.txt"))
    assert out.startswith(f"device 0 PING {PEER_IP}\n")
    assert "3 packets transmitted, 3 received, 0.00% packets loss\n" in out
    assert out == ok(ping(sim, 0, PEER_IP))  # deterministic


def test_hccs_ping_count(sim):
    out = ok(ping(sim, 2, "127.31.0.16", "cnt", 5))
    assert out.count("This pkt ping success!") == 5 and "recv seq 4," in out
    assert "5 packets transmitted, 5 received, 0.00% packets loss\n" in out


def assert_ping_fails(proc, count=3):
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stdout.count("This pkt ping fail!") == count and "success" not in proc.stdout
    assert f"{count} packets transmitted, 0 received, 100.00% packets loss\n" in proc.stdout


def test_hccs_ping_non_member_ip_fails(sim):
    assert_ping_fails(ping(sim, 0, "127.31.9.9"))
    assert_ping_fails(ping(sim, 0, "10.0.0.1", "cnt", 2), count=2)


@pytest.mark.parametrize("faults, dev, target, still_ok", [
    ({"vnic_down": [0]}, 0, PEER_IP, (1, PEER_IP)),                  # own vNIC down
    ({"hccs_ping_fail": [0]}, 0, PEER_IP, (1, PEER_IP)),             # own device fails
    ({"vnic_down": [5]}, 0, "127.31.1.6", (0, "127.31.1.7")),       # target on this node down
    ({"unreachable_ips": [PEER_IP]}, 0, PEER_IP, (0, "127.31.2.6")),  # peer-side fault
])
def test_hccs_ping_faults(sim, faults, dev, target, still_ok):
    assert_ping_fails(ping(sim, dev, target, faults=faults))
    ok(ping(sim, *still_ok, faults=faults))


def test_hccs_ping_unsupported(sim):
    proc = ping(sim, 0, PEER_IP, faults={"hccs_ping_unsupported": True})
    assert (proc.returncode, proc.stdout) == (1, "This device does not support this function.\n")
    ok(ping(sim, 0, PEER_IP, faults={"hccs_ping_unsupported": False}))


# ---------------------------------------------------------------- hccn_tool errors, delays

@pytest.mark.parametrize("dev, npus", [(16, 16), (-1, 16), ("x", 16), (8, 8)])
def test_hccn_invalid_device_id(sim, dev, npus):
    proc = sim("hccn_tool", "-i", dev, "-link", "-g", node=node_json(npus=npus))
    assert proc.returncode == 1 and proc.stdout.startswith("Invalid device id")


@pytest.mark.parametrize("args", [(), ("-i", 0), ("-i", 0, "-link"), ("-i", 0, "-foo", "-g"), ("-d", 0, "-link", "-g"),
                                  ("-i", 0, "-link", "-g", "extra"), ("-i", 0, "-hccs_ping", "-g"),
                                  ("-i", 0, "-hccs_ping", "-g", "address", "1.2.3"),
                                  ("-i", 0, "-hccs_ping", "-g", "address", PEER_IP, "cnt", 0),
                                  ("-i", 0, "-hccs_ping", "-g", "address", PEER_IP, "cnt"),
                                  ("-i", 0, "-hccs_ping", "-g", "address", PEER_IP, "pkt", 3)])
def test_hccn_usage(sim, args):
    proc = sim("hccn_tool", *args)
    assert proc.returncode == 2 and proc.stdout.startswith("Usage: hccn_tool")


def test_setup_errors(sim, tmp_path):
    proc = sim("hccn_tool", "-i", 0, "-link", "-g", faults_text="{not json")
    assert proc.returncode == 3 and proc.stderr.startswith("a3sim:")
    assert sim("npu-smi", "info", faults_text="[1]").returncode == 3
    env = dict(os.environ, A3SIM_NODE_FILE=str(tmp_path / "none"), A3SIM_FAULTS_FILE=str(tmp_path / "none"))
    proc = subprocess.run([str(TOOLS / "hccn_tool"), "-i", "0", "-link", "-g"], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 3 and "node file" in proc.stderr


def timed(run):
    start = time.monotonic()
    ok(run())
    return time.monotonic() - start


def test_delay_ms(sim):
    per_op = {"delay_ms": {"hccs_ping": 1500}}
    assert timed(lambda: ping(sim, 0, PEER_IP, faults=per_op)) >= 1.5
    assert timed(lambda: sim("hccn_tool", "-i", 0, "-link", "-g", faults=per_op)) < 1.2
    assert timed(lambda: sim("npu-smi", "info", faults={"delay_ms": 600})) >= 0.6
    with pytest.raises(subprocess.TimeoutExpired):
        sim("hccn_tool", "-i", 0, "-vnic", "-g", faults={"delay_ms": {"*": 5000}}, timeout=0.5)


# ---------------------------------------------------------------- the front end's answer cache

def cache_entries(tmp_path, suffix=".rc"):
    return sorted(p.name for p in (tmp_path / "cache").glob("*" + suffix)) if (tmp_path / "cache").is_dir() else []


def test_cache_answers_a_repeated_call(sim, tmp_path):
    first = sim("hccn_tool", "-i", 3, "-vnic", "-g")
    (entry,) = cache_entries(tmp_path)
    assert entry.startswith("hccn_tool.") and entry.endswith(".x.-i_3_-vnic_-g.rc")
    # the second call takes the stored answer: prove it by marking the stored text
    out = tmp_path / "cache" / entry.replace(".rc", ".out")
    out.write_text(out.read_text().replace("UP", "UP(cached)"))
    second = sim("hccn_tool", "-i", 3, "-vnic", "-g")
    assert second.returncode == first.returncode == 0
    assert second.stdout == first.stdout.replace("UP", "UP(cached)")
    # A3SIM_NO_CACHE runs Python again
    assert sim("hccn_tool", "-i", 3, "-vnic", "-g", env_extra={"A3SIM_NO_CACHE": "1"}).stdout == first.stdout


def test_cache_follows_the_fault_file(sim, tmp_path):
    assert ok(sim("hccn_tool", "-i", 5, "-link", "-g")) == "link status: UP\n"
    assert ok(sim("hccn_tool", "-i", 5, "-link", "-g", faults={"link_down": [5]})) == "link status: DOWN\n"
    assert ok(sim("hccn_tool", "-i", 5, "-link", "-g", faults={})) == "link status: UP\n"
    # a missing fault file (healthy) and an empty one (unreadable: setup error) are different keys
    proc = sim("hccn_tool", "-i", 5, "-link", "-g", faults_text="")
    assert proc.returncode == 3 and proc.stderr.startswith("a3sim:")
    # answers on stderr are not stored: three healthy answers (no file, {} and link_down) are
    assert len(cache_entries(tmp_path)) == 3
    # a different node identity is a different key too
    assert ok(sim("hccn_tool", "-i", 5, "-vnic", "-g", node=node_json("d1"))).count("127.31.3.6") == 1


def test_cache_keeps_exit_codes_and_delays(sim, tmp_path):
    for _unused in range(2):
        proc = ping(sim, 0, PEER_IP, faults={"hccs_ping_unsupported": True, "delay_ms": {"hccs_ping": 700}})
        assert (proc.returncode, proc.stdout) == (1, "This device does not support this function.\n")
    assert len(cache_entries(tmp_path)) == 1
    assert timed(lambda: sim("npu-smi", "info", faults={"delay_ms": 600})) >= 0.6
    assert timed(lambda: sim("npu-smi", "info", faults={"delay_ms": 600})) >= 0.6  # from the cache
    assert len(cache_entries(tmp_path)) == 2


def test_cache_skips_arguments_that_are_no_file_name(sim, tmp_path):
    proc = sim("hccn_tool", "-i", 0, "-hccs_ping", "-g", "address", "1.2.3.4/8")
    assert proc.returncode == 2
    assert sim("npu-smi").returncode == 1
    assert cache_entries(tmp_path) == []


def test_warm_stores_what_python_answers_and_a_fault_still_reaches_python(sim, tmp_path):
    """hccn_tool --a3sim-warm (run by sim/cluster.sh up) stores every preflight query of the node in one process;
    a stored answer is byte for byte what Python prints, and an injected fault is a new key, so Python answers it."""
    proc = sim("hccn_tool", "--a3sim-warm")
    assert ok(proc) == "a3sim: hccn_tool answers stored: %d\n" % (16 * 8 + 16 * 48)  # 8 plain reads; 3 other nodes' vNICs
    entries = cache_entries(tmp_path)
    assert "hccn_tool" + entries[0][len("hccn_tool"):].split(".-i_")[0] + ".-i_15_-net_health_-g.rc" in entries
    queries = [("-i", 7, "-vnic", "-g"), ("-i", 2, "-tls", "-g"), ("-i", 4, "-hccs_ping", "-g", "address", PEER_IP, "cnt", 3)]
    for query in queries:
        stored = sim("hccn_tool", *query)
        fresh = sim("hccn_tool", *query, env_extra={"A3SIM_NO_CACHE": "1"})
        assert (stored.returncode, stored.stdout) == (fresh.returncode, fresh.stdout)
    assert len(cache_entries(tmp_path)) == len(entries)  # every one came from the stored answers
    # an own vNIC is no peer: not stored, answered by Python (and then stored) as before
    ok(sim("hccn_tool", "-i", 0, "-hccs_ping", "-g", "address", "127.31.1.1", "cnt", 3))
    assert len(cache_entries(tmp_path)) == len(entries) + 1
    assert ok(sim("hccn_tool", "-i", 5, "-link", "-g", faults={"link_down": [5]})) == "link status: DOWN\n"
