# -*- coding: utf-8 -*-
"""plugins/action/archive_install.py: the one archive install of the etcd and monitoring roles, run through the
action's run() on this machine as the node.

The task, the connection and the loader are stand-ins; every module the action calls (ansible.builtin.file,
ansible.builtin.get_url, ascend.vllm_pd.archive_install) runs for real, as a script with its JSON arguments, the
way Ansible's debug entry point runs one. A download is a file:// URL."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("ansible.plugins.action")

from ansible.errors import AnsibleActionFail  # noqa: E402
from ansible.parsing.dataloader import DataLoader  # noqa: E402

from ansible_collections.ascend.vllm_pd.plugins.action import archive_install  # noqa: E402
from ansible_collections.ascend.vllm_pd.plugins.action.archive_install import ActionModule  # noqa: E402

# run as python -c (a module's own directory first on sys.path would hide the standard library's copy and tempfile)
MODULES = {
    "ascend.vllm_pd.archive_install": "ansible_collections.ascend.vllm_pd.plugins.modules.archive_install",
    "ansible.builtin.get_url": "ansible.modules.get_url",
    "ansible.builtin.file": "ansible.modules.file",
}
NAME = "etcd-v3.5.12-linux-amd64"
ETCD = b"\x7fELF etcd 3.5.12"
ETCDCTL = b"\x7fELF etcdctl 3.5.12"
PIN = "etcd_checksums['v3.5.12']['amd64']"


def make_archive(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return path


def sha(path):
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Shell:
    def __init__(self, tmpdir):
        self.tmpdir = tmpdir

    @staticmethod
    def join_path(*parts):
        return os.path.join(*parts)


class Connection:
    """The node is this machine: put_file copies, and records what was sent."""

    def __init__(self, tmpdir):
        self._shell = Shell(tmpdir)
        self.sent = []

    def put_file(self, local, remote):
        self.sent.append((local, remote))
        shutil.copyfile(local, remote)


class Task:
    def __init__(self, args, check_mode, search_path):
        self.args = args
        self.check_mode = check_mode
        self.async_val = 0
        self.action = "ascend.vllm_pd.archive_install"
        self._search_path = search_path

    def get_search_path(self):
        return [self._search_path]


class Node:
    """The paths of one test: the release (controller or web server), the node's temporary and cache directories,
    where the binaries go; and the action's module calls, run for real."""

    def __init__(self, tmp_path):
        self.root = tmp_path
        self.release = make_archive(tmp_path / (NAME + ".tar.gz"), {
            NAME + "/etcd": ETCD, NAME + "/etcdctl": ETCDCTL, NAME + "/README.md": b"docs\n"})
        self.url = self.release.as_uri()
        self.cache = tmp_path / "node" / "var" / "cache" / "ascend-vllm-pd"
        self.bin = tmp_path / "node" / "usr" / "local" / "bin"
        self.module_tmp = tmp_path / "module-tmp"
        self.module_tmp.mkdir()
        self.calls = []
        self.removed = []

    def members(self):
        return [{"name": NAME + "/" + n, "dest": str(self.bin / n), "mode": "0755"} for n in ("etcd", "etcdctl")]

    def execute_module(self, check_mode):
        def run(module_name=None, module_args=None, task_vars=None, **_):
            self.calls.append((module_name, dict(module_args)))
            params = dict(module_args, _ansible_check_mode=check_mode, _ansible_diff=False,
                          _ansible_remote_tmp=str(self.module_tmp), _ansible_keep_remote_files=False)
            args_file = self.root / "args.json"
            args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            proc = subprocess.run([sys.executable, "-c", "import runpy; runpy.run_module(%r, run_name='__main__')"
                                   % MODULES[module_name], str(args_file)], capture_output=True, text=True, env=env,
                                  timeout=120, check=False)
            try:
                result = json.loads(proc.stdout)
            except ValueError:
                raise AssertionError("%s printed no JSON: %s %s" % (module_name, proc.stdout, proc.stderr))
            result.pop("invocation", None)
            return result
        return run

    def action(self, args, check_mode=False):
        tmpdir = self.root / "node" / "tmp" / "ansible-tmp-1"
        tmpdir.mkdir(parents=True, exist_ok=True)
        self.connection = Connection(str(tmpdir))
        action = ActionModule(Task(args, check_mode, str(self.root)), self.connection, None, DataLoader(), None)
        action._execute_module = self.execute_module(check_mode)
        action._fixup_perms2 = lambda paths, *a, **k: None
        action._remove_tmp_path = lambda path, *a, **k: self.removed.append(path)
        return action

    def run(self, args, check_mode=False):
        return self.action(dict(args), check_mode).run(task_vars={"inventory_hostname": "p0"})

    def modules(self):
        return [call[0].rsplit(".", 1)[-1] for call in self.calls]


