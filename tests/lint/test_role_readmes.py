# -*- coding: utf-8 -*-
"""Every role has a README.md (Galaxy's importer refuses a role without one), made by hacking/role_readmes.py from
the role's meta/argument_specs.yml, defaults/main.yml, meta/main.yml, task files and the playbooks that run it.
A README that differs from what the generator makes now fails here, naming the role and the command that
regenerates it, so a README cannot drift from the specification it documents."""
from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "hacking" / "role_readmes.py"


def _generator():
    spec = importlib.util.spec_from_file_location("role_readmes", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()
ROLES = gen.roles(ROOT)


def test_every_role_directory_is_covered():
    assert ROLES == sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
    assert len(ROLES) >= 15


@pytest.mark.parametrize("role", ROLES)
def test_role_readme_is_what_the_generator_makes(role):
    path = ROOT / "roles" / role / "README.md"
    want = gen.render(role, ROOT)
    assert path.is_file(), "roles/%s/README.md is missing: run `%s`" % (role, gen.COMMAND)
    have = path.read_text(encoding="utf-8")
    diff = "\n".join(list(difflib.unified_diff(have.splitlines(), want.splitlines(), "README.md", "generated",
                                               lineterm=""))[:40])
    assert have == want, ("roles/%s/README.md differs from what hacking/role_readmes.py makes from the role's spec, "
                          "defaults, meta, tasks and the playbooks: run `%s`\n%s" % (role, gen.COMMAND, diff))


def test_internal_roles_exist_and_public_roles_are_run_by_a_playbook():
    """The one hand-written fact, whether a role is internal, holds: each internal role exists, and each public role
    is named by one of the collection's playbooks (an operator's play lists it the same way)."""
    assert set(gen.INTERNAL) <= set(ROLES), set(gen.INTERNAL) - set(ROLES)
    unused = [role for role in ROLES if role not in gen.INTERNAL and not gen.playbooks_running(ROOT, role)]
    assert not unused, "public roles no playbook runs (internal? add them to INTERNAL with the reason): %s" % unused


def test_markup_becomes_markdown():
    assert gen.markdown("Not C(/). Use I(this) or B(that), O(x_port) = V(8080).") == \
        "Not `/`. Use *this* or **that**, `x_port` = `8080`."
    assert gen.markdown("See L(the guide,https://example.invalid/a) and U(https://example.invalid/b).") == \
        "See [the guide](https://example.invalid/a) and <https://example.invalid/b>."
    # the argument of C() ends at the first unescaped parenthesis; braces and pipes stay as they are
    assert gen.markdown("Defaults to C({{ {'a': b} if b | length > 0 else {} }}).") == \
        "Defaults to `{{ {'a': b} if b | length > 0 else {} }}`."
    assert gen.markdown(r"C(f(x\)) and C(a`b)") == "`f(x)` and ``a`b``"
    # plain text renders as itself: no HTML tag, emphasis, strikethrough or link made from it
    assert gen.markdown("vllm_<side>_env, *:* rwm, a ~ b, [1, 2]") == \
        "vllm\\_\\<side\\>\\_env, \\*:\\* rwm, a \\~ b, \\[1, 2\\]"
    assert gen.markdown(["One.", "Two\n  lines."]) == "One. Two lines."
    assert gen.paragraphs(["- not a list", "1. not a list either", "text"]) == \
        ["\\- not a list", "\\1. not a list either", "text"]
    # an uppercase word before a parenthesis is not markup
    assert gen.markdown("NPU (8) A(b") == "NPU (8) A(b"


def test_templated_role_names():
    assert gen.names_role("ascend.vllm_pd.vllm_{{ side }}", "vllm_prefill")
    assert not gen.names_role("ascend.vllm_pd.vllm_{{ side }}", "vllm")
    assert not gen.names_role("ascend.vllm_pd.{{ role }}", "vllm")
    assert gen.names_role("ascend.vllm_pd.proxy", "proxy") and not gen.names_role("proxy", "proxy")
    assert not gen.names_role("ascend.vllm_pd.proxy", "proxy_x")


def _role(root: Path, name: str, spec: dict, defaults: str, tasks: list) -> None:
    role = root / "roles" / name
    for sub in ("meta", "defaults", "tasks"):
        (role / sub).mkdir(parents=True, exist_ok=True)
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": spec}))
    (role / "meta" / "main.yml").write_text(yaml.safe_dump({"dependencies": [{"role": "ascend.vllm_pd.common"}]}))
    (role / "defaults" / "main.yml").write_text(defaults)
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump(tasks))


