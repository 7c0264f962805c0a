"""plugins/module_utils/_host.py: the preflight's one host read, split into its sections."""
import subprocess

from ansible_collections.ascend.vllm_pd.plugins.module_utils._host import parse_sections

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