@pytest.fixture
def node(tmp_path, monkeypatch):
    slept = []

    class Time:  # the action's clock only: the retries' delays are recorded, not waited
        sleep = staticmethod(slept.append)
    monkeypatch.setattr(archive_install, "time", Time)
    n = Node(tmp_path)
    n.slept = slept
    return n


def download_args(node, **extra):
    return dict({"url": node.url, "download_dir": str(node.cache), "checksum": sha(node.release),
                 "checksum_name": PIN, "members": node.members()}, **extra)


def test_url_downloads_into_the_cache_then_installs_only_the_binaries(node):
    result = node.run(download_args(node))
    assert not result.get("failed"), result
    assert result["changed"] and sorted(result["changed_paths"]) == [str(node.bin / "etcd"), str(node.bin / "etcdctl")]
    assert (node.bin / "etcd").read_bytes() == ETCD and (node.bin / "etcdctl").read_bytes() == ETCDCTL
    kept = node.cache / (NAME + ".tar.gz")
    assert result["download"]["dest"] == str(kept) and kept.read_bytes() == node.release.read_bytes()
    assert oct(kept.stat().st_mode & 0o777) == "0o644" and oct(node.cache.stat().st_mode & 0o777) == "0o755"
    assert result["download"]["changed"] and result["download"]["attempts"] == 1
    assert node.modules() == ["file", "get_url", "archive_install"]
    # get_url checked the download; the module reads the node's copy without checking it again
    install = node.calls[-1][1]
    assert install["archive"] == str(kept) and install["checksum"] == "" and "url" not in install
    assert node.connection.sent == []  # nothing from the controller


def test_a_second_run_downloads_nothing_and_changes_nothing(node):
    node.run(download_args(node))
    kept = node.cache / (NAME + ".tar.gz")
    before = kept.stat().st_mtime_ns
    again = node.run(download_args(node))
    assert not again["changed"] and again["changed_paths"] == []
    assert not again["download"]["changed"] and again["download"]["msg"] == "file already exists"
    assert kept.stat().st_mtime_ns == before


def test_a_binary_that_differs_is_replaced_and_reported_without_a_download(node):
    node.run(download_args(node))
    (node.bin / "etcdctl").write_bytes(b"\x7fELF etcdctl 3.4.23")
    result = node.run(download_args(node))
    assert result["changed"] and result["changed_paths"] == [str(node.bin / "etcdctl")]
    assert not result["download"]["changed"]  # changed is the install's, what the roles' restarts read


def test_the_release_checksum_file_pins_a_download(node):
    sums = node.root / "sha256sums.txt"
    sums.write_text("%s  %s.tar.gz\n" % (sha(node.release).split(":")[1], NAME))
    result = node.run(download_args(node, checksum="sha256:" + sums.as_uri()))
    assert not result.get("failed") and result["changed"], result


def test_a_download_that_does_not_match_the_pin_is_retried_then_refused(node):
    wrong = "sha256:" + "ab" * 32
    result = node.run(download_args(node, checksum=wrong, download_retries=2, download_delay=7))
    assert result["failed"] and not result["changed"]
    assert result["msg"].startswith("download of %s failed after 3 attempt(s): The checksum for " % node.url)
    assert "did not match %s" % wrong.split(":")[1] in result["msg"]
    assert node.modules() == ["file", "get_url", "get_url", "get_url"]  # no install from a wrong archive
    assert node.slept == [7, 7]
    assert not (node.cache / (NAME + ".tar.gz")).exists() and not node.bin.exists()


def test_a_download_that_keeps_failing_names_the_url(node):
    missing = (node.root / "nowhere.tar.gz").as_uri()
    result = node.run(download_args(node, url=missing, download_retries=0))
    assert result["failed"] and result["download"]["attempts"] == 1 and node.slept == []
    assert result["msg"].startswith("download of %s failed after 1 attempt(s): " % missing)


