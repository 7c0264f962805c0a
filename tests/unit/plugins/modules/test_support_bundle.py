# -*- coding: utf-8 -*-
"""The module ascend.vllm_pd.support_bundle: main() run with its arguments as Ansible passes them (collect on a
"node" that is this machine, with stand-in tools; archive on the "controller"), the archive it writes, its
documentation against its argument spec, and playbooks/collect.yml's use of it."""
from __future__ import annotations

import datetime
import functools
import json
import re
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.vllm_pd.plugins.modules import support_bundle

ROOT = Path(__file__).resolve().parents[4]
M = "[REDACTED]"
KEY = "sk-engine-key-123456"
TOKEN = "admin-tok-987654"


@pytest.fixture
def run(run_main):
    """``run({...}, check_mode=False)`` -> (the JSON main() printed, its exit status)."""
    return functools.partial(run_main, support_bundle.main)


def by_name(result):
    return {i["name"]: i for i in result["collected"]}


# --- collect ------------------------------------------------------------------------------------------------------

@pytest.fixture
def node(tmp_path, fake_tool):
    """A work directory with the files a node has, and stand-ins for its tools."""
    work = tmp_path / "work"
    (work / "supervise").mkdir(parents=True)
    (work / "vllm_log.log").write_bytes(b"start\nVLLM_API_KEY=%s serving\nAuthorization: Bearer client-key-aaaa\n"
                                        b"\xff\xfe raw\n" % KEY.encode())
    (work / "start_vllm.sh").write_text("exec launch --api-key %s --port 6700\n" % KEY)
    (work / "kv_transfer_config_dp0.json").write_text('{"kv_port": "30000"}\n')
    (work / "vllm_api_key").write_text(KEY + "\n")
    (work / "proxy-secrets.json").write_text('{"admin_token": "%s"}\n' % TOKEN)
    (work / "supervise" / "ascend-vllm.service.jsonl").write_text('{"t": 1, "event": "exit"}\n')
    (work / "supervise" / "ascend-vllm.service.canary.json").write_text(
        '{"api_key_file": "%s/vllm_api_key", "unit": "ascend-vllm.service"}\n' % work)
    (work / "key-link.json").symlink_to(work / "vllm_api_key")   # a link to a secret file is not read either
    (work / "etcd-pki").mkdir()
    (work / "etcd-pki" / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    tools = {
        "journal": fake_tool("journalctl", "print('Dec 04 p0 vllm[1]: serving with --api-key %s'); "
                                           "print('Dec 04 p0 vllm[1]: plain line')" % KEY),
        "fails": fake_tool("fails", "sys.stderr.write('boom: token=%s\\n'); sys.exit(3)" % TOKEN),
        "slow": fake_tool("slow", "print('started', flush=True); time.sleep(60)"),
        "echo_stdin": fake_tool("echo_stdin", "data = sys.stdin.read(); print('got', len(data), data.strip())"),
        "big": fake_tool("big", "sys.stdout.write(''.join('line %06d\\n' % i for i in range(20000)))"),
    }
    return work, tools


def collect_args(work, tools, **extra):
    args = {
        "commands": [
            {"name": "journal/ascend-vllm.service.log", "argv": [tools["journal"], "-u", "ascend-vllm.service"]},
            {"name": "npu/npu-smi-info.txt", "argv": ["npu-smi-not-installed-here", "info"]},
            {"name": "cmd/fails.txt", "argv": [tools["fails"]]},
            {"name": "proxy/admin.json", "argv": [tools["echo_stdin"], "-K", "-"],
             "stdin": 'header = "Authorization: Bearer %s"\n' % TOKEN},
        ],
        "files": [
            {"path": str(work / "vllm_log.log"), "max_bytes": 4096},
            {"path": str(work / "*.sh")},
            {"path": str(work / "*")},
            {"path": str(work / "supervise" / "*")},
            {"path": str(work / "etcd-pki" / "*")},
            {"path": str(work / "nothing-*.conf")},
            {"path": "/nonexistent/ascend-etcd.service"},
        ],
        "exclude": [str(work / "etcd-pki" / "*")],
        "secrets": [KEY, TOKEN, "client-key-aaaa", ""],
    }
    args.update(extra)
    return args


def test_collect_redacts_on_the_node_and_records_every_outcome(run, node):
    work, tools = node
    result, status = run(collect_args(work, tools))
    assert status == 0 and result["changed"] is False
    items = by_name(result)
    journal = items["journal/ascend-vllm.service.log"]
    assert journal["status"] == "ok" and journal["rc"] == 0 and journal["kind"] == "command"
    assert journal["content"] == "Dec 04 p0 vllm[1]: serving with --api-key %s\nDec 04 p0 vllm[1]: plain line\n" % M
    assert journal["redactions"] == 1 and journal["source"].endswith("journalctl -u ascend-vllm.service")
    missing = items["npu/npu-smi-info.txt"]
    assert missing["status"] == "missing" and missing["error"] == "npu-smi-not-installed-here: command not found"
    assert missing["rc"] is None and missing["content"] == ""
    failed = items["cmd/fails.txt"]
    assert (failed["status"], failed["rc"], failed["error"]) == ("failed", 3, "exit 3")
    assert failed["stderr"] == "boom: token=%s\n" % M
    # the curl config on stdin reached the command; its token never comes back
    admin = items["proxy/admin.json"]
    assert admin["status"] == "ok" and admin["content"].startswith("got 50 header")
    assert TOKEN not in admin["content"] and M in admin["content"]
    log = items["files" + str(work / "vllm_log.log")]
    assert log["status"] == "ok" and log["kind"] == "file" and log["truncated"] is False
    assert log["content"] == "start\nVLLM_API_KEY=%s serving\nAuthorization: Bearer %s\n\\xff\\xfe raw\n" % (M, M)
    assert items["files" + str(work / "start_vllm.sh")]["content"] == "exec launch --api-key %s --port 6700\n" % M
    # the secret files are listed, never read; the excluded directory's files too
    for secret in ("vllm_api_key", "proxy-secrets.json", "etcd-pki/ca.crt", "key-link.json"):
        item = items["files" + str(work / secret)]
        assert item["status"] == "excluded" and item["content"] == "" and item["error"] == "a secret file: never collected"
    canary = items["files" + str(work / "supervise" / "ascend-vllm.service.canary.json")]
    assert canary["content"] == '{"api_key_file": "%s/vllm_api_key", "unit": "ascend-vllm.service"}\n' % work
    assert items["files" + str(work / "nothing-*.conf")]["status"] == "absent"
    assert items["files/nonexistent/ascend-etcd.service"]["error"] == "no such file"
    # a directory matched by a glob is not a file to read
    assert "files" + str(work / "supervise") not in items
    text = json.dumps(result)
    for secret in (KEY, TOKEN, "client-key-aaaa"):
        assert secret not in text
    assert result["summary"] == {"ok": 9, "missing": 1, "failed": 1, "excluded": 4, "absent": 2}


def test_collect_runs_the_same_in_check_mode(run, node):
    work, tools = node
    args = collect_args(work, tools)
    normal = run(args)[0]
    checked, status = run(args, check_mode=True)

    def strip(result):
        return [{k: v for k, v in i.items() if k != "elapsed_s"} for i in result["collected"]]
    assert status == 0 and strip(checked) == strip(normal)


def test_a_command_that_hangs_is_killed_at_its_timeout(run, node):
    work, tools = node
    started = time.monotonic()
    result, status = run({"commands": [{"name": "slow.txt", "argv": [tools["slow"]], "timeout": 1},
                                       {"name": "journal.txt", "argv": [tools["journal"]]}]})
    assert status == 0 and time.monotonic() - started < 20
    slow = by_name(result)["slow.txt"]
    assert (slow["status"], slow["rc"], slow["error"]) == ("timeout", None, "no answer within 1s (killed)")
    assert slow["content"] == "started\n"   # what it said before it hung is kept
    assert by_name(result)["journal.txt"]["status"] == "ok"
    assert result["summary"] == {"timeout": 1, "ok": 1}


def test_a_timeout_kills_the_commands_children_too(run, fake_tool, tmp_path):
    """A hung tool that started a child of its own (a shell pipeline, a wrapper): the whole process group goes."""
    pid_file = tmp_path / "child.pid"
    tool = fake_tool("wrapper", "import subprocess\nchild = subprocess.Popen(['sleep', '60'])\n"
                                "open(%r, 'w').write(str(child.pid))\ntime.sleep(60)" % str(pid_file))
    result, status = run({"commands": [{"name": "w.txt", "argv": [tool], "timeout": 2}]})
    assert status == 0 and by_name(result)["w.txt"]["status"] == "timeout"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % child) as fh:
                if fh.read().split(") ")[-1].startswith("Z"):   # killed, not yet reaped by init
                    break
        except OSError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the tool's child %d outlived the timeout" % child)