@pytest.fixture()
def tree(tmp_path):
    options = {"x_port": {"type": "int", "default": 8080, "description": "The port. At least 1."},
               "x_dir": {"type": "str", "default": "{{ a3_host_work_dir }}/x", "description": "Where. Not C(/)."},
               "x_list": {"type": "list", "elements": "str", "default": ["a", "b"], "description": "Some."},
               "x_env": {"type": "dict", "default": {"A": "1", "LONG": "y" * 70}, "description": "The env."},
               "x_side": {"type": "str", "required": True, "choices": ["prefill", "decode"],
                          "description": "The side."},
               "x_token": {"type": "str", "default": "", "no_log": True, "description": "A secret."}}
    spec = {"main": {"short_description": "Does x", "description": ["First.", "Second."], "options": options},
            "stop": {"short_description": "Stops x", "description": "Stop.", "options": options}}
    defaults = ("---\nx_port: 8080   # the port\nx_dir: \"{{ a3_host_work_dir }}/x\"\nx_list: [a, b]\n"
                "x_env:\n  A: \"1\"   # one\n  LONG: %s\n# the token\n\nx_token: \"\"\n" % ("y" * 70))
    _role(tmp_path, "xrole", spec, defaults,
          [{"name": "Call", "ansible.builtin.import_role": {"name": "ascend.vllm_pd.common"}, "tags": ["x_run"]},
           {"name": "Block", "block": [{"name": "In", "ansible.builtin.debug": {}, "tags": "run, always"}]}])
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "x.yml").write_text(yaml.safe_dump([{"hosts": "all", "roles": [
        {"role": "ascend.vllm_pd.xrole"}]}]))
    return tmp_path


def test_a_readme_shows_what_the_role_declares(tree):
    text = gen.render("xrole", tree)
    assert text.startswith("# ascend.vllm_pd.xrole\n")
    assert "**Public role**" in text and "Internal" not in text
    assert "- Run by: `playbooks/x.yml`." in text
    assert "- Its tasks call: [`ascend.vllm_pd.common`](../common/README.md)." in text
    assert "- Tags its tasks carry: `run`, `x_run`." in text
    assert "### main\n\n**Does x**\n\nFirst.\n\nSecond.\n\n### stop\n\n**Stops x**\n\nStop.\n" in text
    assert "## Options\n\nEvery entry point takes these options." in text   # one table for both entry points
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == ["x_dir", "x_env", "x_list", "x_port", "x_side", "x_token"]
    assert rows[0] == '| `x_dir` | str | `"{{ a3_host_work_dir }}/x"` |  | no | Where. Not `/`. |'
    assert rows[2] == "| `x_list` | list of str | `[a, b]` |  | no | Some. |"
    assert rows[3] == "| `x_port` | int | `8080` |  | no | The port. At least 1. |"
    assert rows[4] == "| `x_side` | str |  | `prefill`, `decode` | yes | The side. |"
    assert rows[5] == '| `x_token` | str | `""` |  | no | A secret. Not logged (no\\_log). |'
    # a long mapping is shown below the table as written in defaults/main.yml, its comments included
    assert "| `x_env` | dict | below the table |" in rows[1]
    assert "```yaml\nx_env:\n  A: \"1\"   # one\n  LONG: %s\n```" % ("y" * 70) in text
    assert "# the token" not in text
    gen.INTERNAL["xrole"] = "Called by other roles only."
    try:
        assert "**Internal role**: not meant to be listed in a play by operators. Called by other roles only." \
            in gen.render("xrole", tree)
    finally:
        del gen.INTERNAL["xrole"]


def test_a_drift_names_the_role(tree, capsys, monkeypatch):
    readme = tree / "roles" / "xrole" / "README.md"
    readme.write_text(gen.render("xrole", tree), encoding="utf-8")
    assert gen.stale(tree) == []
    spec_path = tree / "roles" / "xrole" / "meta" / "argument_specs.yml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["argument_specs"]["main"]["options"]["x_port"]["description"] = "Another port."
    spec_path.write_text(yaml.safe_dump(spec))
    assert gen.stale(tree) == ["xrole"]
    # the command line: --check names the role and changes nothing, the plain run rewrites it
    monkeypatch.setattr(gen, "ROOT", tree)
    before = readme.read_text(encoding="utf-8")
    assert gen.main(["--check"]) == 1
    assert "roles/xrole/README.md differs" in capsys.readouterr().out
    assert readme.read_text(encoding="utf-8") == before
    assert gen.main([]) == 0 and gen.stale(tree) == []
    (tree / "roles" / "xrole" / "defaults" / "main.yml").write_text("---\nx_port: 8081\n")
    assert gen.stale(tree) == ["xrole"]
