# -*- coding: utf-8 -*-
# Copyright (c) ascend.vllm_pd contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure functions behind the ``npu_smi_info`` module.

``parse_npu_smi_info`` reads the table that ``npu-smi info`` prints and
``evaluate_chips`` turns the parsed chips and processes into hard failures and
advisory warnings.  Nothing here imports Ansible, so plain pytest tests it.

Table layout (A3, each chip takes two rows, the Phy-ID is the id ``hccn_tool -i``
takes)::

    | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    +===========================+===============+====================================================+
    | 0     Ascend910           | OK            | 174.3       37                0    / 0             |
    | 0     0                   | 0000:9D:00.0  | 0           0    / 0          3440 / 65536         |

Older boards (910A/910B) print ``Chip`` without ``Phy-ID``; 310P boards print no
HBM column.  Values can be ``-`` or ``NA``.  Anything the parser does not
understand is kept in ``warnings`` instead of raising.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

HEALTH_OK = 'OK'
HBM_POLICIES = ('warn', 'fail', 'ignore')

_BUS_ID_RE = re.compile(r'^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$')
_PAIR_RE = re.compile(r'(\S+)\s*/\s*(\S+)')
_VERSION_RE = re.compile(r'Version:\s*(\S+)')
_NPUSMI_VERSION_RE = re.compile(r'npu-smi\s+(\S+)')
_NO_PROC_RE = re.compile(r'No running processes found in NPU\s+(\d+)', re.IGNORECASE)
_NA_VALUES = ('-', 'NA', 'N/A', '--', '')


class NpuSmiParseError(ValueError):
    """``npu-smi info`` printed nothing this parser can use."""


def _num(value, kind=int):
    """``'174.3'`` -> 174.3, ``'-'``/``'NA'`` -> None, garbage -> ValueError."""
    value = value.strip()
    if value.upper() in _NA_VALUES:
        return None
    return kind(float(value)) if kind is int and '.' in value else kind(value)


def _cells(line):
    """``| a | b |`` -> ``['a', 'b']`` (None when the line is not a table row)."""
    stripped = line.strip()
    if len(stripped) < 2 or not stripped.startswith('|') or not stripped.endswith('|'):
        return None
    return [c.strip() for c in stripped[1:-1].split('|')]


def _split_values(cell):
    """Split ``'0    0 / 0    3440 / 65536'`` into singles ``['0']`` and pairs ``[('0','0'), ('3440','65536')]``."""
    pairs = _PAIR_RE.findall(cell)
    singles = _PAIR_RE.sub(' ', cell).split()
    return singles, pairs


def _is_int(token):
    return re.match(r'^\d+$', token) is not None


def _empty_chip():
    return {
        'npu': None, 'chip': None, 'phy_id': None, 'name': None, 'health': None,
        'power_w': None, 'temp_c': None, 'hugepages_used': None, 'hugepages_total': None,
        'aicore_pct': None, 'memory_used_mb': None, 'memory_total_mb': None,
        'hbm_used_mb': None, 'hbm_total_mb': None, 'bus_id': None,
    }