def test_the_deadline_skips_what_has_not_started(run, node):
    work, tools = node
    result, status = run({"commands": [{"name": "a.txt", "argv": [tools["slow"]], "timeout": 30},
                                       {"name": "b.txt", "argv": [tools["journal"]]}],
                          "deadline": 1, "workers": 1})
    items = by_name(result)
    assert status == 0 and items["a.txt"]["status"] == "timeout"   # bounded by what was left of the deadline
    assert items["b.txt"]["status"] == "skipped" and "deadline of 1s" in items["b.txt"]["error"]


def test_output_and_files_are_bounded_to_their_tail(run, node, tmp_path):
    work, tools = node
    big = tmp_path / "big.log"
    big.write_text("".join("line %06d\n" % i for i in range(20000)))
    result, status = run({"commands": [{"name": "big.txt", "argv": [tools["big"]]}],
                          "files": [{"path": str(big), "max_bytes": 1000}], "max_bytes": 2000})
    items = by_name(result)
    out = items["big.txt"]
    assert status == 0 and out["truncated"] is True and out["bytes"] == 12 * 20000
    assert out["content"].endswith("line 019999\n") and out["content"].startswith("line ")
    assert len(out["content"]) <= 2000
    tail = items["files" + str(big)]
    assert tail["truncated"] is True and tail["bytes"] == 12 * 20000
    # starts at a line's start (the partial first line is dropped) and ends with the file
    assert tail["content"].startswith("line ") and tail["content"].endswith("line 019999\n")
    assert len(tail["content"]) <= 1000 and len(tail["content"].splitlines()) == 1000 // 12


