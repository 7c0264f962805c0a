# -*- coding: utf-8 -*-
"""Write roles/<role>/README.md of every role from what the role declares, so the READMEs cannot drift from it.

    python3 hacking/role_readmes.py          # (re)write every role's README.md
    python3 hacking/role_readmes.py --check  # change nothing; exit 1 naming each role whose README differs

Each README is made from the role's meta/argument_specs.yml (entry points, options, descriptions), its
defaults/main.yml (each option's default as shipped, a templated one as its template), meta/main.yml
(dependencies), its task files (the roles they call, the tags they carry) and the playbooks that run it.
Whether a role is internal is the one thing written here (INTERNAL, with the reason). The output is
deterministic: no dates, options sorted by name, entry points in the order of the spec.
tests/lint/test_role_readmes.py regenerates every README in memory and fails on any difference.
Standard library and PyYAML only; not shipped in the collection (galaxy.yml build_ignore: hacking).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
COLLECTION = "ascend.vllm_pd"
COMMAND = "python3 hacking/role_readmes.py"

# Roles operators do not list in a play of their own, and why. Every other role is public: a play lists it as
# ascend.vllm_pd.<role> (the collection's playbooks do; tests/lint/test_role_readmes.py checks that one of them
# runs each public role).
INTERNAL = {
    "common": "Every role of the collection depends on it (meta/main.yml) for the values the roles share and the "
              "topology fact; a play that needs only those lists it before its own tasks, as playbooks/collect.yml "
              "and playbooks/render.yml do.",
    "rolling": "The four steps of playbooks/rolling_restart.yml, which runs it on one DP group at a time.",
    "supervise": "The roles yuanrong and vllm import it before they write their systemd units and when they stop "
                 "them; a play that needs only the unit names and the helper's path uses its entry point names.",
    "vllm": "The shared implementation that vllm_prefill and vllm_decode import with vllm_side set: list those to "
            "deploy one side (playbooks/deploy.yml applies this role to both groups in one play, vllm_side from "
            "each host's group).",
}
SHARED = "common"
# Defaults longer than this (or multi-line) are shown as YAML below the table instead of in it.
INLINE_MAX = 60
# Ansible's documentation markup (C(), I(), L(), ...): the names that take one argument, the one that takes two.
_MARKUP = re.compile(r"(?<![A-Za-z0-9_])(RV|HORIZONTALLINE|[BCEILMOPUV])(\()?")
_ESCAPE = re.compile(r"([\\`*<>\[\]~])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _load(path: Path):
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def roles(root: Path = ROOT) -> list:
    """Every role directory under roles/."""
    return sorted(p.name for p in (root / "roles").iterdir() if p.is_dir() and (p / "tasks").is_dir())


# --- Markdown ---------------------------------------------------------------------------------------------------

def _text(text: str) -> str:
    """Plain text as Markdown that renders as the same text (no emphasis, no HTML tag, no link)."""
    return _ESCAPE.sub(lambda m: "\\" + m.group(0), text)


def code(text: str) -> str:
    """A code span holding text as is (a longer fence when the text holds backticks)."""
    text = str(text)
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return fence + pad + text + pad + fence


def _argument(text: str, start: int) -> tuple:
    """(argument, end) of a markup call whose argument starts at start: up to the first unescaped ')'
    (a backslash escapes ')' and itself), or (None, start) when it is never closed."""
    out = []
    i = start
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] in "\\)":
            out.append(text[i + 1])
            i += 2
            continue
        if char == ")":
            return "".join(out), i + 1
        out.append(char)
        i += 1
    return None, start


def _name_of(reference: str) -> str:
    """O(ns.coll.plugin#type:opt=value) and RV(...) name an option of another plugin: keep what follows."""
    return reference.split("#", 1)[1].split(":", 1)[-1] if "#" in reference else reference


def markdown(text) -> str:
    """One description (a string or a list of them) as Markdown on one line, Ansible's markup converted:
    C(), V(), O(), RV(), E(), P(), M() as code, I() italic, B() bold, L(text,url) and U(url) links."""
    if isinstance(text, list):
        return " ".join(markdown(part) for part in text)
    text = " ".join(str(text).split())
    out = []
    pos = 0
    for match in _MARKUP.finditer(text):
        if match.start() < pos:
            continue
        name = match.group(1)
        if name == "HORIZONTALLINE":
            out.append(_text(text[pos:match.start()]))
            pos = match.end()
            continue
        if not match.group(2):
            continue
        argument, end = _argument(text, match.end())
        if argument is None:
            continue
        out.append(_text(text[pos:match.start()]))
        if name in ("C", "V", "E", "P", "M"):
            out.append(code(argument))
        elif name in ("O", "RV"):
            out.append(code(_name_of(argument)))
        elif name == "I":
            out.append("*%s*" % _text(argument))
        elif name == "B":
            out.append("**%s**" % _text(argument))
        elif name == "U":
            out.append("<%s>" % argument)
        else:   # L(text,url)
            label, _comma, url = argument.rpartition(",")
            out.append("[%s](%s)" % (_text(label.strip()), url.strip()))
        pos = end
    out.append(_text(text[pos:]))
    return "".join(out).strip()


def paragraphs(text) -> list:
    """A description as Markdown paragraphs (a list of sentences: one paragraph each)."""
    parts = text if isinstance(text, list) else [text]
    out = []
    for part in parts:
        line = markdown(part)
        if re.match(r"[-+#>=]|\d+[.)]", line):   # would start a list, a heading or a quote
            line = "\\" + line
        if line:
            out.append(line)
    return out


def _cell(text: str) -> str:
    """A table cell: a pipe, even inside a code span, must be escaped."""
    return text.replace("|", "\\|")


# --- What the role declares ------------------------------------------------------------------------------------

def _tasks(data):
    """Every task of a task file, blocks included."""
    for task in data if isinstance(data, list) else []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _role_calls(task: dict):
    for action in ("import_role", "include_role"):
        args = task.get("ansible.builtin." + action, task.get(action))
        if isinstance(args, dict) and args.get("name"):
            yield str(args["name"])


def _tags(task: dict) -> list:
    tags = task.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    return [str(t) for t in tags]


def task_facts(role_dir: Path) -> tuple:
    """(roles the task files call, tags they carry but always), each sorted and unique."""
    calls, tags = set(), set()
    for path in sorted((role_dir / "tasks").glob("*.yml")):
        for task in _tasks(_load(path)):
            calls.update(_role_calls(task))
            tags.update(_tags(task))
    return sorted(calls), sorted(tags - {"always", "never"})


def dependencies(role_dir: Path) -> list:
    meta = _load(role_dir / "meta" / "main.yml") or {}
    return [str(d.get("role") if isinstance(d, dict) else d) for d in meta.get("dependencies") or []]


def _strings(node):
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


def names_role(name: str, role: str) -> bool:
    """Whether a string names the role by its full name: exactly, or as a template whose text before the first
    {{ }} is the collection and the start of a role name ("ascend.vllm_pd.vllm_{{ side }}" names vllm_prefill
    and vllm_decode)."""
    prefix = COLLECTION + "."
    if not name.startswith(prefix):
        return False
    rest = name[len(prefix):]
    if "{{" not in rest:
        return rest == role
    if rest.startswith("{{"):   # any role at all: names none in particular
        return False
    pattern = ".+".join(re.escape(part) for part in re.split(r"\{\{.*?\}\}", rest))
    return re.fullmatch(pattern, role) is not None


def playbooks_running(root: Path, role: str) -> list:
    """The collection's playbooks that name the role by its full name (roles:, import_role, include_role, a loop
    of role names): any string of the playbook's YAML (not its comments) that names_role."""
    return sorted("playbooks/" + p.name for p in (root / "playbooks").glob("*.yml")
                  if any(names_role(s, role) for s in _strings(_load(p))))


def _show(value) -> str:
    """A default as written in YAML on one line: a string as is (quoted only where YAML would read it as something
    else), a list or mapping in flow style."""
    if isinstance(value, str):
        try:
            plain = value == value.strip() and "\n" not in value and yaml.safe_load(value) == value
        except yaml.YAMLError:   # "{{ x }}/y": not YAML on its own, shown as the template it is
            plain = True
        if value and plain:
            return value
        return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    if value is None or isinstance(value, (bool, int, float)):
        return yaml.safe_dump(value).split("\n", 1)[0]
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 30).strip()


