"""plugins/plugin_utils/_host.py: the preflight's one host read, split into its sections."""
import subprocess

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._host import (
    cann_version, parse_listeners, parse_sections, parse_stat, port_hits, reported_version)

# the same section() function as roles/preflight/tasks/host.yml
SECTION = """section() { name=$1; shift; printf '@@%s\\n' "$name"; "$@" 2>&1; printf '\\n@@rc %s\\n' "$?"; }"""


def shell(script):
    return subprocess.run(["/bin/sh", "-c", SECTION + "\n" + script], capture_output=True, text=True, check=True).stdout


def test_sections_from_the_real_shell_function():
    out = shell("section page_size echo 4096\n"
                "section empty true\n"
                "section noeol printf 'a b'\n"
                "section multi printf 'one\\ntwo\\n\\n'\n"
                "section failing sh -c 'echo oops >&2; exit 7'\n")
    got = parse_sections(out)
    assert list(got) == ["page_size", "empty", "noeol", "multi", "failing"]
    assert got["page_size"] == {"out": "4096", "lines": ["4096"], "rc": 0}
    assert got["empty"] == {"out": "", "lines": [], "rc": 0}
    assert got["noeol"]["out"] == "a b"
    assert got["multi"]["out"] == "one\ntwo\n" and got["multi"]["lines"] == ["one", "two"]
    assert got["failing"] == {"out": "oops", "lines": ["oops"], "rc": 7}


def test_a_cut_short_section_is_left_out():
    out = "@@page_size\n4096\n\n@@rc 0\n@@meminfo\nMemTotal: 1 kB\n"
    assert list(parse_sections(out)) == ["page_size"]


def test_nothing_to_parse():
    assert parse_sections("") == {} and parse_sections(None) == {}
    assert parse_sections("command not found\n") == {}


# --- ss -H -t -l -n -p ------------------------------------------------------------------------------

SS = """LISTEN 0      4096      127.30.0.11:2379       0.0.0.0:*    users:(("etcd",pid=101,fd=7))
LISTEN 0      511           0.0.0.0:8000       0.0.0.0:*    users:(("python3",pid=202,fd=12),("python3",pid=203,fd=12))
LISTEN 0      128              [::]:22            [::]:*    users:(("sshd",pid=1,fd=4))
LISTEN 0      4096  127.0.0.53%lo:53           0.0.0.0:*    users:(("systemd-resolve",pid=9,fd=14))
LISTEN 0      5         127.30.0.11:30000      0.0.0.0:*
LISTEN 0      5   [::ffff:127.30.0.11]:6700         *:*    users:(("python3",pid=55,fd=3))
"""


def test_listeners_from_ss():
    got = parse_listeners(SS)
    assert [(x["address"], x["port"]) for x in got] == [
        ("127.30.0.11", 2379), ("0.0.0.0", 8000), ("::", 22), ("127.0.0.53", 53), ("127.30.0.11", 30000),
        ("::ffff:127.30.0.11", 6700)]
    assert got[1]["owners"] == [{"name": "python3", "pid": "202"}, {"name": "python3", "pid": "203"}]
    assert got[4]["owners"] == []  # not root: ss shows no process
    assert parse_listeners("") == [] and parse_listeners(None) == []


def test_port_hits_local_addresses_and_ranges():
    wanted = [{"first": 2379, "last": 2379, "any": False, "what": "etcd client port"},
              {"first": 29990, "last": 30005, "any": False, "what": "kv ports"},
              {"first": 8000, "last": 8000, "any": "False", "what": "API port"},
              {"first": 6700, "last": 6700, "any": False, "what": "DP RPC port"},
              {"first": 22, "last": 22, "any": False, "what": "not ours"}]
    local = ["127.30.0.11", "::ffff:127.30.0.11", "0.0.0.0", "::"]
    hits = port_hits(SS, wanted, local)
    assert [(h["port"], h["address"], h["what"]) for h in hits] == [
        (2379, "127.30.0.11", "etcd client port"), (30000, "127.30.0.11", "kv ports"),
        (8000, "0.0.0.0", "API port"), (6700, "::ffff:127.30.0.11", "DP RPC port"), (22, "::", "not ours")]
    # another node's business IP does not clash, unless the service binds every address ("any")
    other = ["127.30.0.12", "0.0.0.0", "::"]
    assert port_hits(SS, wanted[:2], other) == []
    assert [h["port"] for h in port_hits(SS, [dict(wanted[0], any=True)], other)] == [2379]
    assert [h["port"] for h in port_hits(SS, [dict(wanted[0], any="true")], other)] == [2379]
    assert port_hits("", wanted, local) == [] and port_hits(SS, [], local) == []


# --- stat -L -c '%F:%s:%n' ----------------------------------------------------------------------------

def test_stat_types():
    out = shell("f=$(mktemp -d); : > $f/empty; echo x > $f/conf; mkdir $f/model\n"
                "section files stat -L -c '%F:%s:%n' $f/empty $f/conf $f/model $f/missing\n"
                "echo \"$f\"\n")
    tmp = out.strip().splitlines()[-1]
    subprocess.run(["rm", "-rf", tmp], check=True)
    got = parse_stat(parse_sections(out)["files"]["out"])
    assert got == {tmp + "/empty": "empty file", tmp + "/conf": "regular file", tmp + "/model": "directory"}
    assert parse_stat("") == {} and parse_stat("stat: cannot statx '/x': No such file or directory") == {}


# --- CANN version files (grep -sHE '^([A-Za-z_]*[Vv]ersion)=' FILE...) ----------------------------------

CFG = "/usr/local/Ascend/ascend-toolkit/latest/version.cfg"
INFO = "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"
DRIVER = "/usr/local/Ascend/driver/version.info"


def test_cann_version_from_version_cfg_inner_value():
    lines = [DRIVER + ":Version=25.5.0", CFG + ":toolkit_installed_version=[8.5.0.alpha001:8.5.0]",
             INFO + ":version=8.3.RC1"]
    assert cann_version(lines, [CFG, INFO]) == ["8.5.0", CFG]


def test_cann_version_falls_back_in_file_order():
    lines = [INFO + ":version= 8.5.RC1", CFG + ":something_else_version=1"]
    assert cann_version(lines, [CFG, INFO]) == ["8.5.RC1", INFO]
    assert cann_version([CFG + ":runtime_running_version=[x:9.0.0]"], [INFO, CFG]) == ["9.0.0", CFG]


def test_cann_version_none_found():
    assert cann_version([], [CFG]) == ["", ""]
    assert cann_version([DRIVER + ":Version=25.5.0"], [CFG, INFO]) == ["", ""]
    # a line of another file that merely starts with the same text is not taken
    assert cann_version([CFG + ".bak:version=1.0"], [CFG]) == ["", ""]


def test_reported_version_reads_the_labelled_line_without_v_or_build_metadata():
    etcd = "etcd Version: 3.4.23\nGit SHA: x\netcdctl version: 3.4.23\nAPI version: 3.4\n"
    assert reported_version(etcd, "etcd Version:") == "3.4.23"
    assert reported_version(etcd, "etcdctl version:") == "3.4.23"
    assert reported_version("prometheus, version 2.42.0+ds (branch: debian/sid)", "prometheus, version") == "2.42.0"
    assert reported_version("promtool, version v3.5.0 (branch: HEAD)", "promtool, version") == "3.5.0"


def test_reported_version_is_empty_when_the_binary_is_missing():
    assert reported_version("bash: /usr/local/bin/etcd: No such file or directory", "etcd Version:") == ""
    assert reported_version("", "promtool, version") == ""
    assert reported_version(None, "etcd Version:") == ""