def test_bad_arguments_fail_with_every_problem(run):
    result, status = run({"commands": [{"name": "../etc/passwd", "argv": ["x"]}, {"name": "a b", "argv": []},
                                       {"name": "ok.txt", "argv": ["x"]}, {"name": "ok.txt", "argv": ["y"]}],
                          "files": [{"path": "relative.log"}], "timeout": 0})
    assert status == 1 and result["failed"] is True
    msg = result["msg"]
    for part in ("../etc/passwd, a b", "names repeat: ok.txt", "argv is empty: a b", "relative.log: not an absolute path",
                 "timeout must be positive"):
        assert part in msg, msg


def test_the_stdin_and_the_secrets_never_show_in_the_invocation(run, node):
    work, tools = node
    result = run(collect_args(work, tools))[0]
    invocation = json.dumps(result.get("invocation", {}))
    assert TOKEN not in invocation and KEY not in invocation


# --- archive ------------------------------------------------------------------------------------------------------

def node_result(content, **item):
    entry = {"name": "journal/ascend-vllm.service.log", "kind": "command", "source": "journalctl -u x", "status": "ok",
             "rc": 0, "error": "", "stderr": "", "content": content, "bytes": len(content), "truncated": False,
             "redactions": 0}
    entry.update(item)
    return {"changed": False, "collected": [entry], "summary": {"ok": 1}}


def archive_args(dest, **extra):
    args = {
        "state": "archive",
        "dest": str(dest),
        "expected_hosts": ["p0", "p1", "d0", "d1"],
        "hosts": {
            # a node whose own redaction missed a value the controller knows: redacted again here
            "p0": node_result("serving --api-key %s\nlate %s\n" % (M, KEY)),
            "p1": {"unreachable": True, "changed": False,
                   "msg": "Failed to connect to the host via ssh: ssh: connect to host p1 port 22: No route to host"},
            "d0": {"failed": False, "msg": "MODULE FAILURE: /usr/bin/python3: not found",
                   "module_stderr": "/bin/sh: 1: /usr/bin/python3: not found"},
            "extra": node_result("x", status="timeout", rc=None, error="no answer within 20s (killed)",
                                 name="hccn/dev0-vnic.txt", stderr="Authorization: Bearer %s" % TOKEN),
        },
        "secrets": [KEY, TOKEN],
    }
    args.update(extra)
    return args


def members(path):
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else None, m.mode) for m in tar.getmembers()}


