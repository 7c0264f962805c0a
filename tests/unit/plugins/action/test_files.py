# -*- coding: utf-8 -*-
"""The action plugin of ascend.vllm_pd.files (plugins/action/files.py), run as Ansible runs it: a task, a loader
and a templar of ansible-core, the module call replaced by a recorder. What the node's module gets (rendered
templates, read files, contents), what the action refuses before any module call, and the record of the files the
roles manage."""
from __future__ import annotations

import ast
from pathlib import Path
from unittest import mock

import pytest

pytest.importorskip("ansible.plugins.action")

from ansible.errors import AnsibleActionFail  # noqa: E402  pylint: disable=wrong-import-position
from ansible.parsing.dataloader import DataLoader  # noqa: E402  pylint: disable=wrong-import-position
from ansible.playbook.play_context import PlayContext  # noqa: E402  pylint: disable=wrong-import-position
from ansible.template import Templar  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.ascend.vllm_pd.plugins.action.files import ActionModule  # noqa: E402


class FakeTask:
    """What ActionBase reads of a task: its args, async and check mode, and the role's search path."""

    action = "ascend.vllm_pd.files"
    async_val = 0

    def __init__(self, args, search_path, check_mode=False):
        self.args = args
        self.check_mode = check_mode
        self._search_path = [str(p) for p in search_path]

    def get_search_path(self):
        return list(self._search_path)


@pytest.fixture
def role(tmp_path):
    """A role directory with templates/ and files/."""
    (tmp_path / "templates").mkdir()
    (tmp_path / "files").mkdir()
    return tmp_path


@pytest.fixture
def module_calls():
    """Every module call of the test's runs."""
    return []


@pytest.fixture
def run(role, module_calls):
    """``run(args, task_vars, check_mode=False, module_result=None)`` -> (the action's result, this run's module
    calls)."""
    def call(args, task_vars=None, check_mode=False, module_result=None):
        loader = DataLoader()
        loader.set_basedir(str(role))
        action = ActionModule(FakeTask(args, [role], check_mode), mock.MagicMock(), PlayContext(), loader,
                              Templar(loader=loader), None)
        calls = []
        module_calls.append(calls)

        def execute_module(module_name=None, module_args=None, task_vars=None, **_kwargs):
            calls.append({"name": module_name, "args": module_args, "task_vars": task_vars})
            return dict(module_result or {"changed": True, "changed_paths": [f["dest"] for f in module_args["files"]]})
        with mock.patch.object(action, "_execute_module", side_effect=execute_module):
            result = action.run(task_vars=task_vars if task_vars is not None else {})
        return result, calls
    return call


def test_a_template_is_rendered_on_the_controller_as_the_template_module_does(role, run):
    (role / "templates" / "unit.j2").write_text(
        "# {{ ansible_managed }}\n{% if engines %}\nExecStart={{ cmd }}\n{% endif %}\ndest={{ template_destpath }}\n"
        "{% include 'part.j2' %}\n")
    (role / "templates" / "part.j2").write_text("part of {{ name }}\n")
    files = [{"dest": "/etc/systemd/system/x.service", "template": "unit.j2", "mode": "0644"}]
    result, calls = run({"files": files, "root": "/render/p0"},
                        {"engines": True, "cmd": "/bin/true", "name": "x", "ansible_managed": "managed here"})
    assert [c["name"] for c in calls] == ["ascend.vllm_pd.files"]
    # trim_blocks (no line left by the if), the site's ansible_managed, the destination under root, the include
    # found beside the template
    assert calls[0]["args"] == {"root": "/render/p0", "files": [{
        "dest": "/etc/systemd/system/x.service", "mode": "0644",
        # (an included template's own last newline is not kept, the including one's is)
        "content": "# managed here\nExecStart=/bin/true\ndest=/render/p0/etc/systemd/system/x.service\npart of x\n"}]}
    assert result["changed"] is True and result["changed_paths"] == ["/etc/systemd/system/x.service"]


def test_includes_are_found_in_the_roles_templates_and_an_empty_result_is_an_empty_file(role, run, tmp_path):
    (role / "templates" / "sub").mkdir()
    (role / "templates" / "sub" / "unit.j2").write_text("{% include 'part.j2' %}|{% include 'near.j2' %}\n")
    (role / "templates" / "sub" / "near.j2").write_text("near")
    (role / "templates" / "part.j2").write_text("role's")
    (role / "templates" / "none.j2").write_text("{{ nothing }}")
    files = [{"dest": "/a", "template": "sub/unit.j2", "mode": "0644"},
             {"dest": "/b", "template": "none.j2", "mode": "0644"}]
    _result, calls = run({"files": files}, {"nothing": None, "ansible_search_path": [str(tmp_path / "play")]})
    assert [f["content"] for f in calls[0]["args"]["files"]] == ["role's|near\n", ""]


def test_ansible_managed_comes_from_the_configuration_when_the_site_sets_none(role, run):
    (role / "templates" / "t.j2").write_text("{{ ansible_managed }}|{{ template_path }}")
    _result, calls = run({"files": [{"dest": "/d", "template": "t.j2", "mode": "0644"}]}, {})
    managed, path = calls[0]["args"]["files"][0]["content"].split("|")
    assert managed == "Ansible managed" and path == "t.j2"


