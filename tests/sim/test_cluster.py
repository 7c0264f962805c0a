"""Tests of the simulated cluster's lifecycle scripts (sim/cluster.sh, sim/lib/).

The first part needs no docker: script syntax, the identity files (node.json, hccn.conf) against the
contract and the simulated tools, the Debian-mirror lookup and the input hashing. The second part
runs only while the simulated nodes are up (`sim/cluster.sh up`) and checks them from the outside.
"""
import ipaddress
import json
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIM = ROOT / "sim"
CLUSTER = SIM / "cluster.sh"
IDENTITY = SIM / "lib" / "identity.py"
NODES = {"p0": "127.30.0.11", "p1": "127.30.0.12", "d0": "127.30.0.13", "d1": "127.30.0.14"}
PAIRS = [f"{n}={ip}" for n, ip in NODES.items()]


def run(*args, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 120)
    return subprocess.run(list(args), check=kw.pop("check", False), **kw)


def bash_lib(script, env=None):
    """Runs SCRIPT after sourcing sim/lib/common.sh and build.sh (no docker needed for that)."""
    src = f'set -euo pipefail; . "{SIM}/lib/common.sh"; . "{SIM}/lib/build.sh"; {script}'
    return run("bash", "-c", src, env={**os.environ, **(env or {})})


def identity(what, name):
    res = run("python3", str(IDENTITY), what, name, *PAIRS)
    assert res.returncode == 0, res.stderr
    return res.stdout


# ---- scripts -------------------------------------------------------------------------------------
def test_scripts_parse():
    for f in [CLUSTER, *sorted((SIM / "lib").glob("*.sh"))]:
        res = run("bash", "-n", str(f))
        assert res.returncode == 0, f"{f}: {res.stderr}"


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck():
    res = run("shellcheck", "-x", "-S", "warning", str(CLUSTER), *map(str, (SIM / "lib").glob("*.sh")),
              cwd=SIM)
    assert res.returncode == 0, res.stdout


def test_help_lists_every_subcommand():
    res = run(str(CLUSTER), "help")
    assert res.returncode == 0
    for cmd in ("deps", "build", "up", "down", "status", "fault", "partition", "heal"):
        assert f"cluster.sh {cmd}" in res.stdout


def test_unknown_subcommand_fails_clearly():
    res = run(str(CLUSTER), "explode")
    assert res.returncode != 0
    assert "unknown command 'explode'" in res.stderr


def test_fault_rejects_unknown_node():
    res = run(str(CLUSTER), "fault", "x9", "{}")
    assert res.returncode != 0
    assert "unknown node 'x9'" in res.stderr


def test_gitignore_keeps_cache_out():
    assert ".cache/" in (SIM / ".gitignore").read_text().split()


# ---- identity files ------------------------------------------------------------------------------
@pytest.mark.parametrize("index,name", list(enumerate(NODES)))
def test_node_json_follows_contract(index, name):
    data = json.loads(identity("node-json", name))
    assert set(data) == {"name", "index", "business_ip", "npus", "vnic_ips"}
    assert (data["name"], data["index"], data["business_ip"], data["npus"]) == (name, index, NODES[name], 16)
    assert list(data["vnic_ips"]) == list(NODES)
    for n, (node, ips) in enumerate(data["vnic_ips"].items()):
        assert ips == [f"127.31.{n}.{d + 1}" for d in range(16)], node
        for ip in ips:
            assert ipaddress.ip_address(ip).is_loopback


def test_identity_rejects_unknown_node_and_bad_pairs():
    assert run("python3", str(IDENTITY), "node-json", "zz", *PAIRS).returncode != 0
    assert run("python3", str(IDENTITY), "node-json", "p0", "p0").returncode != 0


def test_hccn_conf_is_realistic_and_loopback_only():
    text = identity("hccn-conf", "d0")
    lines = text.splitlines()
    assert len(lines) == 16 * 5
    conf = dict(line.split("=", 1) for line in lines)
    for d in range(16):
        for key in ("address", "netmask", "netdetect", "gateway", "send_arp_status"):
            assert f"{key}_{d}" in conf
        assert ipaddress.ip_address(conf[f"address_{d}"]).is_loopback
    assert conf["address_0"] == "127.32.2.1"


@pytest.mark.skipif(not (SIM / "tools" / "hccn_tool").exists(), reason="sim/tools/hccn_tool not there yet")
def test_hccn_conf_agrees_with_simulated_hccn_tool(tmp_path):
    """/etc/hccn.conf and `hccn_tool -i D -ip -g` must describe the same RoCE addresses."""
    node_file = tmp_path / "node.json"
    node_file.write_text(identity("node-json", "p1"))
    conf = dict(line.split("=", 1) for line in identity("hccn-conf", "p1").splitlines())
    env = {**os.environ, "A3SIM_NODE_FILE": str(node_file), "A3SIM_FAULTS_FILE": str(tmp_path / "none"),
           "A3SIM_CACHE_DIR": str(tmp_path / "cache")}
    for d in (0, 15):
        res = run(str(SIM / "tools" / "hccn_tool"), "-i", str(d), "-ip", "-g", env=env)
        assert res.returncode == 0, res.stderr
        assert f"ipaddr:{conf[f'address_{d}']}" in res.stdout
        assert f"netmask:{conf[f'netmask_{d}']}" in res.stdout


# ---- host configuration and hashing --------------------------------------------------------------
def test_debian_mirror_from_deb822_skips_security(tmp_path):
    (tmp_path / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\n"
        "Types: deb-src deb\n# comment\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n")
    res = bash_lib("debian_mirror", {"APT_SOURCES_DIR": str(tmp_path),
                                     "APT_SOURCES_LIST": str(tmp_path / "none")})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "http://mirror.invalid/debian"