def test_archive_lists_every_host_and_why(run, tmp_path):
    dest = tmp_path / "out" / "bundles"   # created when missing
    result, status = run(archive_args(dest))
    assert status == 0 and result["changed"] is True
    path = Path(result["path"])
    assert path.parent == dest and re.match(r"^a3-support-\d{8}T\d{6}Z\.tar\.gz$", path.name)
    assert (path.stat().st_mode & 0o777) == 0o600
    assert [p.name for p in dest.iterdir()] == [path.name]   # no temporary file left behind
    stem = path.name[:-len(".tar.gz")]
    found = members(path)
    assert all(name.startswith(stem + "/") and mode == 0o600 for name, (_data, mode) in found.items())
    manifest = json.loads(found[stem + "/manifest.json"][0])
    assert list(manifest["hosts"]) == ["p0", "p1", "d0", "d1", "extra"]
    hosts = manifest["hosts"]
    assert hosts["p0"]["status"] == "collected" and hosts["p0"]["reason"] == ""
    assert hosts["p0"]["items"][0]["archived_as"] == "p0/journal/ascend-vllm.service.log"
    assert hosts["p0"]["items"][0]["redactions"] == 1
    assert found[stem + "/p0/journal/ascend-vllm.service.log"][0] == ("serving --api-key %s\nlate %s\n" % (M, M)).encode()
    assert hosts["p1"]["status"] == "unreachable" and "No route to host" in hosts["p1"]["reason"]
    assert "No route to host" in found[stem + "/p1/UNREACHABLE.txt"][0].decode()
    assert hosts["d0"]["status"] == "failed" and hosts["d0"]["reason"] == "MODULE FAILURE: /usr/bin/python3: not found"
    assert stem + "/d0/ERROR.txt" in found
    assert hosts["d1"] == {"status": "not run", "reason": "not in this run (--limit, or the play never reached it)",
                           "items": []}
    extra = hosts["extra"]
    assert extra["status"] == "partial" and extra["reason"] == "1 of 1 items not ok"
    assert extra["items"][0]["status"] == "timeout" and extra["items"][0]["stderr_tail"] == "Authorization: Bearer %s" % M
    assert found[stem + "/extra/hccn/dev0-vnic.txt.stderr"][0] == ("Authorization: Bearer %s" % M).encode()
    readme = found[stem + "/README.txt"][0].decode()
    assert re.search(r"^  p1 +unreachable +Failed to connect", readme, re.M)
    assert re.search(r"^  d1 +not run +not in this run", readme, re.M)
    assert "hccn/dev0-vnic.txt: timeout (no answer within 20s (killed))" in readme
    assert result["hosts_status"]["p0"] == "collected" and result["hosts_status"]["p1"].startswith("unreachable: ")
    everything = b"".join(data for data, _mode in found.values() if data) + json.dumps(result).encode()
    assert KEY.encode() not in everything and TOKEN.encode() not in everything


def test_archive_in_check_mode_writes_nothing(run, tmp_path):
    dest = tmp_path / "out"
    result, status = run(archive_args(dest), check_mode=True)
    assert status == 0 and result["changed"] is True and result["msg"].startswith("would write %s/a3-support-" % dest)
    assert not dest.exists()
    assert result["manifest"]["hosts"]["p1"]["status"] == "unreachable"


def test_archive_at_a_named_path_and_refusals(run, tmp_path):
    named = tmp_path / "case-42.tar.gz"
    result, status = run(archive_args(named))
    assert status == 0 and result["path"] == str(named) and named.exists()
    assert all(name.startswith("case-42/") for name in members(named))
    result, status = run(archive_args("relative/dir"))
    assert status == 1 and "dest must be an absolute path" in result["msg"]
    blocked = tmp_path / "file"
    blocked.write_text("")
    result, status = run(archive_args(blocked / "sub"))
    assert status == 1 and result["msg"].startswith("cannot write the support archive under %s" % (blocked / "sub"))


def test_archive_name_and_a_name_that_would_escape_the_host_directory():
    now = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    assert support_bundle.archive_path("/x", now) == ("/x/a3-support-20260102T030405Z.tar.gz", "20260102T030405Z")
    entry, files = support_bundle.host_entry("p0", node_result("data", name="../../etc/cron.d/x"), [])
    assert entry["items"][0]["name"] == "invalid/0" and list(files) == ["invalid/0"]


# --- documentation and the playbook ---------------------------------------------------------------------------------