def _type(option: dict) -> str:
    kind = str(option.get("type", "str"))
    return "%s of %s" % (kind, option["elements"]) if option.get("elements") else kind


def _last_end(node) -> int:
    """Where a YAML node's text ends: a block collection ends with its last item (its own end mark lies at the
    next key, past the comments between)."""
    if isinstance(node, yaml.MappingNode) and node.value and not node.flow_style:
        return _last_end(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and node.value and not node.flow_style:
        return _last_end(node.value[-1])
    return node.end_mark.index


def _defaults_of(root: Path, role: str) -> dict:
    """{name: (value text, whole text)} of a role's defaults/main.yml, as written there: the value's own text
    (quotes, flow style, a template as the template) and, for the block below the table, the lines from the
    name to the end of the value's last line (comments on those lines included)."""
    path = root / "roles" / role / "defaults" / "main.yml"
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    document = yaml.compose(text)
    out = {}
    for key, value in document.value if isinstance(document, yaml.MappingNode) else []:
        end = _last_end(value)
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end
        out[key.value] = (text[value.start_mark.index:end], text[key.start_mark.index:line_end].rstrip())
    return out


def _option_rows(root: Path, role: str, options: dict, prefix: str = "") -> tuple:
    """(table rows, [(name, default)] of the defaults too long for a cell), options sorted by name."""
    rows, blocks = [], []
    own, shared = _defaults_of(root, role), _defaults_of(root, SHARED)
    for name in sorted(options):
        option = options[name] or {}
        full_name = prefix + name
        # the default as the role ships it (defaults/main.yml); a value roles/common derives from the topology
        # fact is shipped there though another role declares it; a suboption's default is the spec's
        source, where = None, ""
        if not prefix and name in own:
            source = own[name]
        elif not prefix and name in shared:
            source, where = shared[name], " (roles/common/defaults/main.yml)"
        elif "default" in option:
            shown = _show(option["default"])
            source = (shown, "%s: %s" % (full_name, shown))
        if source is None:
            shown = ""
        elif "\n" in source[0] or len(source[0]) > INLINE_MAX:
            blocks.append((full_name, source[1]))
            shown = "below the table" + where
        else:
            shown = code(source[0]) + where
        choices = ", ".join(code(_show(c)) for c in option.get("choices") or [])
        description = markdown(option.get("description") or "")
        if option.get("no_log"):
            description += " Not logged (no\\_log)."
        rows.append("| %s |" % " | ".join(_cell(c) for c in (
            code(full_name), _type(option), shown, choices, "yes" if option.get("required") else "no",
            description.strip())))
        if option.get("options"):
            sub_rows, sub_blocks = _option_rows(root, role, option["options"], full_name + ".")
            rows += sub_rows
            blocks += sub_blocks
    return rows, blocks


def _options_section(root: Path, role: str, options: dict, heading: str, intro: str) -> list:
    lines = [heading, "", intro, ""]
    rows, blocks = _option_rows(root, role, options)
    lines += ["| option | type | default | choices | required | description |",
              "|---|---|---|---|---|---|"] + rows + [""]
    for name, text in blocks:
        lines += ["Default of %s:" % code(name), "", "```yaml", text, "```", ""]
    return lines


def _links(names: list) -> str:
    """Role names as links to their READMEs (a templated name as code)."""
    out = []
    for name in names:
        short = name[len(COLLECTION) + 1:] if name.startswith(COLLECTION + ".") else name
        if re.fullmatch(r"\w+", short):
            out.append("[%s](../%s/README.md)" % (code(COLLECTION + "." + short), short))
        else:
            out.append(code(name))
    return ", ".join(out)


def render(role: str, root: Path = ROOT) -> str:
    """The README.md of a role."""
    role_dir = root / "roles" / role
    specs = (_load(role_dir / "meta" / "argument_specs.yml") or {}).get("argument_specs") or {}
    entry_points = sorted(specs, key=lambda e: (e != "main", list(specs).index(e)))
    first = specs[entry_points[0]] if entry_points else {}
    full = "%s.%s" % (COLLECTION, role)
    lines = ["# " + full, "",
             "<!-- Generated by hacking/role_readmes.py from meta/argument_specs.yml, defaults/main.yml, meta/main.yml,",
             "     tasks/ and playbooks/: edit those, then run `%s`. -->" % COMMAND, ""]
    purpose = markdown(first.get("short_description") or "")
    if purpose:
        lines += [purpose.rstrip(".") + ".", ""]
    if role in INTERNAL:
        lines += ["**Internal role**: not meant to be listed in a play by operators. %s" % _text(INTERNAL[role]), ""]
    else:
        lines += ["**Public role**: list it in a play as %s." % code(full), ""]
    lines += ["How the roles fit together, the playbooks and the tags: the [collection's README](../../README.md). "
              "%s prints the same specification." % code("ansible-doc -t role " + full), ""]
    facts = []
    deps = dependencies(role_dir)
    if deps:
        facts.append("Depends on (meta/main.yml): %s." % _links(deps))
    calls, tags = task_facts(role_dir)
    if calls:
        facts.append("Its tasks call: %s." % _links(calls))
    run_by = playbooks_running(root, role)
    if run_by:
        facts.append("Run by: %s." % ", ".join(code(p) for p in run_by))
    if tags:
        facts.append("Tags its tasks carry: %s." % ", ".join(code(t) for t in tags))
    lines += ["- " + fact for fact in facts] + ([""] if facts else [])

    lines += ["## Entry points", ""]
    for entry in entry_points:
        spec = specs[entry] or {}
        lines += ["### %s" % entry, "", "**%s**" % markdown(spec.get("short_description") or entry), ""]
        for paragraph in paragraphs(spec.get("description") or []):
            lines += [paragraph, ""]

    # entry points with the same options share one table
    groups: list = []
    for entry in entry_points:
        options = (specs[entry] or {}).get("options") or {}
        for group in groups:
            if group[1] == options:
                group[0].append(entry)
                break
        else:
            groups.append(([entry], options))
    shared_note = ("" if role == SHARED else " The values several roles share are options of %s."
                   % _links([SHARED]))
    if not any(options for _entries, options in groups):
        lines += ["## Options", "", "The role has no options of its own." + shared_note, ""]
    for entries, options in groups:
        if not options:
            continue
        if len(groups) == 1:
            heading = "## Options"
            intro = ("Every entry point takes these options." if len(entries) > 1
                     else "The options of entry point %s." % code(entries[0]))
        else:
            heading = "## Options of %s" % ", ".join(entries)
            intro = "The options of entry point%s %s." % ("s" if len(entries) > 1 else "",
                                                          ", ".join(code(e) for e in entries))
        lines += _options_section(root, role, options, heading, intro + shared_note)
    return "\n".join(lines).rstrip("\n") + "\n"


def stale(root: Path = ROOT) -> list:
    """The roles whose README.md is missing or differs from what render() makes."""
    out = []
    for role in roles(root):
        path = root / "roles" / role / "README.md"
        if not path.is_file() or path.read_text(encoding="utf-8") != render(role, root):
            out.append(role)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale README")
    args = parser.parse_args(argv)
    if args.check:
        out = stale(ROOT)
        for role in out:
            print("roles/%s/README.md differs from what %s writes" % (role, COMMAND))
        return 1 if out else 0
    for role in roles(ROOT):
        path = ROOT / "roles" / role / "README.md"
        text = render(role, ROOT)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print("wrote %s" % path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
