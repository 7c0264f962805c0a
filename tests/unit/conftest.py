# -*- coding: utf-8 -*-
"""Helpers shared by the unit tests: the command output samples in tests/fixtures and running a module as a script."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

COLLECTION_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = COLLECTION_ROOT / 'tests' / 'fixtures'


@pytest.fixture
def fixture_text():
    """``fixture_text('name.txt')`` -> the text of ``tests/fixtures/name.txt`` (see PROVENANCE.md there);
    a missing file fails the test."""
    def read(name):
        path = FIXTURES / name
        assert path.is_file(), 'fixture %s is missing from the checkout' % path
        return path.read_text()
    return read


@pytest.fixture
def run_module(tmp_path):
    """``run_module('hccn_check', {...}, check_mode=False)`` -> the module's JSON result.

    Runs ``plugins/modules/<name>.py`` as a script (the way Ansible's debug entry point does), with
    this interpreter's ``sys.path`` so ``ansible`` and ``ansible_collections.ascend.vllm_pd`` import.
    Skips when ansible-core is not importable.
    """
    pytest.importorskip('ansible.module_utils.basic')

    def run(name, args, check_mode=False, timeout=120):
        params = dict(args)
        if check_mode:
            params['_ansible_check_mode'] = True
        args_file = tmp_path / ('%s-args.json' % name)
        args_file.write_text(json.dumps({'ANSIBLE_MODULE_ARGS': params}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        proc = subprocess.run([sys.executable, str(COLLECTION_ROOT / 'plugins' / 'modules' / ('%s.py' % name)),
                               str(args_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, timeout=timeout, check=False)
        out = proc.stdout.decode('utf-8', 'replace')
        try:
            result = json.loads(out)
        except ValueError:
            raise AssertionError('module %s printed no JSON (rc %s)\nstdout: %s\nstderr: %s'
                                 % (name, proc.returncode, out, proc.stderr.decode('utf-8', 'replace')))
        assert 'Traceback' not in json.dumps(result), result
        # ansible-core 2.19 returns warnings as structured objects; tests compare their text
        result['warnings'] = [w if isinstance(w, str) else (w.get('event') or {}).get('msg', json.dumps(w))
                              for w in result.get('warnings', [])]
        return result
    return run


@pytest.fixture
def fake_tool(tmp_path):
    """``fake_tool('npu-smi', body)`` -> path of an executable Python script whose body is ``body``."""
    def make(name, body):
        path = tmp_path / name
        path.write_text('#!%s\nimport sys, time\n%s\n' % (sys.executable, body))
        path.chmod(0o755)
        return str(path)
    return make


class _SpecCaptured(Exception):
    pass


@pytest.fixture
def module_spec(monkeypatch):
    """``module_spec('hccn_check')`` -> ``(docs, argument_spec, ansible_module_kwargs)``.

    ``docs`` holds DOCUMENTATION, EXAMPLES and RETURN parsed as YAML; the argument spec is captured by
    running ``main()`` against a stand-in AnsibleModule that stops at construction.
    """
    yaml = pytest.importorskip('yaml')
    pytest.importorskip('ansible.module_utils.basic')
    import importlib

    def load(name):
        mod = importlib.import_module('ansible_collections.ascend.vllm_pd.plugins.modules.%s' % name)
        docs = dict((key, yaml.safe_load(getattr(mod, key))) for key in ('DOCUMENTATION', 'EXAMPLES', 'RETURN'))
        captured = {}

        def fake_module(**kwargs):
            captured.update(kwargs)
            raise _SpecCaptured()
        monkeypatch.setattr(mod, 'AnsibleModule', fake_module)
        with pytest.raises(_SpecCaptured):
            mod.main()
        return docs, captured['argument_spec'], captured
    return load


def _fragment(name):
    """The parsed text of one of the collection's doc fragments, e.g. ascend.vllm_pd.attributes.facts
    (ansible-doc resolves them the same way: plugins/doc_fragments/<file>.py, attribute DOCUMENTATION or
    the upper-cased suffix)."""
    import importlib
    import yaml
    parts = name.split('.')
    assert parts[:2] == ['ascend', 'vllm_pd'], 'only the collection\'s own fragments are resolved here: %s' % name
    mod = importlib.import_module('ansible_collections.ascend.vllm_pd.plugins.doc_fragments.%s' % parts[2])
    return yaml.safe_load(getattr(mod.ModuleDocFragment, parts[3].upper() if len(parts) > 3 else 'DOCUMENTATION'))


def assert_docs_match_spec(docs, spec):
    """Every option documented with the argument spec's type, default, choices and elements."""
    options = docs['DOCUMENTATION']['options']
    assert sorted(options) == sorted(spec), 'documented options differ from argument_spec'
    for name, arg in spec.items():
        doc = options[name]
        assert doc.get('type', 'str') == arg.get('type', 'str'), name
        assert doc.get('default') == arg.get('default'), name
        assert doc.get('choices') == arg.get('choices'), name
        assert doc.get('elements') == arg.get('elements'), name
        assert doc.get('description'), name
    attributes = dict(docs['DOCUMENTATION'].get('attributes') or {})
    for fragment in docs['DOCUMENTATION'].get('extends_documentation_fragment') or []:
        attributes.update(_fragment(fragment).get('attributes') or {})
    assert attributes['check_mode']['support'] == 'full'
    assert attributes['diff_mode']['support'] == 'none'
    for key, value in docs['RETURN'].items():
        assert value.get('description') and value.get('returned') and value.get('type'), key


@pytest.fixture
def docs_match_spec():
    """The ``assert_docs_match_spec(docs, spec)`` check, as a fixture."""
    return assert_docs_match_spec