def test_check_mode_reports_the_binaries_and_writes_nothing(node):
    node.run(download_args(node))
    (node.bin / "etcd").write_bytes(b"old")
    (node.bin / "etcdctl").unlink()
    result = node.run(download_args(node), check_mode=True)
    assert result["changed"] and sorted(result["changed_paths"]) == [str(node.bin / "etcd"), str(node.bin / "etcdctl")]
    assert (node.bin / "etcd").read_bytes() == b"old" and not (node.bin / "etcdctl").exists()


def test_check_mode_creates_no_download_directory(node):
    result = node.run(download_args(node), check_mode=True)
    assert not node.cache.exists() and not node.bin.exists()
    # the archive it would download is not on the node: the install cannot read it (as before, a first install
    # cannot be planned in check mode)
    assert result["failed"], result


def test_src_with_another_archive_is_refused_before_any_transfer(node):
    other = make_archive(node.root / "other.tar.gz", {NAME + "/etcd": b"not etcd"})
    with pytest.raises(AnsibleActionFail) as e:
        node.run({"src": str(other), "checksum": sha(node.release), "checksum_name": PIN, "members": node.members()})
    want = "%s has sha256 %s, but %s is %s" % (other, sha(other).split(":")[1], PIN, sha(node.release))
    assert str(e.value).startswith(want)
    assert str(e.value).endswith("use the official archive or correct %s" % PIN)
    assert node.connection.sent == [] and node.calls == []


def test_src_is_checked_sent_installed_and_its_copy_removed(node):
    result = node.run({"src": str(node.release), "checksum": sha(node.release), "checksum_name": PIN,
                       "members": node.members()})
    assert result["changed"] and (node.bin / "etcd").read_bytes() == ETCD
    remote = os.path.join(node.connection._shell.tmpdir, "archive")
    assert node.connection.sent == [(str(node.release), remote)]
    assert node.modules() == ["archive_install"] and node.calls[0][1]["archive"] == remote
    assert node.calls[0][1]["checksum"] == ""  # checked on the controller
    assert node.removed == [node.connection._shell.tmpdir]


def test_src_in_check_mode_writes_nothing(node):
    result = node.run({"src": str(node.release), "checksum": "", "members": node.members()}, check_mode=True)
    assert result["changed"] and len(result["changed_paths"]) == 2 and not node.bin.exists()


def test_a_missing_src_is_named(node):
    with pytest.raises(AnsibleActionFail, match="nowhere.tar.gz"):
        node.run({"src": str(node.root / "nowhere.tar.gz"), "members": node.members()})


def test_archive_on_the_node_is_checked_by_the_module(node):
    node.cache.mkdir(parents=True)
    kept = shutil.copy(node.release, node.cache / "etcd.tar.gz")
    wrong = "sha256:" + "cd" * 32
    result = node.run({"archive": str(kept), "checksum": wrong, "checksum_name": PIN, "members": node.members()})
    assert result["failed"] and "but %s is %s" % (PIN, wrong) in result["msg"] and not node.bin.exists()
    assert node.modules() == ["archive_install"]
    good = node.run({"archive": str(kept), "checksum": sha(kept), "members": node.members()})
    assert good["changed"] and (node.bin / "etcdctl").read_bytes() == ETCDCTL


@pytest.mark.parametrize("given", [("src", "url"), ("url", "archive"), ("src", "archive")])
def test_one_source_only(node, given):
    values = {"src": str(node.release), "url": node.url, "archive": str(node.release)}
    with pytest.raises(AnsibleActionFail, match="not %s and %s" % given):
        node.run(dict({name: values[name] for name in given}, members=node.members()))
    assert node.calls == []


@pytest.mark.parametrize("extra, says", [
    ({"download_retries": "three"}, "download_retries must be a whole number of retries"),
    ({"download_delay": -1}, "download_delay must be at least 0"),
    ({"url": "https://example.invalid/releases/"}, "names no file"),
])
def test_download_options_are_checked(node, extra, says):
    with pytest.raises(AnsibleActionFail, match=says):
        node.run(download_args(node, **extra))
    assert node.calls == []


def test_the_module_alone_wants_the_node_copy(node):
    """Without the action (a direct module call), src and url are not the module's to handle."""
    result = node.execute_module(False)(module_name="ascend.vllm_pd.archive_install",
                                        module_args={"url": node.url, "members": node.members()})
    assert result["failed"]
    assert result["msg"] == ("url %s is downloaded by the action plugin (ascend.vllm_pd.archive_install), which "
                             "passes the node's copy as archive" % node.url)