def test_a_role_file_is_sent_as_it_is_and_content_as_text(role, run):
    (role / "files" / "helper.py").write_bytes("print('{{ not templated }}') # é\n".encode("utf-8"))
    files = [{"dest": "/usr/local/bin/helper.py", "src": "helper.py", "mode": "0755", "template": None},
             {"dest": "/etc/x.json", "content": 42, "mode": 420, "validate": "python3 -m json.tool %s"},
             {"dest": "/etc/y", "content": "", "mode": "0600", "validate": ""}]
    _result, calls = run({"files": files}, {})
    assert calls[0]["args"]["files"] == [
        {"dest": "/usr/local/bin/helper.py", "mode": "0755", "content": "print('{{ not templated }}') # é\n"},
        {"dest": "/etc/x.json", "mode": "420", "content": "42", "validate": "python3 -m json.tool %s"},
        {"dest": "/etc/y", "mode": "0600", "content": ""}]


@pytest.mark.parametrize("files, needle", [
    (None, "files must be a list of dicts"),
    ("/etc/x", "files must be a list of dicts"),
    ([{"dest": "/a", "content": "", "mode": "0644"}, "/b"], "files must be a list of dicts"),
    ([{"content": "x", "mode": "0644"}], "each file needs dest, mode and exactly one of template, src, content; "
                                         "got content, mode"),
    ([{"dest": "/a", "content": "x"}], "got content, dest"),
    ([{"dest": "/a", "mode": "0644"}], "got dest, mode"),
    ([{"dest": "/a", "mode": "0644", "content": "x", "src": "y"}], "got content, dest, mode, src"),
    ([{}], "got nothing"),
])
def test_malformed_files_are_refused_before_any_module_call(run, module_calls, files, needle):
    with pytest.raises(AnsibleActionFail, match=needle):
        run({"files": files}, {})
    assert module_calls == [[]]


def test_a_missing_template_or_role_file_is_refused_without_a_module_call(role, run, module_calls):
    (role / "templates" / "ok.j2").write_text("ok")
    for bad in ({"template": "missing.j2"}, {"src": "missing.py"}):
        files = [{"dest": "/ok", "template": "ok.j2", "mode": "0644"}, dict(bad, dest="/bad", mode="0644")]
        with pytest.raises(AnsibleActionFail, match="missing"):
            run({"files": files}, {})
    assert module_calls == [[], []]
    run({"files": files[:1]}, {})
    assert [c["args"]["files"] for c in module_calls[2]] == [[{"dest": "/ok", "mode": "0644", "content": "ok"}]]


def test_check_mode_still_renders_and_calls_the_module_which_writes_nothing_itself(role, run):
    (role / "templates" / "t.j2").write_text("x={{ x }}\n")
    result, calls = run({"files": [{"dest": "/t", "template": "t.j2", "mode": "0644"}]}, {"x": 1}, check_mode=True,
                        module_result={"changed": True, "changed_paths": ["/t"]})
    assert calls[0]["args"]["files"][0]["content"] == "x=1\n"
    assert result["changed_paths"] == ["/t"]


def test_writes_on_the_node_are_added_to_the_managed_files_record(run):
    files = [{"dest": "/etc/%s" % name, "content": "", "mode": "0644"} for name in "hgfedcb"]
    result, _calls = run({"files": files}, {"ansible_facts": {"a3_managed_files": ["/etc/z", "/etc/b", "/etc/a"]}})
    # once each, sorted: the record of the converge compares it as it is
    assert result["ansible_facts"] == {"a3_managed_files": ["/etc/%s" % name for name in "abcdefghz"]}
    result, _calls = run({"files": files[:2]}, {})
    assert result["ansible_facts"] == {"a3_managed_files": ["/etc/g", "/etc/h"]}


def test_no_record_for_a_render_under_root_or_a_failed_write(run):
    files = [{"dest": "/etc/a", "content": "", "mode": "0644"}]
    result, _calls = run({"files": files, "root": "/tmp/render/p0"}, {})
    assert "ansible_facts" not in result
    result, _calls = run({"files": files}, {}, module_result={"failed": True, "msg": "no space left"})
    assert result["failed"] is True and result["msg"] == "no space left" and "ansible_facts" not in result


def _ansible_imports(path):
    tree = ast.parse(Path(path).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    names += ["%s.%s" % (n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
              for a in n.names]
    return [n for n in names if n.split(".")[0] == "ansible"]


@pytest.mark.parametrize("path", ["plugins/action/files.py", "plugins/modules/files.py",
                                  "plugins/module_utils/_files.py"])
def test_only_public_ansible_core_interfaces_are_imported(path):
    # a module or a name of ansible-core starting with _ (ansible._internal...) may change in any release
    root = Path(__file__).resolve().parents[4]
    private = [n for n in _ansible_imports(root / path) if any(part.startswith("_") for part in n.split("."))]
    assert private == [], private
    if path == "plugins/action/files.py":
        assert "ansible.template.generate_ansible_template_vars" in _ansible_imports(root / path)


def test_the_template_variables_are_those_of_the_template_module(role, run):
    (role / "templates" / "sub").mkdir()
    (role / "templates" / "sub" / "t.j2").write_text(
        "{{ template_path }}|{{ template_fullpath == role_dir ~ '/templates/sub/t.j2' }}|{{ template_destpath }}|"
        "{{ template_host is string }}|{{ template_uid is string }}|{{ template_mtime.year > 2000 }}|"
        "{{ template_run_date.year > 2000 }}")
    _result, calls = run({"files": [{"dest": "/etc/t", "template": "sub/t.j2", "mode": "0644"}], "root": "/r"},
                         {"role_dir": str(role)})
    assert calls[0]["args"]["files"][0]["content"] == "sub/t.j2|True|/r/etc/t|True|True|True|True"
