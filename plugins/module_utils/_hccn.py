# -*- coding: utf-8 -*-
# Copyright (c) ascend.vllm_pd contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure functions behind the ``hccn_check`` module.

Parsers for the ``hccn_tool -i N ...`` queries the A3 preflight needs, a runner
that executes the queries of one node (devices in parallel, each device's
commands one after another), and the controller-side helpers that need every
node's results: ``peer_map`` (whom each device pings) and ``compare_tls``.

Gates: vNIC UP with an IP, ``hccs_ping`` success to every peer and TLS
consistency are hard (the A3 checklist of vllm-ascend's PD deployment tutorial).
``-net_health`` is hard too: ``Success`` and ``Init`` pass (healthy
HCCS-connected A3 chips read ``Init``), every other state fails unless
``strict_net_health`` is false.  ``-link`` reads DOWN on healthy HCCS-connected
A3 machines, so it is advisory unless ``strict_link``; ``-ip`` (RoCE IP) is
advisory.

Nothing here imports Ansible.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import os
import re
import shlex
import subprocess
import threading
import time
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor

CHECKS = ('vnic', 'link', 'net_health', 'tls', 'ip', 'hccs_ping')
PEER_MODES = ('same_index', 'all_pairs')
TLS_SCOPES = ('all', 'device')

OK = 'ok'
UNSUPPORTED = 'unsupported'
ERROR = 'error'
TIMEOUT = 'timeout'
BUSY = 'busy'

# What ``hccn_tool -i N -net_health -g`` prints after ``net health status:``: the states of
# ``enum dcmi_rdfx_detect_result`` in Huawei's DCMI API reference (dcmi_get_device_network_health):
# 0 Success (healthy), 1 Socket fail, 2 Receive timeout, 3 Unreachable (detect IP unreachable),
# 4 Time exceeded, 5 Fault (sending the detect packet failed), 6 Init (detection task initialising),
# 7 Thread error, 8 Detect ip set (detect IP being set); 'Unknown' for anything else.
NET_HEALTH_VALUES = ('Success', 'Socket fail', 'Receive timeout', 'Unreachable', 'Time exceeded',
                     'Fault', 'Init', 'Thread error', 'Detect ip set', 'Unknown')
# The healthy ones: Init too, because healthy HCCS-connected A3 chips read it (field reports on A3
# machines whose hccs_ping works). Every other state, known or not, and output with no state line is
# unhealthy; that includes 'Detect ip set', which may pass once the detect IP is set: rerun then.
NET_HEALTH_OK = ('Success', 'Init')

_UNSUPPORTED_RE = re.compile(r'does not support this function', re.IGNORECASE)
_BUSY_RE = re.compile(r'device is occupied', re.IGNORECASE)
_NO_IP_RE = re.compile(r'no ip was preset', re.IGNORECASE)
_VNIC_LINK_RE = re.compile(r'^\s*vnic link status\s*:[ \t]*(\S+)', re.IGNORECASE | re.MULTILINE)
_VNIC_IP_RE = re.compile(r'^\s*vnic ipaddr\s*:[ \t]*(\S*)', re.IGNORECASE | re.MULTILINE)
_VNIC_MASK_RE = re.compile(r'^\s*vnic netmask\s*:[ \t]*(\S*)', re.IGNORECASE | re.MULTILINE)
_LINK_RE = re.compile(r'^\s*link status\s*:[ \t]*(\S.*?)\s*$', re.IGNORECASE | re.MULTILINE)
_NET_HEALTH_RE = re.compile(r'^\s*net health status\s*:[ \t]*(\S.*?)\s*$', re.IGNORECASE | re.MULTILINE)
_TLS_SWITCH_RE = re.compile(r'tls switch\s*\[\s*(\d+)\s*\]', re.IGNORECASE)
_TLS_PRESET_RE = re.compile(r'tls preconfigured\s*\[\s*(\d+)\s*\]', re.IGNORECASE)
_TLS_ALARM_RE = re.compile(r'tls alarm time threshold\s*\[\s*(\d+)\s*\]', re.IGNORECASE)
_TLS_DEV_RE = re.compile(r'(?:dev_id\s*:|device)\s*(\d+)\s*,\s*tls switch', re.IGNORECASE)
_IP_RE = re.compile(r'^\s*ipaddr\s*:[ \t]*(\S+)', re.IGNORECASE | re.MULTILINE)
_MASK_RE = re.compile(r'^\s*netmask\s*:[ \t]*(\S+)', re.IGNORECASE | re.MULTILINE)
_PING_TARGET_RE = re.compile(r'PING\s+(\S+)')
_PING_SUCCESS_RE = re.compile(r'This pkt ping success', re.IGNORECASE)
_PING_PKT_FAIL_RE = re.compile(r'This pkt (?:send fail|check recv msg fail|ping not start)', re.IGNORECASE)
_PING_SUMMARY_RE = re.compile(
    r'(\d+)\s+packets?\s+transmitted\s*,\s*(\d+)\s+received\s*,\s*([\d.]+)\s*%\s*packets?\s+loss',
    re.IGNORECASE)
_PING_TIME_RE = re.compile(r'^\s*(max|min|average|TP95) time\s+([\d.]+)\s*us', re.IGNORECASE | re.MULTILINE)

# What to do, per check, appended once per failing check to the module's message.
HINTS = {
    'vnic': 'bring the vNIC up and give it an IP (check /etc/hccn.conf and the driver on that device)',
    'hccs_ping': 'check the HCCS/super-pod fabric between the nodes and the peer vNIC IP '
                 '(run the command by hand on this node)',
    'tls': 'the TLS switch must be identical on every device of every node '
           '(hccn_tool -i N -tls -s enable 0|1)',
    'link': 'link can read DOWN on healthy HCCS-connected A3 machines; set strict_link=false '
            'to make this advisory',
    'net_health': 'only Success and Init are healthy; check the RoCE port of the chip and its detect IP '
                  '(hccn_tool -i N -netdetect -g, /etc/hccn.conf), or set strict_net_health=false to make '
                  'this advisory',
    'ip': 'no RoCE IP is preset on this device (advisory)',
}


class ToolTimeout(Exception):
    """A command did not finish within its timeout."""

    def __init__(self, argv, timeout):
        super(ToolTimeout, self).__init__('%s: no answer within %ss' % (quote_argv(argv), timeout))
        self.argv = argv
        self.timeout = timeout


def quote_argv(argv):
    """The argv as a shell string someone can paste."""
    return ' '.join(shlex.quote(str(a)) for a in argv)


def subprocess_runner(argv, timeout):
    """Run ``argv`` without a shell; ``(rc, stdout, stderr)``.

    Raises ``ToolTimeout`` after ``timeout`` seconds (the child is killed) and
    ``OSError`` (FileNotFoundError, PermissionError) when it cannot start.
    """
    env = dict(os.environ, LANG='C', LC_ALL='C')
    try:
        proc = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise ToolTimeout(argv, timeout)
    return (proc.returncode, proc.stdout.decode('utf-8', 'replace'),
            proc.stderr.decode('utf-8', 'replace'))


# --------------------------------------------------------------------------
# Parsers: each takes (stdout, rc, stderr) and returns a dict with 'status'
# and 'raw'.  Status 'ok' means the check passed; every other status names
# what was seen.  'unsupported' = the board lacks the function, 'error' = the
# tool failed or printed something unreadable (see 'error').
# --------------------------------------------------------------------------

def _base(text, rc, stderr):
    return {'status': ERROR, 'raw': text or '', 'rc': rc, 'stderr': stderr or '', 'error': None}


def _common_errors(result, text, rc, stderr):
    """Statuses every query can end in; True when one applied."""
    both = '%s\n%s' % (text or '', stderr or '')
    if _UNSUPPORTED_RE.search(both):
        result['status'] = UNSUPPORTED
        result['error'] = 'This device does not support this function.'
        return True
    if _BUSY_RE.search(both):
        result['status'] = BUSY
        result['error'] = 'The device is occupied (another hccn_tool command is running on it)'
        return True
    return False


def _unparsed(result, what, text, rc, stderr):
    detail = (stderr or text or '').strip().splitlines()
    result['status'] = ERROR
    result['error'] = '%s (rc=%s%s)' % (what, rc, (': ' + detail[-1][:200]) if detail else ', no output')
    return result


def _valid_ip(value):
    try:
        addr = ipaddress.ip_address(u'%s' % value)
    except ValueError:
        return False
    return not addr.is_unspecified


def parse_vnic(text, rc=0, stderr=''):
    """``-vnic -g``: ok when ``vnic link status: UP`` and an IP; else down / no_ip."""
    result = _base(text, rc, stderr)
    result.update({'link': None, 'ip': None, 'netmask': None})
    link = _VNIC_LINK_RE.search(text or '')
    ip = _VNIC_IP_RE.search(text or '')
    mask = _VNIC_MASK_RE.search(text or '')
    if link:
        result['link'] = link.group(1).upper()
    if ip and ip.group(1):
        result['ip'] = ip.group(1)
    if mask and mask.group(1):
        result['netmask'] = mask.group(1)
    if link is None:
        if _common_errors(result, text, rc, stderr):
            return result
        return _unparsed(result, "no 'vnic link status' line", text, rc, stderr)
    if result['link'] != 'UP':
        result['status'] = 'down'
    elif not result['ip'] or not _valid_ip(result['ip']):
        result['status'] = 'no_ip'
    else:
        result['status'] = OK
    return result


def parse_link(text, rc=0, stderr=''):
    """``-link -g``: ``link status: UP|DOWN`` -> ok / down."""
    result = _base(text, rc, stderr)
    result['value'] = None
    match = _LINK_RE.search(text or '')
    if match is None:
        if _common_errors(result, text, rc, stderr):
            return result
        return _unparsed(result, "no 'link status' line", text, rc, stderr)
    result['value'] = match.group(1).upper()
    result['status'] = OK if result['value'] == 'UP' else 'down'
    return result


def parse_net_health(text, rc=0, stderr=''):
    """``-net_health -g``: ``net health status: X`` -> ok when X is one of NET_HEALTH_OK (Success, Init,
    any case), else unhealthy; no such line -> unsupported, busy or error (unhealthy as well)."""
    result = _base(text, rc, stderr)
    result['value'] = None
    match = _NET_HEALTH_RE.search(text or '')
    if match is None:
        if _common_errors(result, text, rc, stderr):
            return result
        return _unparsed(result, "no 'net health status' line", text, rc, stderr)
    result['value'] = match.group(1)
    result['status'] = OK if result['value'].lower() in [v.lower() for v in NET_HEALTH_OK] else 'unhealthy'
    return result


def parse_tls(text, rc=0, stderr=''):
    """``-tls -g``: the ``tls switch[N]`` value (0 disable, 1 enable) -> ok with ``switch``."""
    result = _base(text, rc, stderr)
    result.update({'switch': None, 'preconfigured': None, 'alarm_days': None})
    match = _TLS_SWITCH_RE.search(text or '')
    if match is None:
        if _common_errors(result, text, rc, stderr):
            return result
        return _unparsed(result, "no 'tls switch[N]' in the output", text, rc, stderr)
    result['switch'] = int(match.group(1))
    preset = _TLS_PRESET_RE.search(text)
    alarm = _TLS_ALARM_RE.search(text)
    result['preconfigured'] = int(preset.group(1)) if preset else None
    result['alarm_days'] = int(alarm.group(1)) if alarm else None
    result['status'] = OK
    return result


def parse_tls_lines(text):
    """``for i ...; do hccn_tool -i $i -tls -g; done | grep switch`` -> ``{dev_id: switch}``."""
    found = OrderedDict()
    for line in (text or '').splitlines():
        dev = _TLS_DEV_RE.search(line)
        switch = _TLS_SWITCH_RE.search(line)
        if dev and switch:
            found[int(dev.group(1))] = int(switch.group(1))
    return found


def parse_ip(text, rc=0, stderr=''):
    """``-ip -g``: ok with ``ip``/``netmask``; exit 13 or ``no ip was preset`` -> unset."""
    result = _base(text, rc, stderr)
    result.update({'ip': None, 'netmask': None})
    both = '%s\n%s' % (text or '', stderr or '')
    ip = _IP_RE.search(text or '')
    mask = _MASK_RE.search(text or '')
    if _NO_IP_RE.search(both) or (rc == 13 and ip is None):
        result['status'] = 'unset'
        return result
    if ip is None:
        if _common_errors(result, text, rc, stderr):
            return result
        return _unparsed(result, "no 'ipaddr:' line", text, rc, stderr)
    result['ip'] = ip.group(1)
    result['netmask'] = mask.group(1) if mask else None
    result['status'] = OK
    return result


def parse_hccs_ping(text, rc=0, stderr='', expected=None):
    """``-hccs_ping -g address IP [cnt N]``.

    ok: every packet transmitted came back; loss: some did; failed: none did;
    unsupported: the board has no hccs_ping; busy: another ping holds the device.
    """
    result = _base(text, rc, stderr)
    result.update({'target': None, 'success': 0, 'failed_packets': 0, 'transmitted': None,
                   'received': None, 'loss_pct': None, 'times_us': {}})
    if _common_errors(result, text, rc, stderr):
        return result
    target = _PING_TARGET_RE.search(text or '')
    result['target'] = target.group(1) if target else None
    result['success'] = len(_PING_SUCCESS_RE.findall(text or ''))
    result['failed_packets'] = len(_PING_PKT_FAIL_RE.findall(text or ''))
    for name, value in _PING_TIME_RE.findall(text or ''):
        result['times_us'][name.lower()] = float(value)
    summary = _PING_SUMMARY_RE.search(text or '')
    if summary:
        sent, recv = int(summary.group(1)), int(summary.group(2))
        result.update({'transmitted': sent, 'received': recv, 'loss_pct': float(summary.group(3))})
        if sent > 0 and recv >= sent:
            result['status'] = OK
        elif recv > 0:
            result['status'] = 'loss'
        else:
            result['status'] = 'failed'
        return result
    # No summary line: trust the per-packet lines only if they are complete.
    if rc == 0 and result['success'] and not result['failed_packets'] and (
            expected is None or result['success'] >= expected):
        result['status'] = OK
        result['transmitted'] = result['received'] = result['success']
        result['loss_pct'] = 0.0
        return result
    if result['success'] or result['failed_packets']:
        result['status'] = 'loss' if result['success'] else 'failed'
        result['transmitted'] = result['success'] + result['failed_packets']
        result['received'] = result['success']
        return result
    return _unparsed(result, 'no ping summary line', text, rc, stderr)


PARSERS = {
    'vnic': parse_vnic,
    'link': parse_link,
    'net_health': parse_net_health,
    'tls': parse_tls,
    'ip': parse_ip,
    'hccs_ping': parse_hccs_ping,
}

_ARGS = {
    'vnic': ['-vnic', '-g'],
    'link': ['-link', '-g'],
    'net_health': ['-net_health', '-g'],
    'tls': ['-tls', '-g'],
    'ip': ['-ip', '-g'],
}


def build_argv(tool, device, check, peer=None, ping_count=None):
    """The argv of one query (``hccn_tool -i 3 -vnic -g``)."""
    argv = [tool, '-i', str(device)]
    if check == 'hccs_ping':
        argv += ['-hccs_ping', '-g', 'address', str(peer)]
        if ping_count:
            argv += ['cnt', str(ping_count)]
        return argv
    return argv + list(_ARGS[check])


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------

def resolve_devices(devices=None, device_count=None):
    """``devices`` (explicit ids) or ``range(device_count)``; sorted, unique ints."""
    if devices:
        try:
            ids = sorted(set(int(d) for d in devices))
        except (TypeError, ValueError):
            raise ValueError('devices must be a list of integers (NPU Phy-IDs), got %r' % (devices,))
    elif device_count is not None:
        if int(device_count) < 1:
            raise ValueError('device_count must be at least 1, got %r' % (device_count,))
        ids = list(range(int(device_count)))
    else:
        raise ValueError('set devices (a list of NPU Phy-IDs) or device_count')
    if any(d < 0 for d in ids):
        raise ValueError('device ids cannot be negative: %r' % (ids,))
    return ids


def _ip_list(value, where):
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError('%s: expected a list of IP addresses, got %r' % (where, value))
    ips = []
    for item in value:
        item = str(item).strip()
        if not _valid_ip(item):
            raise ValueError('%s: %r is not an IP address' % (where, item))
        if item not in ips:
            ips.append(item)
    return ips


def normalize_peers(peers, devices):
    """``peers`` as given to the module -> ``{device: [ip, ...]}``.

    A dict maps a device id (int or string) to a list of IPs (or one IP); a flat
    list means "every device pings all of these"; empty/None means no ping.
    Devices in the dict that are not checked on this node are ignored.
    """
    if not peers:
        return {}
    if isinstance(peers, dict):
        out = {}
        for key, value in peers.items():
            try:
                device = int(key)
            except (TypeError, ValueError):
                raise ValueError('peers: key %r is not a device id' % (key,))
            if device in devices:
                out[device] = _ip_list(value, 'peers[%s]' % key)
        return out
    ips = _ip_list(peers, 'peers')
    return dict((d, list(ips)) for d in devices)


# --------------------------------------------------------------------------
# Running the checks of one node
# --------------------------------------------------------------------------

def _judge(check, rec, options):
    """``(severity, seen)``: severity None (pass), 'warn' or 'fail'."""
    status = rec['status']
    if status == OK:
        return None, None
    if status == TIMEOUT:
        seen = 'no answer within %ss' % rec.get('timeout')
    elif status in (ERROR, BUSY, UNSUPPORTED):
        seen = rec.get('error') or status
    elif check == 'vnic':
        if status == 'down':
            seen = 'vnic link status %s (ipaddr %s)' % (rec.get('link'), rec.get('ip'))
        else:
            seen = 'vnic link status UP but no usable ipaddr (%r)' % (rec.get('ip'),)
    elif check == 'link':
        seen = 'link status: %s' % rec.get('value')
    elif check == 'net_health':
        seen = 'net health status: %s' % rec.get('value')
    elif check == 'ip':
        seen = 'no RoCE IP preset (rc %s)' % rec.get('rc')
    elif check == 'hccs_ping':
        seen = '%s of %s packets received (%s%% loss)' % (
            rec.get('received'), rec.get('transmitted'), rec.get('loss_pct'))
    else:
        seen = status

    if check == 'hccs_ping':
        seen = 'to %s: %s' % (rec.get('peer'), seen)
        return ('warn' if status == UNSUPPORTED else 'fail'), seen
    if check == 'vnic':
        return 'fail', seen
    if check == 'tls':
        return ('warn' if status == UNSUPPORTED else 'fail'), seen
    if check == 'link':
        return ('fail' if options.get('strict_link') else 'warn'), seen
    if check == 'net_health':
        if status == UNSUPPORTED:
            return 'warn', seen  # the board has no RoCE detection: nothing to judge
        return ('fail' if options.get('strict_net_health', True) else 'warn'), seen
    return 'warn', seen  # ip and anything else: advisory


def _run_one(runner, job, timeout, busy_retries, busy_delay):
    """Run one job, turning timeouts and start errors into a result dict."""
    attempt = 0
    while True:
        started = time.time()
        try:
            rc, out, err = runner(job['argv'], timeout)
        except ToolTimeout:
            return {'status': TIMEOUT, 'raw': '', 'rc': None, 'stderr': '', 'timeout': timeout,
                    'error': 'no answer within %ss' % timeout, 'elapsed_s': round(time.time() - started, 3)}
        except subprocess.TimeoutExpired:
            return {'status': TIMEOUT, 'raw': '', 'rc': None, 'stderr': '', 'timeout': timeout,
                    'error': 'no answer within %ss' % timeout, 'elapsed_s': round(time.time() - started, 3)}
        except OSError as exc:
            return {'status': ERROR, 'raw': '', 'rc': None, 'stderr': '',
                    'error': 'cannot run %s: %s' % (job['argv'][0], exc),
                    'elapsed_s': round(time.time() - started, 3)}
        except Exception as exc:  # pylint: disable=broad-except  # a result, never a traceback
            return {'status': ERROR, 'raw': '', 'rc': None, 'stderr': '',
                    'error': 'unexpected error running the command: %s: %s' % (type(exc).__name__, exc),
                    'elapsed_s': round(time.time() - started, 3)}
        parser = PARSERS[job['check']]
        try:
            if job['check'] == 'hccs_ping':
                rec = parser(out, rc, err, expected=job.get('ping_count'))
            else:
                rec = parser(out, rc, err)
        except Exception as exc:  # pylint: disable=broad-except
            rec = {'status': ERROR, 'raw': out, 'rc': rc, 'stderr': err,
                   'error': 'could not read the output: %s: %s' % (type(exc).__name__, exc)}
        rec['elapsed_s'] = round(time.time() - started, 3)
        if rec['status'] == BUSY and attempt < busy_retries:
            attempt += 1
            time.sleep(busy_delay)
            continue
        if attempt:
            rec['attempts'] = attempt + 1
        return rec


def build_jobs(device_ids, peers_by_device, ping_count, tool, checks):
    """Every query of one node, in the order they run on each device."""
    jobs = []
    for device in device_ids:
        for check in CHECKS:
            if check not in checks:
                continue
            if check == 'hccs_ping':
                for peer in peers_by_device.get(device, []):
                    jobs.append({'device': device, 'check': check, 'peer': peer, 'ping_count': ping_count,
                                 'argv': build_argv(tool, device, check, peer, ping_count)})
            else:
                jobs.append({'device': device, 'check': check, 'peer': None,
                             'argv': build_argv(tool, device, check)})
    return jobs


def run_checks(device_ids, runner, peers_by_device=None, ping_count=3, options=None):
    """Run the checks of one node and judge them.

    ``runner(argv, timeout) -> (rc, stdout, stderr)`` may raise ``ToolTimeout``
    (or ``subprocess.TimeoutExpired``) and ``OSError``.  Devices run in parallel
    (``max_workers`` threads); the commands of one device run one after another,
    because hccn_tool answers "The device is occupied" to a second concurrent
    command on the same device.

    ``options``: ``tool`` ('hccn_tool'), ``checks`` (all of CHECKS), ``timeout``
    (10 s per command), ``max_workers`` (16), ``strict_link`` (False),
    ``strict_net_health`` (True), ``busy_retries`` (2), ``busy_delay`` (1.0 s).

    Returns ``{'devices', 'summary', 'failures', 'warnings', 'tls', 'vnic_ips'}``;
    each failure/warning is ``{'device', 'check', 'status', 'seen', 'command'}``
    (plus ``'peer'`` for hccs_ping).
    """
    options = dict(options or {})
    tool = options.get('tool') or 'hccn_tool'
    checks = list(options.get('checks') or CHECKS)
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise ValueError('unknown check(s) %s; known: %s' % (', '.join(unknown), ', '.join(CHECKS)))
    timeout = options.get('timeout') or 10
    max_workers = max(1, int(options.get('max_workers') or 16))
    busy_retries = int(options.get('busy_retries', 2))
    busy_delay = float(options.get('busy_delay', 1.0))
    peers_by_device = peers_by_device or {}
    device_ids = list(device_ids)

    jobs = build_jobs(device_ids, peers_by_device, ping_count, tool, checks)
    by_device = OrderedDict((d, []) for d in device_ids)
    for job in jobs:
        by_device[job['device']].append(job)

    lock = threading.Lock()

    def run_device(device_jobs):
        for job in device_jobs:
            rec = _run_one(runner, job, timeout, busy_retries, busy_delay)
            with lock:
                job['result'] = rec

    workers = min(max_workers, max(1, len(by_device)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_device, dj) for dj in by_device.values() if dj]
        for future in futures:
            future.result()

    devices_out = []
    failures, warnings = [], []
    by_check = OrderedDict((c, Counter()) for c in checks)
    records = OrderedDict()
    for device in device_ids:
        records[device] = OrderedDict([('device', device)])
        if 'hccs_ping' in checks:
            records[device]['hccs_ping'] = []
    for job in jobs:
        rec = job['result']
        rec['command'] = quote_argv(job['argv'])
        device, check = job['device'], job['check']
        if check == 'hccs_ping':
            rec['peer'] = job['peer']
            records[device]['hccs_ping'].append(rec)
        else:
            records[device][check] = rec
        by_check[check][rec['status']] += 1
        severity, seen = _judge(check, rec, options)
        if severity:
            entry = OrderedDict([('device', device), ('check', check), ('status', rec['status']),
                                 ('seen', seen), ('command', rec['command'])])
            if check == 'hccs_ping':
                entry['peer'] = job['peer']
            (failures if severity == 'fail' else warnings).append(entry)
    devices_out = list(records.values())

    tls = OrderedDict()
    vnic_ips = OrderedDict()
    for rec in devices_out:
        if 'tls' in rec:
            tls[rec['device']] = rec['tls'].get('switch')
        if 'vnic' in rec:
            vnic_ips[rec['device']] = rec['vnic'].get('ip') if rec['vnic']['status'] == OK else None

    failed_devices = sorted(set(f['device'] for f in failures))
    summary = OrderedDict([
        ('devices', len(device_ids)),
        ('commands', len(jobs)),
        ('failures', len(failures)),
        ('warnings', len(warnings)),
        ('failed_devices', failed_devices),
        ('ok_devices', len([d for d in device_ids if d not in failed_devices])),
        ('by_check', OrderedDict((c, dict(cnt)) for c, cnt in by_check.items())),
        ('peers', sum(len(v) for k, v in peers_by_device.items() if k in by_device)),
    ])
    return {'devices': devices_out, 'summary': summary, 'failures': failures,
            'warnings': warnings, 'tls': tls, 'vnic_ips': vnic_ips}


def failure_message(failures, hints=True):
    """One line naming every failing device: device, check, what was seen, the command."""
    if not failures:
        return ''
    parts = ['device %s %s: %s [reproduce: %s]' % (f['device'], f['check'], f['seen'], f['command'])
             for f in failures]
    msg = '%d NPU network check(s) failed on this node: %s' % (len(failures), '; '.join(parts))
    if hints:
        seen = []
        for f in failures:
            if f['check'] not in seen:
                seen.append(f['check'])
        msg += '. What to do: ' + '; '.join('%s: %s' % (c, HINTS[c]) for c in seen if c in HINTS)
    return msg


def summarize_warnings(warnings):
    """One short line per check for ``module.warn`` (the detail is in ``check_warnings``)."""
    grouped = OrderedDict()
    for w in warnings:
        grouped.setdefault((w['check'], w['status']), []).append(w)
    lines = []
    for (check, status), items in grouped.items():
        devices = sorted(set(w['device'] for w in items))
        lines.append('%s %s on device(s) %s (advisory; e.g. %s -> %s)' % (
            check, status, ','.join(str(d) for d in devices), items[0]['command'], items[0]['seen']))
    return lines


# --------------------------------------------------------------------------
# Controller side: across nodes
# --------------------------------------------------------------------------

def _device_map(value, key):
    """Accept ``{device: x}``, an hccn_check result (its ``key`` map) or its ``devices`` list."""
    if value is None:
        return OrderedDict()
    if isinstance(value, dict) and key in value and isinstance(value[key], dict):
        value = value[key]
    elif isinstance(value, dict) and isinstance(value.get('devices'), list):
        out = OrderedDict()
        for rec in value['devices']:
            if key == 'vnic_ips':
                vnic = rec.get('vnic') or {}
                out[int(rec['device'])] = vnic.get('ip') if vnic.get('status') == OK else None
            else:
                out[int(rec['device'])] = (rec.get('tls') or {}).get('switch')
        return out
    out = OrderedDict()
    for dev, item in (value or {}).items():
        out[int(dev)] = item
    return out


def peer_map(node_results, mode='same_index', self_node=None):
    """Peer vNIC IPs per local device, for the ``peers`` option of ``hccn_check``.

    ``node_results``: ``{node: {device: vnic_ip}}`` (or each node's hccn_check
    result).  ``same_index``: device d pings device d of every other node;
    ``all_pairs``: every device pings every device of every other node.  Devices
    without an IP are skipped (their own vNIC check fails on their node).
    Returns ``{device: [ip, ...]}``, nodes in the given order.
    """
    if mode not in PEER_MODES:
        raise ValueError('mode must be one of %s, got %r' % (', '.join(PEER_MODES), mode))
    maps = OrderedDict((node, _device_map(val, 'vnic_ips')) for node, val in node_results.items())
    local_devices = sorted(set(d for m in maps.values() for d in m))
    if self_node is not None and self_node in maps and maps[self_node]:
        local_devices = sorted(maps[self_node])
    own_ips = set(ip for ip in (maps.get(self_node) or {}).values() if ip)
    others = [(node, m) for node, m in maps.items() if node != self_node]
    peers = OrderedDict()
    for device in local_devices:
        ips = []
        for _node, m in others:
            if mode == 'same_index':
                candidates = [m.get(device)]
            else:
                candidates = [m[d] for d in sorted(m)]
            for ip in candidates:
                if ip and ip not in own_ips and ip not in ips:
                    ips.append(ip)
        peers[device] = ips
    return peers


def compare_tls(per_node, scope='all', tool='hccn_tool'):
    """Cross-node TLS consistency: a list of failures (empty when consistent).

    ``per_node``: ``{node: {device: switch}}`` (or each node's hccn_check
    result).  ``scope='all'``: every device of every node must carry the same
    switch (any device may talk to any device across P and D); ``'device'``:
    device d must match device d on every other node (the checklist's minimum).
    A device whose switch could not be read is a failure too.  Each failure:
    ``{node, device, check: 'tls', seen, expected, command, msg}``.  ``tool``:
    the hccn_tool the reproduce command names, one for all nodes or
    ``{node: path}`` (each node's resolved ``hccn_tool`` result).
    """
    if scope not in TLS_SCOPES:
        raise ValueError('scope must be one of %s, got %r' % (', '.join(TLS_SCOPES), scope))
    maps = OrderedDict((node, _device_map(val, 'tls')) for node, val in per_node.items())
    failures = []

    def fail(node, device, seen, expected, why):
        path = (tool.get(node) or 'hccn_tool') if isinstance(tool, dict) else tool
        cmd = '%s -i %s -tls -g | grep switch' % (shlex.quote(path), device)
        failures.append(OrderedDict([
            ('node', node), ('device', device), ('check', 'tls'), ('seen', seen), ('expected', expected),
            ('command', cmd),
            ('msg', 'node %s device %s: tls switch %s, %s [reproduce on %s: %s]'
             % (node, device, 'unreadable' if seen is None else seen, why, node, cmd)),
        ]))

    groups = OrderedDict()
    for node, m in maps.items():
        for device, switch in m.items():
            groups.setdefault('all' if scope == 'all' else device, []).append((node, device, switch))
    for _key, members in groups.items():
        counts = Counter(s for _n, _d, s in members if s is not None)
        if not counts:
            expected = None
        else:
            ranked = counts.most_common()
            # the majority value; a tie is reported against the lowest value, deterministically
            expected = min(v for v, c in ranked if c == ranked[0][1])
        values = ', '.join('%s on %d' % (v, c) for v, c in sorted(counts.items()))
        for node, device, switch in members:
            if switch is None:
                fail(node, device, None, expected, 'could not be read')
            elif switch != expected:
                fail(node, device, switch, expected,
                     'expected %s like the others (values seen: %s)' % (expected, values))
    return failures
