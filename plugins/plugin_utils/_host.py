# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers for the preflight role's host checks (no Ansible imports)."""

from __future__ import annotations

import re

# One section of the preflight's host read:  @@name\n<output>\n@@rc N
_SECTION = re.compile(r'^@@(\w+)\n(.*?)\n?\n@@rc (-?\d+)$', re.DOTALL | re.MULTILINE)


def parse_sections(text):
    """The output of the preflight's one host read (a shell that prints every command's output between
    ``@@name`` and ``@@rc N`` lines) as ``{name: {'out': text, 'lines': [...], 'rc': N}}``.

    A section whose ``@@rc`` line is missing (the shell was cut short) is left out, so the caller
    reports it as not run rather than judging half an output. ``\r\n`` line ends (ansible.builtin.raw
    over an ssh tty) read as ``\n``."""
    out = {}
    for name, body, rc in _SECTION.findall(str(text or '').replace('\r\n', '\n')):
        out[name] = {'out': body, 'lines': body.splitlines(), 'rc': int(rc)}
    return out


def parse_meminfo(text):
    """/proc/meminfo lines as ``{name: value text}``, e.g. ``{'Hugepagesize': '2048 kB', 'HugePages_Total': '0'}``."""
    out = {}
    for line in str(text or '').splitlines():
        name, sep, value = line.partition(':')
        if sep:
            out[name.strip()] = value.strip()
    return out


# ss -H -t -l -n -p:  "LISTEN 0 5 127.30.0.11:6700 0.0.0.0:* users:(("python3",pid=12,fd=3))"
# -> local address, port, the users:(...) part; "[::]:22" -> "::", "127.0.0.53%lo:53" -> "127.0.0.53"
_LISTENER = re.compile(r'\[?([^\s%\]]+)(?:%[^\s:\]]+)?\]?:(\d+)\s+\S+:\*[ \t]*(.*)$', re.MULTILINE)
_OWNER = re.compile(r'\("([^"]*)",pid=(\d+)')


def parse_listeners(text):
    """``ss -H -t -l -n -p`` output as ``[{'address', 'port', 'owners': [{'name', 'pid'}]}]``.

    ``pid`` stays a string (it is matched against ``ps -o pid=,args=`` output). ``owners`` is empty
    when ss may not show the process (run without root)."""
    return [{'address': address, 'port': int(port),
             'owners': [{'name': name, 'pid': pid} for name, pid in _OWNER.findall(users)]}
            for address, port, users in _LISTENER.findall(str(text or ''))]


def _true(value):
    """A boolean that may arrive as text from a template ("True", "false", "yes")."""
    return value is True or str(value).strip().lower() in ('true', 'yes', 'on', '1')


def port_hits(ss_out, wanted, local_addresses):
    """The listeners of ``ss_out`` (see ``parse_listeners``) on a port the deployment wants.

    ``wanted``: ``[{'first', 'last', 'what', 'any'}]``, a port range and what it is for; ``any`` true
    means a listener on any address is a clash (the service binds every address), otherwise only
    listeners on ``local_addresses`` (the business IP and the wildcard addresses) clash.
    Returns ``[{'port', 'address', 'what', 'owners'}]``, in the order of ``wanted``."""
    listeners = parse_listeners(ss_out)
    local = set(local_addresses or [])
    hits = []
    for want in wanted or []:
        first, last = int(want['first']), int(want['last'])
        for listener in listeners:
            if first <= listener['port'] <= last and (_true(want.get('any')) or listener['address'] in local):
                hits.append({'port': listener['port'], 'address': listener['address'], 'what': want['what'],
                             'owners': listener['owners']})
    return hits


# stat -L -c '%F:%s:%n' PATH...: "regular file:1234:/etc/hccn.conf" for each path that exists
_STAT = re.compile(r'^([^:\n]*):(\d+):(.*)$', re.MULTILINE)


def parse_stat(text):
    """``stat -L -c '%F:%s:%n'`` output as ``{path: type}`` for every path that exists; a regular file
    of size 0 is ``'empty file'`` (GNU stat says "regular empty file"; an empty hccn.conf or config.json
    is as bad as a missing one)."""
    out = {}
    for kind, size, path in _STAT.findall(str(text or '')):
        out[path] = 'empty file' if kind.startswith('regular') and int(size) == 0 else kind
    return out


# CANN version files: version.cfg "toolkit_installed_version=[8.5.0:8.5.0]" (the inner value after the
# colon), *_install.info "version=8.5.0"
_CANN_CFG = re.compile(r'^(?:toolkit|runtime)_(?:installed|running)_version=\[[^:\]]*:([^\]]+)\]')
_CANN_INFO = re.compile(r'^version=\s*(\S+)')


def cann_version(lines, files):
    """``[version, file]`` from ``grep -H`` lines (``file:line``) of the CANN version files, taking the
    first of ``files`` (in their order) that holds a version; ``['', '']`` when none does."""
    lines = [str(line) for line in lines or []]
    for path in files or []:
        prefix = '%s:' % path
        for line in lines:
            if not line.startswith(prefix):
                continue
            value = line[len(prefix):]
            match = _CANN_CFG.match(value) or _CANN_INFO.match(value)
            if match:
                return [match.group(1).strip(), path]
    return ['', '']


def reported_version(text, label):
    """The version a binary prints after ``label`` (e.g. ``etcd Version:`` or ``prometheus, version``), without a
    leading ``v`` and without build metadata (``2.42.0+ds`` -> ``2.42.0``); '' when no line has it (the binary is
    missing or printed something else)."""
    match = re.search(r'%s\s+v?([^\s+]+)' % re.escape(str(label)), str(text or ''))
    return match.group(1) if match else ''