class _Parser(object):
    def __init__(self, text):
        self.text = text or ''
        self.version = None
        self.chips = []
        self.processes = []
        self.warnings = []
        self.idle_npus = []
        self.section = None          # None | 'chips' | 'processes'
        self.usage_columns = []      # ['memory', 'hbm'] from the second header row
        self.header = None           # pending first row of a chip record
        self.header_used = False     # a chip row consumed the pending header

    # -- helpers -----------------------------------------------------------
    def warn(self, lineno, line, why):
        self.warnings.append('line %d: %s: %r' % (lineno, why, line.strip()[:160]))
        if self.section == 'chips' and self.header is not None:
            # an unreadable row after an NPU row is its chip row: drop that chip (warned) rather
            # than keep a half record without its Phy-ID
            self.header_used = True

    def flush_header(self, lineno):
        """A first row that no chip row followed: keep what it says (single-row layouts)."""
        if self.header is not None and not self.header_used:
            chip = _empty_chip()
            chip.update(self.header)
            self.chips.append(chip)
            self.warnings.append('line %d: NPU %s has no chip row; chip fields left empty'
                                 % (lineno, self.header.get('npu')))
        self.header = None
        self.header_used = False

    # -- row kinds ---------------------------------------------------------
    def column_header(self, cells):
        joined = ' '.join(cells)
        if 'Process' in joined:
            self.section = 'processes'
            return
        self.section = 'chips'
        if len(cells) >= 3 and re.search(r'Usage', cells[2]):
            cols = []
            for name in re.findall(r'([A-Za-z]+)-Usage', cells[2]):
                low = name.lower()
                if low == 'hugepages':
                    continue
                cols.append('hbm' if low == 'hbm' else 'memory')
            if cols and not cells[0].upper().startswith('NPU'):
                self.usage_columns = cols

    def chip_first_row(self, lineno, line, cells):
        tokens = cells[0].split()
        singles, pairs = _split_values(cells[2]) if len(cells) > 2 else ([], [])
        try:
            head = {
                'npu': int(tokens[0]),
                'name': ' '.join(tokens[1:]) or None,
                'health': cells[1] or None,
                'power_w': _num(singles[0], float) if len(singles) > 0 else None,
                'temp_c': _num(singles[1]) if len(singles) > 1 else None,
                'hugepages_used': _num(pairs[0][0]) if pairs else None,
                'hugepages_total': _num(pairs[0][1]) if pairs else None,
            }
        except (ValueError, IndexError) as exc:
            self.warn(lineno, line, 'unreadable NPU row (%s)' % exc)
            return
        self.flush_header(lineno)
        self.header = head
        self.header_used = False

    def chip_second_row(self, lineno, line, cells):
        if self.header is None:
            self.warn(lineno, line, 'chip row without an NPU row before it')
            return
        tokens = cells[0].split()
        singles, pairs = _split_values(cells[2]) if len(cells) > 2 else ([], [])
        chip = _empty_chip()
        chip.update(self.header)
        try:
            chip['chip'] = int(tokens[0])
            chip['phy_id'] = int(tokens[1]) if len(tokens) > 1 else None
            chip['bus_id'] = None if cells[1].upper() in _NA_VALUES else cells[1]
            chip['aicore_pct'] = _num(singles[0]) if singles else None
            # pairs in the order the header names them (memory first when it names none)
            columns = list(self.usage_columns) or ['memory', 'hbm']
            for column, (used, total) in zip(columns, pairs):
                chip['%s_used_mb' % column] = _num(used)
                chip['%s_total_mb' % column] = _num(total)
        except (ValueError, IndexError) as exc:
            self.warn(lineno, line, 'unreadable chip row (%s)' % exc)
            return
        self.chips.append(chip)
        self.header_used = True

    def process_row(self, lineno, line, cells):
        match = _NO_PROC_RE.search(line)
        if match:
            self.idle_npus.append(int(match.group(1)))
            return
        if len(cells) < 4:
            self.warn(lineno, line, 'unreadable process row')
            return
        tokens = cells[0].split()
        try:
            proc = {
                'npu': int(tokens[0]),
                'chip': int(tokens[1]) if len(tokens) > 1 else None,
                'pid': int(cells[1]),
                'name': cells[2] or None,
                'memory_mb': _num(cells[3]),
            }
        except (ValueError, IndexError) as exc:
            self.warn(lineno, line, 'unreadable process row (%s)' % exc)
            return
        self.processes.append(proc)

    # -- main loop ---------------------------------------------------------
    def run(self):
        for lineno, line in enumerate(self.text.splitlines(), 1):
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith('+'):
                if self.section == 'chips':
                    self.flush_header(lineno)
                continue
            cells = _cells(line)
            if cells is None:
                self.warn(lineno, line, 'not a table line')
                continue
            if self.version is None and 'npu-smi' in stripped:
                match = _VERSION_RE.search(stripped) or _NPUSMI_VERSION_RE.search(stripped)
                if match:
                    self.version = match.group(1)
                    continue
            if _NO_PROC_RE.search(stripped):
                self.section = 'processes'
                self.process_row(lineno, line, cells)
                continue
            first = cells[0].split()
            if not first or not _is_int(first[0]):
                if first and first[0].upper() in ('NPU', 'CHIP'):
                    self.column_header(cells)
                else:
                    self.warn(lineno, line, 'unexpected row')
                continue
            if self.section == 'processes':
                self.process_row(lineno, line, cells)
            elif self.section == 'chips':
                if len(cells) < 2:
                    self.warn(lineno, line, 'too few columns')
                elif _BUS_ID_RE.match(cells[1]) or (
                        self.header is not None and cells[1].upper() in _NA_VALUES):
                    self.chip_second_row(lineno, line, cells)
                else:
                    self.chip_first_row(lineno, line, cells)
            else:
                self.warn(lineno, line, 'data row before any column header')
        if self.section == 'chips':
            self.flush_header(len(self.text.splitlines()))
        return self