def test_debian_mirror_from_sources_list(tmp_path):
    (tmp_path / "sources.list").write_text(
        "# deb http://old.invalid/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://mirror.invalid/debian bookworm main\n")
    res = bash_lib("debian_mirror", {"APT_SOURCES_DIR": str(tmp_path / "empty"),
                                     "APT_SOURCES_LIST": str(tmp_path / "sources.list")})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "http://mirror.invalid/debian"


def test_debian_mirror_missing_fails(tmp_path):
    res = bash_lib("debian_mirror", {"APT_SOURCES_DIR": str(tmp_path),
                                     "APT_SOURCES_LIST": str(tmp_path / "none")})
    assert res.returncode != 0


def test_hash_dir_tracks_content_and_mode_not_bytecode(tmp_path):
    d = tmp_path / "src"
    (d / "pkg").mkdir(parents=True)
    (d / "pkg" / "a.py").write_text("print(1)\n")

    def h():
        res = bash_lib(f'hash_dir "{d}"')
        assert res.returncode == 0, res.stderr
        return res.stdout.strip()

    first = h()
    (d / "pkg" / "__pycache__").mkdir()
    (d / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert h() == first
    (d / "pkg" / "a.py").chmod(0o755)
    second = h()
    assert second != first
    (d / "pkg" / "a.py").write_text("print(2)\n")
    assert h() not in (first, second)


def test_image_names_are_stable():
    script = 'compute_image_names; echo "$NODE_IMAGE $VLLM_IMAGE $NODE_ROOTFS $SUB_ROOTFS"'
    a, b = bash_lib(script), bash_lib(script)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    node, vllm, rootfs_node, rootfs_vllm = a.stdout.split()
    assert node.startswith("a3sim/node:") and vllm.startswith("a3sim/vllm-ascend:")
    assert rootfs_node.startswith("a3sim/rootfs-node:") and rootfs_vllm.startswith("a3sim/rootfs-vllm:")


# ---- a running cluster ---------------------------------------------------------------------------
def _node_running(name):
    if shutil.which("docker") is None:
        return False
    res = run("docker", "container", "inspect", "-f", "{{.State.Running}}", f"a3sim-{name}", timeout=20)
    return res.returncode == 0 and res.stdout.strip() == "true"


live = pytest.mark.skipif(not all(_node_running(n) for n in NODES),
                          reason="simulated cluster not up (sim/cluster.sh up)")


def dexec(node, *cmd, **kw):
    return run("docker", "exec", *(["-i"] if "input" in kw else []), f"a3sim-{node}", *cmd, **kw)


@live
@pytest.mark.parametrize("name", list(NODES))
def test_live_node_identity_and_host_paths(name):
    res = dexec(name, "cat", "/etc/a3sim/node.json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == json.loads(identity("node-json", name))
    assert dexec(name, "hostname").stdout.strip() == name
    paths = ["/usr/local/Ascend/driver/version.info", "/usr/local/Ascend/ascend-toolkit/latest/version.cfg",
             "/usr/local/dcmi", "/etc/ascend_install.info", "/etc/hccn.conf", "/usr/local/bin/npu-smi",
             "/usr/local/Ascend/driver/tools/hccn_tool", "/usr/local/sbin/hccn_tool",
             "/usr/share/zoneinfo/Asia/Shanghai", "/data/GLM-5.1-w8a8/config.json"]
    assert dexec(name, "ls", "-d", *paths).returncode == 0
    devs = [f"/dev/davinci{i}" for i in range(16)] + ["/dev/davinci_manager", "/dev/hisi_hdc", "/dev/devmm_svm"]
    assert dexec(name, "sh", "-c", " && ".join(f"test -c {d}" for d in devs)).returncode == 0
    assert "Version=25.5.0" in dexec(name, "cat", "/usr/local/Ascend/driver/version.info").stdout


@live
@pytest.mark.parametrize("name", list(NODES))
def test_live_nested_engine_configuration(name):
    res = dexec(name, "docker", "info", "--format", "{{.Driver}} {{json .RegistryConfig.IndexConfigs}}")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("overlay2 ")
    assert "127.0.0.1:5000" in res.stdout
    conf = json.loads(dexec(name, "cat", "/etc/docker/daemon.json").stdout)
    assert conf["bridge"] == "none" and conf["iptables"] is False and conf["ip6tables"] is False
    assert dexec(name, "systemctl", "is-system-running").stdout.strip() in ("running", "degraded")


@live
def test_live_business_ips_on_host_lo():
    out = run("ip", "-o", "-4", "addr", "show", "dev", "lo").stdout
    for ip in NODES.values():
        assert f" {ip}/32 " in out


@live
def test_live_fault_roundtrip():
    before = dexec("d1", "cat", "/etc/a3sim/faults.json")
    try:
        res = run(str(CLUSTER), "fault", "d1", '{"unhealthy_chips": [3]}')
        assert res.returncode == 0, res.stderr
        assert json.loads(dexec("d1", "cat", "/etc/a3sim/faults.json").stdout) == {"unhealthy_chips": [3]}
        bad = run(str(CLUSTER), "fault", "d1", "[1, 2")
        assert bad.returncode != 0 and "not a JSON object" in bad.stderr
        res = run(str(CLUSTER), "fault", "d1", "clear")
        assert res.returncode == 0, res.stderr
        assert dexec("d1", "test", "-e", "/etc/a3sim/faults.json").returncode != 0
    finally:
        if before.returncode == 0:
            dexec("d1", "sh", "-c", "cat > /etc/a3sim/faults.json", input=before.stdout)
