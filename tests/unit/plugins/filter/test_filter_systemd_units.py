# -*- coding: utf-8 -*-
"""Plain pytest tests of plugins/filter/systemd_units.py; the command runs in a real shell against a fake
systemctl on PATH, so what the parser reads is what the command prints."""

from __future__ import annotations

import os
import subprocess

import pytest

pytest.importorskip('ansible.errors')

from ansible.errors import AnsibleFilterError  # noqa: E402

from ansible_collections.ascend.vllm_pd.plugins.filter.systemd_units import (  # noqa: E402
    FilterModule,
    unit_state_command,
    unit_states,
)

# is-active prints a state and exits non-zero unless active; is-enabled prints nothing for an unknown unit.
FAKE_SYSTEMCTL = r'''#!/bin/sh
case "$1 $2" in
  "is-active engine.service") echo active ;;
  "is-enabled engine.service") echo enabled ;;
  "is-active canary.timer") echo failed; exit 3 ;;
  "is-enabled canary.timer") echo enabled-runtime ;;
  "is-active it's.service") echo activating; exit 3 ;;
  "is-enabled it's.service") echo static ;;
  is-active*) echo inactive; exit 3 ;;
  is-enabled*) echo "Failed to get unit file state for $2: No such file or directory" >&2; exit 1 ;;
esac
'''


@pytest.fixture()
def shell(tmp_path):
    fake = tmp_path / 'systemctl'
    fake.write_text(FAKE_SYSTEMCTL)
    fake.chmod(0o755)
    env = dict(os.environ, PATH='%s:%s' % (tmp_path, os.environ['PATH']))

    def run(cmd):
        proc = subprocess.run(['/bin/sh', '-c', 'echo before; %s; echo after' % cmd], env=env, capture_output=True,
                              text=True, check=False)
        return proc.returncode, proc.stdout.splitlines()
    return run


def test_command_reads_each_unit_and_the_parser_reads_it_back(shell):
    rc, lines = shell(unit_state_command(['engine.service', 'canary.timer', 'missing.service', "it's.service"]))
    assert rc == 0 and lines[0] == 'before' and lines[-1] == 'after'
    states = unit_states(lines)
    assert states['engine.service'] == {'active': True, 'enabled': True, 'active_state': 'active',
                                        'enabled_state': 'enabled'}
    assert states['canary.timer'] == {'active': False, 'enabled': True, 'active_state': 'failed',
                                      'enabled_state': 'enabled-runtime'}
    assert states['missing.service'] == {'active': False, 'enabled': False, 'active_state': 'inactive',
                                         'enabled_state': ''}
    # the quote in the name survives the shell; activating is not active and static is not enabled
    assert states["it's.service"]['active'] is False and states["it's.service"]['enabled'] is False
    assert states["it's.service"]['active_state'] == 'activating'


def test_a_single_name_and_stdout_text_are_accepted(shell):
    rc, lines = shell(unit_state_command('engine.service'))
    assert unit_states('\n'.join(lines))['engine.service']['active'] is True


def test_units_not_in_the_lines_read_as_stopped_and_other_lines_are_ignored():
    states = unit_states(['12345', 'launcher alive', 'unit', 'unit engine.service active enabled'],
                         units=['engine.service', 'etcd.service'])
    assert states['etcd.service'] == {'active': False, 'enabled': False, 'active_state': '', 'enabled_state': ''}
    assert states['engine.service']['enabled'] is True
    assert set(states) == {'engine.service', 'etcd.service'}


@pytest.mark.parametrize('bad', [None, 3, [''], ['ok', 5], {'a': 1}])
def test_bad_unit_lists_are_refused(bad):
    with pytest.raises(AnsibleFilterError, match='unit_state_command: the input must be a list of unit names'):
        unit_state_command(bad)


def test_bad_lines_are_refused():
    with pytest.raises(AnsibleFilterError, match="unit_states: the input must be the read's stdout_lines"):
        unit_states(5)


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {'unit_state_command', 'unit_states'}


@pytest.mark.parametrize('bad,shown', [(None, 'None'), ([''], "['']"), (['ok', 5], "['ok', 5]")])
def test_the_bad_unit_list_message_whole(bad, shown):
    with pytest.raises(AnsibleFilterError) as err:
        unit_state_command(bad)
    assert err.value.message == 'unit_state_command: the input must be a list of unit names, got %s' % shown


def test_bad_units_of_the_parser_are_named_with_the_parser():
    with pytest.raises(AnsibleFilterError) as err:
        unit_states([], units=['engine.service', ''])
    assert err.value.message == "unit_states: the input must be a list of unit names, got ['engine.service', '']"


@pytest.mark.parametrize('bad,name', [(5, 'int'), ({'stdout': ''}, 'dict'), (None, 'NoneType')])
def test_the_bad_lines_message_names_the_type(bad, name):
    with pytest.raises(AnsibleFilterError) as err:
        unit_states(bad)
    assert err.value.message == "unit_states: the input must be the read's stdout_lines, got %s" % name