def test_the_documentation_matches_the_argument_spec(module_spec, docs_match_spec):
    docs, spec, kwargs = module_spec("support_bundle")
    docs_match_spec(docs, spec)
    assert kwargs["supports_check_mode"] is True
    assert spec["secrets"]["no_log"] is True and spec["commands"]["options"]["stdin"]["no_log"] is True
    for option in ("commands", "files"):
        documented = docs["DOCUMENTATION"]["options"][option]["suboptions"]
        assert sorted(documented) == sorted(spec[option]["options"])
        for name, sub in spec[option]["options"].items():
            assert documented[name].get("type", "str") == sub.get("type", "str")
            assert bool(documented[name].get("required")) == bool(sub.get("required"))


def _load(path):
    return yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))


def _plays():
    return [p for p in _load("playbooks/collect.yml") if "hosts" in p]


def test_the_playbook_falls_back_to_the_roles_own_defaults():
    """collect.yml does not load the etcd, vllm, proxy, hugepages and preflight roles: each fallback it writes must be
    that role's default, or it would read a unit, log or file that does not exist."""
    text = (ROOT / "playbooks" / "collect.yml").read_text(encoding="utf-8")
    defaults = {role: _load("roles/%s/defaults/main.yml" % role)
                for role in ("etcd", "vllm", "hugepages", "preflight", "proxy")}
    proxy_vars = _load("roles/proxy/vars/main.yml")
    expected = {
        "etcd_service_name": defaults["etcd"]["etcd_service_name"],
        "vllm_log_file": defaults["vllm"]["vllm_log_file"],
        "hugepages_sysctl_file": defaults["hugepages"]["hugepages_sysctl_file"],
        "preflight_hccn_tool_path": defaults["preflight"]["preflight_hccn_tool_path"],
        "preflight_npu_smi_path": defaults["preflight"]["preflight_npu_smi_path"],
        "preflight_hccn_conf": defaults["preflight"]["preflight_hccn_conf"],
        "preflight_driver_version_file": defaults["preflight"]["preflight_driver_version_file"],
        "preflight_cann_version_file": defaults["preflight"]["preflight_cann_version_file"],
        "etcd_tls_server_dir": defaults["etcd"]["etcd_tls_server_dir"],
        "proxy_secrets_name": proxy_vars["proxy_secrets_name"],
    }
    for name, value in expected.items():
        assert re.findall(r"\b%s\s*\|\s*default\('([^']*)'\)" % name, text) == [value], name
    assert re.findall(r"\bpreflight_hccn_timeout\s*\|\s*default\((\d+)\)", text) == [
        str(defaults["preflight"]["preflight_hccn_timeout"])]
    assert set(re.findall(r"\bpreflight_npu_smi_timeout\s*\|\s*default\((\d+)\)", text)) == {
        str(defaults["preflight"]["preflight_npu_smi_timeout"])}
    assert defaults["proxy"]["proxy_container_name"] == "{{ container_name }}_proxy"
    assert "proxy_container_name | default(container_name ~ '_proxy')" in text
    # the engines' key file is excluded by its path too (roles/vllm/vars/main.yml)
    assert _load("roles/vllm/vars/main.yml")["vllm_api_key_file"] == "{{ a3_host_work_dir }}/vllm_api_key"
    assert '"{{ a3_host_work_dir }}/vllm_api_key"' in text


def test_the_playbook_survives_a_node_down_and_hides_its_secrets():
    tasks = {t["name"]: t for t in _plays()[0]["tasks"]}
    read = next(t for t in tasks.values() if "ascend.vllm_pd.support_bundle" in t and
                t["ascend.vllm_pd.support_bundle"]["state"] == "collect")
    assert read["ignore_unreachable"] is True and read["failed_when"] is False and read["no_log"] is True
    write = next(t for t in tasks.values() if "ascend.vllm_pd.support_bundle" in t and
                 t["ascend.vllm_pd.support_bundle"]["state"] == "archive")
    assert write["delegate_to"] == "localhost" and write["run_once"] is True and write["no_log"] is True
    for task in tasks.values():
        if "collect_secret" in json.dumps(task) or "collect_node" in json.dumps(task):
            assert task.get("no_log") is True or "debug" in json.dumps(task), task["name"]
    text = (ROOT / "playbooks" / "collect.yml").read_text(encoding="utf-8")
    # the admin token reaches curl on its stdin only, never in an argv
    for line in text.splitlines():
        if "argv" in line:
            assert "proxy_admin_token" not in line and "vllm_api_key" not in line
    assert "-K, \"-\"" in text


def test_the_readme_lists_the_playbook():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`playbooks/collect.yml`" in readme and "### Support bundle" in readme
    assert "support_bundle_dir" in readme