def parse_npu_smi_info(text):
    """Parse ``npu-smi info`` output.

    Returns ``{'version', 'chips', 'processes', 'warnings'}``; raises
    ``NpuSmiParseError`` when neither a chip nor a version line was found
    (a driver error message, an empty output, another command's output).
    """
    parser = _Parser(text).run()
    if not parser.chips and parser.version is None:
        head = (text or '').strip().splitlines()[:5]
        raise NpuSmiParseError(
            'no chip table in npu-smi output%s' % (
                (': ' + ' | '.join(line.strip() for line in head)) if head else ' (empty output)'))
    if not parser.chips:
        parser.warnings.append('npu-smi printed a version but no chips')
    return {
        'version': parser.version,
        'chips': parser.chips,
        'processes': parser.processes,
        'warnings': parser.warnings,
    }


def chip_label(chip):
    """``'phy-id 3 (NPU 1 chip 1)'`` or ``'NPU 1 chip 0'`` when there is no Phy-ID."""
    where = 'NPU %s chip %s' % (chip.get('npu'), chip.get('chip'))
    if chip.get('phy_id') is not None:
        return 'phy-id %s (%s)' % (chip['phy_id'], where)
    return where


def evaluate_chips(chips, required_chips, processes, own_pids=(), hbm_in_use_policy='warn',
                   hbm_used_limit_mb=None):
    """Judge the chips of one node.

    Hard failures: fewer chips with health OK than ``required_chips`` (skipped when
    None), and every chip whose health is not OK.  HBM in use (a process not in
    ``own_pids``, or with ``hbm_used_limit_mb`` set, a chip using more HBM than
    that without any process of ours on it) is a warning, a failure with policy
    ``fail``, nothing with ``ignore``.

    Returns ``(failures, warnings)``: lists of dicts with ``check``, ``msg`` and
    the chip's ``npu``/``chip``/``phy_id`` where one chip is concerned.
    """
    if hbm_in_use_policy not in HBM_POLICIES:
        raise ValueError('hbm_in_use_policy must be one of %s, got %r'
                         % (', '.join(HBM_POLICIES), hbm_in_use_policy))
    failures, warnings = [], []
    own = set(int(p) for p in (own_pids or ()))
    healthy = [c for c in chips if c.get('health') == HEALTH_OK]

    if required_chips is not None and len(healthy) < int(required_chips):
        failures.append({
            'check': 'chip_count',
            'msg': 'only %d of %d chips report health OK, %d required'
                   % (len(healthy), len(chips), int(required_chips)),
        })
    for chip in chips:
        if chip.get('health') != HEALTH_OK:
            failures.append({
                'check': 'health', 'npu': chip.get('npu'), 'chip': chip.get('chip'),
                'phy_id': chip.get('phy_id'),
                'msg': '%s health is %s, expected OK' % (chip_label(chip), chip.get('health')),
            })

    if hbm_in_use_policy == 'ignore':
        return failures, warnings
    sink = failures if hbm_in_use_policy == 'fail' else warnings

    by_location = {}
    for chip in chips:
        by_location[(chip.get('npu'), chip.get('chip'))] = chip
    own_locations = set()
    for proc in processes or ():
        location = (proc.get('npu'), proc.get('chip'))
        if proc.get('pid') in own:
            own_locations.add(location)
            continue
        chip = by_location.get(location) or {'npu': proc.get('npu'), 'chip': proc.get('chip')}
        sink.append({
            'check': 'hbm_in_use', 'npu': proc.get('npu'), 'chip': proc.get('chip'),
            'phy_id': chip.get('phy_id'), 'pid': proc.get('pid'),
            'msg': '%s: process %s (%s) holds %s MB of HBM'
                   % (chip_label(chip), proc.get('pid'), proc.get('name'), proc.get('memory_mb')),
        })
    if hbm_used_limit_mb is not None:
        listed = set((p.get('npu'), p.get('chip')) for p in processes or ())
        for chip in chips:
            location = (chip.get('npu'), chip.get('chip'))
            used = chip.get('hbm_used_mb')
            if used is None or location in own_locations or location in listed:
                continue
            if used > hbm_used_limit_mb:
                sink.append({
                    'check': 'hbm_in_use', 'npu': chip.get('npu'), 'chip': chip.get('chip'),
                    'phy_id': chip.get('phy_id'), 'pid': None,
                    'msg': '%s uses %s of %s MB HBM (limit for an idle chip %s MB) with no process listed'
                           % (chip_label(chip), used, chip.get('hbm_total_mb'), hbm_used_limit_mb),
                })
    return failures, warnings


def run_npu_smi(npu_smi_path, runner, timeout):
    """Run ``npu-smi info`` through ``runner(argv, timeout) -> (rc, stdout, stderr)``.

    Returns ``(rc, stdout, stderr, argv)``; the runner raises on timeout or a
    missing binary, the caller turns that into a message.
    """
    argv = [npu_smi_path, 'info']
    rc, out, err = runner(argv, timeout)
    return rc, out, err, argv
