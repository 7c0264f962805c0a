# -*- coding: utf-8 -*-
"""The action plugin of ascend.vllm_pd.converge_state (plugins/action/converge_state.py), run as Ansible runs it
with the module call replaced by a recorder: a run of a part (--tags, --skip-tags, --limit) neither compares nor
records and calls no module; a whole run hands the module the digest of the run's inputs, which follows every
input (the collection's files, the prefill/decode hosts' collection variables and ansible_host, the controller
files those name) and nothing else."""
from __future__ import annotations

from collections.abc import Mapping
from unittest import mock

import pytest

pytest.importorskip("ansible.plugins.action")

from ansible.playbook.play_context import PlayContext  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.ascend.vllm_pd.plugins.action import converge_state  # noqa: E402
from ansible_collections.ascend.vllm_pd.plugins.module_utils._converge_state import digest  # noqa: E402


class FakeTask:
    action = "ascend.vllm_pd.converge_state"
    async_val = 0

    def __init__(self, args, check_mode=False):
        self.args = args
        self.check_mode = check_mode


@pytest.fixture
def collection(tmp_path, monkeypatch):
    """A stand-in for the collection's tree (the real one changes while other work goes on)."""
    root = tmp_path / "collection"
    for rel, text in (("roles/vllm/tasks/main.yml", "---\n"), ("plugins/filter/x.py", "X = 1\n"),
                      ("playbooks/site.yml", "---\n"), ("docs/README.md", "not executed\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.setattr(converge_state, "COLLECTION_ROOT", str(root))
    return root


@pytest.fixture
def run(collection):
    """``run(args, task_vars, check_mode=False)`` -> (the action's result, the module calls)."""
    def call(args, task_vars, check_mode=False, module_result=None):
        action = converge_state.ActionModule(FakeTask(args, check_mode), mock.MagicMock(), PlayContext(), None, None,
                                             None)
        calls = []

        def execute_module(module_name=None, module_args=None, task_vars=None, **_kwargs):
            calls.append({"name": module_name, "args": dict(module_args)})
            return dict(module_result or {"changed": False, "in_sync": True, "reasons": []})
        with mock.patch.object(action, "_execute_module", side_effect=execute_module):
            return action.run(task_vars=task_vars), calls
    return call


def task_vars(**overrides):
    """Two prefill hosts and one decode host, a host outside both groups, variables in and out of the inputs."""
    hostvars = {
        "p0": {"ansible_host": "10.0.0.1", "vllm_api_port": 6700, "a3_self": {"index": 0}, "ansible_facts": {"x": 1},
               "inventory_hostname": "p0"},
        "p1": {"ansible_host": "10.0.0.2", "vllm_api_port": 6700, "proxy_port": 8000},
        "d0": {"ansible_host": "10.0.0.3", "yuanrong_worker_port": 18481},
        "monitor": {"ansible_host": "10.0.0.9", "vllm_api_port": 1},
    }
    out = {"groups": {"prefill": ["p0", "p1"], "decode": ["d0"], "monitoring": ["monitor"]},
           "hostvars": hostvars, "ansible_version": {"full": "2.19.4"},
           "ansible_run_tags": ["all"], "ansible_skip_tags": [], "ansible_limit": None}
    out.update(overrides)
    return out


@pytest.mark.parametrize("overrides, reasons", [
    ({"ansible_run_tags": ["vllm_run"]}, ["the run has --tags vllm_run"]),
    ({"ansible_skip_tags": ["verify"]}, ["the run has --skip-tags verify"]),
    ({"ansible_limit": "p0"}, ["the run has --limit p0"]),
    ({"ansible_run_tags": ["run", "verify"], "ansible_limit": "prefill"},
     ["the run has --tags run,verify", "the run has --limit prefill"]),
])
def test_a_run_of_a_part_neither_compares_nor_records(run, overrides, reasons):
    result, calls = run({}, task_vars(**overrides))
    assert calls == []
    assert result == {"changed": False, "whole_run": False, "in_sync": False, "reasons": reasons, "digest": ""}


def test_a_whole_run_hands_the_module_the_digest_of_its_inputs(run, collection):
    result, calls = run({"record": "/var/lib/x/converge.json"}, task_vars())
    inputs = converge_state.run_inputs(task_vars())
    assert [c["name"] for c in calls] == ["ascend.vllm_pd.converge_state"]
    assert calls[0]["args"] == {"record": "/var/lib/x/converge.json", "digest": digest(inputs)}
    assert result == {"changed": False, "in_sync": True, "reasons": [], "whole_run": True}
    # what the digest is made of: the prefill and decode hosts' inputs only, the collection's executed tree
    assert inputs["hosts"] == {"d0": {"ansible_host": "10.0.0.3", "yuanrong_worker_port": 18481},
                               "p0": {"ansible_host": "10.0.0.1", "vllm_api_port": 6700},
                               "p1": {"ansible_host": "10.0.0.2", "vllm_api_port": 6700, "proxy_port": 8000}}
    assert inputs["groups"] == {"prefill": ["p0", "p1"], "decode": ["d0"]} and inputs["ansible"] == "2.19.4"
    assert sorted(inputs["collection"]) == ["playbooks/site.yml", "plugins/filter/x.py", "roles/vllm/tasks/main.yml"]


def test_a_digest_given_by_the_task_is_used_as_it_is(run):
    """(the inputs are not even read: no hostvars here)"""
    result, calls = run({"digest": "abc", "check": True}, {"ansible_run_tags": ["all"]})
    assert calls[0]["args"] == {"digest": "abc", "check": True} and result["whole_run"] is True


def test_check_mode_still_compares_through_the_module(run):
    result, calls = run({}, task_vars(), check_mode=True, module_result={"changed": True, "in_sync": False,
                                                                         "reasons": ["no record"]})
    assert len(calls) == 1 and result["reasons"] == ["no record"] and result["whole_run"] is True


def digest_of(run, variables):
    _result, calls = run({}, variables)
    return calls[0]["args"]["digest"]


def test_the_digest_follows_every_input_and_nothing_else(run, collection):
    base = digest_of(run, task_vars())
    assert digest_of(run, task_vars()) == base
    changed = task_vars()
    changed["hostvars"]["d0"]["yuanrong_worker_port"] = 18482
    assert digest_of(run, changed) != base
    moved = task_vars()
    moved["hostvars"]["p1"]["ansible_host"] = "10.0.0.22"
    assert digest_of(run, moved) != base
    assert digest_of(run, task_vars(groups={"prefill": ["p1", "p0"], "decode": ["d0"]})) != base
    assert digest_of(run, task_vars(ansible_version={"full": "2.19.5"})) != base
    # not inputs: facts, the topology fact, variables of other prefixes, hosts outside prefill/decode
    same = task_vars()
    same["hostvars"]["p0"].update(ansible_facts={"x": 2}, a3_self={"index": 9}, other_port=1, a3_managed_files=["/x"])
    same["hostvars"]["monitor"]["vllm_api_port"] = 2
    assert digest_of(run, same) == base
    (collection / "roles" / "vllm" / "tasks" / "main.yml").write_text("---\n# changed\n")
    assert digest_of(run, task_vars()) != base
    base = digest_of(run, task_vars())
    (collection / "docs" / "README.md").write_text("changed, never executed\n")
    assert digest_of(run, task_vars()) == base


def test_controller_files_named_by_src_variables_are_inputs(run, tmp_path):
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "a.patch").write_text("one\n")
    archive = tmp_path / "image.tar"
    archive.write_text("image\n")
    variables = task_vars()
    variables["hostvars"]["p0"].update(patches_src_dir=str(patches), container_image_src=str(archive),
                                       container_missing_src=str(tmp_path / "absent"))
    inputs = converge_state.run_inputs(variables)
    assert sorted(inputs["controller_files"]) == [str(archive), str(patches)]
    assert list(inputs["controller_files"][str(patches)]) == ["a.patch"]
    base = digest_of(run, variables)
    (patches / "a.patch").write_text("two\n")
    assert digest_of(run, variables) != base
    base = digest_of(run, variables)
    archive.write_text("image 2\n")
    assert digest_of(run, variables) != base


class Lazy(Mapping):
    """A host's variables as hostvars gives them: templated on access, which may fail."""

    def __init__(self, data, broken=()):
        self._data, self._broken = data, broken

    def __getitem__(self, key):
        if key in self._broken:
            raise ValueError("'undefined_thing' is undefined")
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


def test_host_values_are_plain_data_and_an_untemplatable_one_is_an_input_as_it_is():
    hostvars = {"p0": Lazy({"vllm_env": {"A": 1, 2: [True, None, 1.5, ("x", b"y")]}, "vllm_bad": "{{ x }}",
                            "not_an_input": 1}, broken=("vllm_bad",))}
    assert converge_state.host_inputs(hostvars, "p0") == {
        "vllm_env": {"A": 1, "2": [True, None, 1.5, ["x", "y"]]},
        "vllm_bad": "not templated: 'undefined_thing' is undefined"}
