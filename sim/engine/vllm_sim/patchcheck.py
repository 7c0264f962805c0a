"""Find which AscendStore backends the vllm-ascend tree on disk registers.

Parses ``vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/pool_worker.py``
with ``ast`` (never imports it) and collects ``backend_map`` entries: the dict
literal, later ``backend_map[...] = {...}`` assignments and
``backend_map.update({...})`` calls. If pool_worker.py imports ``backend_map``
from another module of the tree, that module is parsed instead.
"""

import ast
import os

POOL_WORKER_REL = "vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/pool_worker.py"


def _const_str(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _dict_entries(node):
    out = {}
    if not isinstance(node, ast.Dict):
        return out
    for k, v in zip(node.keys, node.values):
        key = _const_str(k) if k is not None else None
        if key is None:
            continue
        info = {}
        if isinstance(v, ast.Dict):
            for ik, iv in zip(v.keys, v.values):
                ikey = _const_str(ik) if ik is not None else None
                ival = _const_str(iv)
                if ikey and ival is not None:
                    info[ikey] = ival
        out[key] = info
    return out


def _module_file(src_root, module):
    base = os.path.join(src_root, *module.split("."))
    for cand in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


def _collect(tree):
    entries = {}
    found = False
    imported_from = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id == "backend_map" and node.value is not None:
                    found = True
                    entries.update(_dict_entries(node.value))
                elif (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                      and t.value.id == "backend_map"):
                    key = _const_str(t.slice)
                    if key:
                        found = True
                        d = _dict_entries(ast.Dict(keys=[ast.Constant(key)], values=[node.value]))
                        entries.update(d)
        elif isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "update" and isinstance(f.value, ast.Name)
                    and f.value.id == "backend_map" and node.args):
                found = True
                entries.update(_dict_entries(node.args[0]))
        elif isinstance(node, ast.ImportFrom) and node.module:
            if any(a.name == "backend_map" for a in node.names):
                imported_from = node.module
    return found, entries, imported_from


def _assert_line(tree, text):
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            left = node.test.left
            if (isinstance(left, ast.Name) and left.id == "backend" and node.test.ops
                    and isinstance(node.test.ops[0], ast.IsNot)):
                return node.lineno
    for i, line in enumerate(text.splitlines(), 1):
        if "assert backend is not None" in line:
            return i
    return 1


def inspect_tree(src_root):
    """Return dict(file, entries{name: {name, path}}, assert_line) or raise FileNotFoundError."""
    pool_worker = os.path.join(src_root, POOL_WORKER_REL)
    with open(pool_worker, encoding="utf-8") as f:
        text = f.read()
    tree = ast.parse(text, filename=pool_worker)
    found, entries, imported_from = _collect(tree)
    if not found and imported_from:
        other = _module_file(src_root, imported_from)
        if other:
            with open(other, encoding="utf-8") as f:
                _f2, entries2, _i2 = _collect(ast.parse(f.read(), filename=other))
            entries.update(entries2)
    return {"file": pool_worker, "entries": entries, "assert_line": _assert_line(tree, text)}


def backend_class_available(src_root, info):
    """(ok, exc_type, message) for importing info['path'] and getting info['name']."""
    module = info.get("path")
    cls = info.get("name")
    if not module or not cls:
        return False, "AssertionError", ""
    path = _module_file(src_root, module)
    if path is None:
        return False, "ModuleNotFoundError", f"No module named '{module}'"
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except SyntaxError as e:
        return False, "SyntaxError", str(e)
    if not any(isinstance(n, ast.ClassDef) and n.name == cls for n in ast.walk(tree)):
        return False, "AttributeError", f"module '{module}' has no attribute '{cls}'"
    return True, None, None
