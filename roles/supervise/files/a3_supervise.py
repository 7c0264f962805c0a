#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node-side helper of the systemd units of ascend.vllm_pd (installed by the role supervise).

systemd is the supervisor: it restarts a unit whose process exited (Restart=always) and stops
retrying after too many starts in a window (StartLimitBurst / StartLimitIntervalSec). This helper
only gives those units what systemd 252 lacks (exponential back-off, a record of why each exit
happened) and what no process supervisor sees (an engine that answers /health but produces no
token, a DP group that lost a member). Python 3 standard library only; no state but files.

  wait      ExecStartPre/Post: wait until the container runs, TCP endpoints accept and readiness marks
            exist (bounded)
  backoff   ExecStartPre: sleep before an automatic restart, doubling with each recent crash (not before
            a deliberate start; a stop that ends the sleep is no crash: the process never ran)
  deliberate before a start or restart the deployment asks for: that start waits no back-off
  stop-mark ExecStop: remember that the stop was asked for (MAINPID still set) or not
  record    ExecStopPost: append the exit and its reason (log signature) to the unit's record; reset
            systemd's start limit after an exit that is no failure of the unit's own (planned, or a peer's)
  canary    ascend-vllm-canary.service: probe local ranks with a real request, restart if hung, frozen
            (/health failing past a grace after it answered, or never answering within the start timeout)
            or held by a peer past a bound; a rank that refuses the canary's key (401/403) is reported,
            never restarted
  status    JSON of every unit's record and systemd state, for playbooks/status.yml
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

RECORD_KEEP = 200          # lines kept per record file
# The canary's decision: restart this node's engines for reason; peer: the cause is another node's rank that is
# down (the group must form again), no crash of this unit.
CanaryRestart = collections.namedtuple("CanaryRestart", "reason peer")
# The canary's time bounds, in seconds (None: the rule is off): a local rank that answered /health and then fails it
# for down_grace is frozen; one that never answered it start_timeout after the unit started never came up; ranks stalled
# while a peer fails /health wait peer_wait for the peer's own node to restart it before restarting themselves.
CanaryBounds = collections.namedtuple("CanaryBounds", "down_grace start_timeout peer_wait")
# What the canary keeps over a restart of the unit (the rest describes the ranks of one start).
CANARY_KEPT = ("unauthorized", "peer_restarted")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # never through an HTTP proxy


# ------------------------------------------------------------------------------------------ pure logic

def read_record(path: str) -> list:
    """The events of a record file (JSON lines), oldest first; unreadable lines are skipped."""
    events = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict) and isinstance(ev.get("t"), (int, float)):
                    events.append(ev)
    except FileNotFoundError:
        pass
    return events


def crashes_within(events: list, now: float, window_s: float) -> list:
    """This unit's own unplanned exits (crashes, hang restarts) in the last window_s seconds, after its
    last exit that reset systemd's start limit (a peer that went away, or a planned stop: see resets_start_limit),
    so the count starts afresh as systemd's does."""
    last_reset = max([e["t"] for e in events if e.get("peer") or e.get("reset")], default=None)
    return [e for e in events if not e.get("planned") and not e.get("peer") and now - e["t"] <= window_s
            and (last_reset is None or e["t"] > last_reset)]


def resets_start_limit(events: list, event: dict) -> bool:
    """Whether the exit `event` (not yet in `events`, the record so far) resets systemd's start-limit counter, so
    that systemd gives up on the unit's own failures only, as crashes_within counts them. systemd counts every
    start: without this, an operator's planned restarts (systemctl restart; site.yml's handler resets it itself)
    would use up the crash loop's allowance and a later restart would end in 'start-limit-hit'. Reset by an exit a
    peer caused, and by a planned stop (a deployment's, an operator's or the canary's restart for a peer), except
    the stop of a restart the canary asked for after this unit's own failure (frozen, hung, never served): that one
    counts, as a crash does."""
    if event.get("peer"):
        return True
    if not event.get("planned"):
        return False
    last = events[-1] if events else {}
    return not (last.get("event") == "canary" and not last.get("planned") and not last.get("peer"))


def backoff_delay(events: list, now: float, base: float, maximum: float, window_s: float) -> float:
    """Seconds to wait before this start. 0 when the last stop was planned or caused by a peer (or none
    was recorded) or after the first crash in the window; then base, 2 x base, 4 x base ... capped at
    maximum."""
    if not events or events[-1].get("planned") or events[-1].get("peer"):
        return 0.0
    n = len(crashes_within(events, now, window_s))
    if n <= 1:
        return 0.0
    return float(min(maximum, base * 2 ** (n - 2)))


def find_signature(text: str, signatures: list):
    """The first signature (list order: specific first) matching a line: (signature, line) or (None, None)."""
    lines = text.splitlines()
    for sig in signatures:
        try:
            rx = re.compile(sig["pattern"])
        except (re.error, KeyError, TypeError):
            continue
        for line in reversed(lines):   # the newest matching line says most about this exit
            if rx.search(line):
                return sig, line.strip()
    return None, None


def exit_reason(result: str, code: str, status: str, log_text: str, signatures: list) -> str:
    """One line: why the unit's process ended, from systemd's $SERVICE_RESULT/$EXIT_CODE/$EXIT_STATUS
    and the newest fatal signature in the log since the start."""
    return exit_cause(result, code, status, log_text, signatures)[0]


def exit_cause(result: str, code: str, status: str, log_text: str, signatures: list) -> tuple:
    """(exit_reason's line, whether the matched signature says a peer caused the exit: `peer: true`)."""
    sig, line = find_signature(log_text, signatures)
    how = "exited with status %s" % status if code == "exited" else "%s %s" % (code or "ended", status or "")
    how = how.strip()
    if sig is not None:
        return "%s: %s (%s)" % (how, line[:300], sig.get("advice", "").strip()), bool(sig.get("peer"))
    return "%s (%s); no fatal line in the log" % (how, result or "unknown result"), False


def crash_loop_message(unit: str, crashes: int, restarts: int, window_min: float, reason: str) -> str:
    if crashes > restarts:
        return ("%s: crash loop: %d unplanned exits within %g min, over the limit of %d restarts: systemd stops "
                "restarting it at its start limit (then 'start-limit-hit' here, GAVE UP in playbooks/status.yml). "
                "Last: %s. Fix the cause, then rerun site.yml (or systemctl reset-failed %s && systemctl start %s)."
                % (unit, crashes, window_min, restarts, reason, unit, unit))
    return "%s: unplanned exit %d of %d allowed within %g min: %s" % (unit, crashes, restarts, window_min, reason)


def canary_verdict(status: int, body) -> str:
    """What one canary completion says about a rank whose /health answered 200.

    "unauthorized": 401 or 403, the rank refused the canary's key (vllm_api_key differs, or the canary has none):
                    no hang (a restart cannot fix a key), no proof that it produces tokens either.
    "ok":           a token came back, or any other error answer (the engine is alive, not hung).
    "hung":         no answer in time (status 0), or a 200 without a token (see produced_a_token)."""
    if status in (401, 403):
        return "unauthorized"
    if status == 200:
        return "ok" if produced_a_token(body) else "hung"
    return "hung" if status == 0 else "ok"


def produced_a_token(body) -> bool:
    """Whether a 200 answer of /v1/completions carries a generated token: it has a choice, and its usage counts a
    completion token (vLLM's answers always count them; a token may decode to no text, e.g. an end of sequence or a
    part of a character, and still proves the engine runs); without a count, a choice's text is not empty. An empty
    or unparsable body, no choice, completion_tokens 0 or an empty text without a count are silence."""
    if not isinstance(body, dict):
        return False
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return False
    usage = body.get("usage")
    counted = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(counted, int):
        return counted > 0
    return any(isinstance(c, dict) and isinstance(c.get("text"), str) and c["text"] != "" for c in choices)


def canary_step(state: dict, local: dict, peers: dict, hang_failures: int, peer_failures: int,
                now: float = 0.0, up_for=None, bounds=None):
    """Advance the canary's counters by one round and decide.

    state: {"hang": {url: n}, "peer": {url: n}, ...} from the previous round (mutated and returned).
    local: {url: "ok" | "down" | "hung" | "unauthorized"}: "down" = /health fails, "hung" = /health 200 but the
           canary request produced no token in time, "unauthorized" = /health 200 but the rank refused the canary's
           key: its silent count neither grows nor starts over (the round says nothing about tokens), and it never
           restarts anything.
    peers: {url: bool healthy} for the other ranks of this node's DP group.
    now, up_for, bounds: the round's time, the seconds since the unit started (None: unknown) and the CanaryBounds
           (None: only the counting rules below apply).
    Rules, first match wins:
      frozen    (bounds) a local rank that answered /health since the unit started fails it for down_grace: this
                node's own rank, whatever the peers do.
      no start  (bounds) a local rank that never answered /health, up_for >= start_timeout.
      held      (bounds) a local rank is silent while a peer fails /health: in a lockstep DP group a frozen peer
                stalls every member, and restarting here cannot help until the peer's own node restarted it. Wait up
                to peer_wait (state "held" names the peer), then restart so the group forms again (peer: True).
      hung      a local rank silent hang_failures rounds in a row (with bounds: rounds with every peer healthy; a
                hold starts the count over, since a stalled group needs a moment to step again after its peer is back).
      peer      a peer fails /health peer_failures rounds in a row while every local rank serves; with bounds once
                per outage of that peer (state "peer_restarted"), so a peer that stays away does not restart this
                node again and again.
    Returns (state, CanaryRestart or None): a CanaryRestart means restart this node's engines now."""
    hang = state.setdefault("hang", {})
    peer = state.setdefault("peer", {})
    for url, verdict in local.items():
        if verdict != "unauthorized":
            hang[url] = hang.get(url, 0) + 1 if verdict == "hung" else 0
    for url in list(hang):
        if url not in local:
            del hang[url]
    # this node's ranks are up (the peer rule's condition): each answered /health and its API answered the canary
    # (a refused key is an answer of the API server too)
    serving = bool(local) and all(v in ("ok", "unauthorized") for v in local.values())
    for url, healthy in peers.items():
        peer[url] = peer.get(url, 0) + 1 if (serving and not healthy) else 0
    for url in list(peer):
        if url not in peers:
            del peer[url]
    peers_down = sorted(url for url, healthy in peers.items() if not healthy)
    answered, down_since, restarted = [], {}, []
    if bounds is not None:      # the timed rules' record of this start
        answered, down_since = state.setdefault("answered", []), state.setdefault("down_since", {})
        for url, verdict in sorted(local.items()):
            if verdict == "down":
                down_since.setdefault(url, now)
            else:
                down_since.pop(url, None)
                if url not in answered:
                    answered.append(url)
        for url in list(down_since):
            if url not in local:
                del down_since[url]
        restarted = state.setdefault("peer_restarted", [])
        restarted[:] = [url for url in restarted if url in peers_down]     # a peer that answers again is forgiven
    after = {"hang": {}, "peer": {}}     # the counters start over after a restart; what was refused stays known
    for key in CANARY_KEPT:
        if state.get(key):
            after[key] = state[key]
    if bounds is not None:
        for url, since in sorted(down_since.items()):
            if url in answered and now - since >= bounds.down_grace:
                return after, CanaryRestart(
                    "stopped serving: %s answered /health since this start, then failed it for %.0fs (grace %gs): a "
                    "frozen or wedged rank, whose process lives on" % (url, now - since, bounds.down_grace), False)
            if url not in answered and up_for is not None and up_for >= bounds.start_timeout:
                return after, CanaryRestart(
                    "never served: %s has not answered /health in the %.0fs since the unit started (start timeout "
                    "%gs)" % (url, up_for, bounds.start_timeout), False)
    silent = [url for url, n in sorted(hang.items()) if n > 0]
    if bounds is not None and silent and peers_down:
        held = state.get("held") or {}
        if held.get("by") not in peers_down:
            held = {"by": peers_down[0], "since": now}
            state["held"] = held
        for url in hang:        # silence while held is the peer's doing: the hung rule counts afresh after the hold
            hang[url] = 0
        if now - held["since"] >= bounds.peer_wait:
            return after, CanaryRestart(
                "DP group held by %s: it has failed /health for %.0fs while this node's ranks produce no token (%s); "
                "its own node did not bring it back within %gs: restarting this node's ranks so the whole group "
                "forms again" % (held["by"], now - held["since"], ", ".join(silent), bounds.peer_wait), True)
        return state, None
    state.pop("held", None)
    for url, n in sorted(hang.items()):
        if n >= hang_failures:
            return after, CanaryRestart(
                "hung: %s answers /health but produced no token in %d canary requests in a row" % (url, n), False)
    for url, n in sorted(peer.items()):
        if n >= peer_failures and not (bounds is not None and url in restarted):
            if bounds is not None:
                after["peer_restarted"] = sorted(set(restarted) | {url})
            return after, CanaryRestart(
                "DP group incomplete: %s has failed /health for %d checks while this node's ranks serve; "
                "restarting them so the whole group forms again" % (url, n), True)
    return state, None


def unauthorized_step(state: dict, local: dict, statuses: dict) -> list:
    """Keep state["unauthorized"] ({url: HTTP status}: the local ranks that refuse the canary's key) up to date and
    return what changed, once per change: [(url, status)] for a rank that started refusing (or refuses with
    another status), [(url, None)] for one that accepts the key again. A rank that was not asked this round
    ("down") keeps what was known of it. local: canary_step's verdicts; statuses: {url: HTTP status} of the
    canary requests."""
    known = state.get("unauthorized") or {}
    now = {}
    changes = []
    for url, verdict in sorted(local.items()):
        if verdict == "unauthorized":
            now[url] = statuses.get(url, 401)
            if known.get(url) != now[url]:
                changes.append((url, now[url]))
        elif verdict == "down":
            if url in known:
                now[url] = known[url]
        elif url in known:
            changes.append((url, None))
    if now:
        state["unauthorized"] = now
    else:
        state.pop("unauthorized", None)
    return changes


def unauthorized_message(unit: str, url: str, status, key_source: str) -> str:
    """The journal's line for a change of unauthorized_step (never the key itself)."""
    if status is None:
        return "%s: %s accepts the canary's key again; its canary requests count again" % (unit, url)
    return ("%s: %s refused the canary request with HTTP %d (unauthorized: the canary sends %s). Not a hang and no "
            "restart (a restart cannot fix a key), but no proof of life either: this rank is not checked for hangs "
            "until it accepts the key. Fix: the engines and the canary must hold the same vllm_api_key (Ansible "
            "Vault): rerun site.yml, which writes the key file and restarts the engines whose key changed (add -e "
            "vllm_restart=true when the file already holds the key but the engines run with another one). "
            "a3_supervise.py status lists the rank meanwhile (canary_unauthorized)."
            % (unit, url, status, key_source))


def read_api_key(path: str) -> tuple:
    """(key, "") from the canary's key file, or ("", why there is none): the canary then sends no key."""
    if not path:
        return "", "no key (its settings name no api_key_file: vllm_api_key is not set)"
    try:
        with open(path, encoding="utf-8") as fh:
            key = fh.read().strip()
    except OSError as exc:
        return "", "no key (cannot read %s: %s)" % (path, exc.strerror or exc)
    if not key:
        return "", "no key (%s is empty)" % path
    return key, ""


# ------------------------------------------------------------------------------------------- effects

def append_record(path: str, event: dict) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    events = read_record(path)[-(RECORD_KEEP - 1):] + [event]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for ev in events:
            fh.write(json.dumps(ev, sort_keys=True) + "\n")
    os.replace(tmp, path)


def log_since_start(path: str, offset_file: str, limit: int = 400000) -> str:
    """The log text written since the unit's start (offset saved by `backoff`), at most limit bytes."""
    try:
        with open(offset_file, encoding="utf-8") as fh:
            offset = int(fh.read().strip() or 0)
    except (OSError, ValueError):
        offset = 0
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            if size < offset:
                offset = 0
            fh.seek(max(offset, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def forgive(unit: str) -> None:
    """An exit a peer caused is no crash of this unit: reset systemd's start-limit counter (reset-failed),
    so a node reboot or a restarted container elsewhere in the DP group never makes this unit give up."""
    try:
        subprocess.run(["systemctl", "reset-failed", unit], check=False, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        pass


def container_running(name: str) -> bool:
    try:
        out = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", name], capture_output=True,
                             text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip() == "true"


def pid_alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except ValueError:
        return True         # no number (MAINPID unset): cannot tell
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tcp_open(hostport: str, timeout: float = 2.0) -> bool:
    """HOST:PORT accepts a connection; of a comma-separated list (an etcd cluster's members), any one does (tried
    in turn, each within timeout)."""
    for item in hostport.split(","):
        host, _unused, port = item.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            pass
    return False


def tcp_label(hostport: str) -> str:
    """How the messages name a --tcp value: a list as "one of h1:p1, h2:p2"."""
    items = [item.strip() for item in hostport.split(",")]
    return "one of " + ", ".join(items) if len(items) > 1 else hostport


def http_status(url: str, timeout: float, body: dict | None = None, headers: dict | None = None) -> tuple:
    """(status, parsed JSON or None); status 0 when nothing answered in time."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                 headers=dict({"Content-Type": "application/json"} if data else {}, **(headers or {})))
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            raw = resp.read()
            try:
                return resp.status, json.loads(raw) if raw else None
            except ValueError:
                return resp.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (urllib.error.URLError, OSError, ValueError):
        return 0, None


def systemctl_show(unit: str, props: list) -> dict:
    try:
        out = subprocess.run(["systemctl", "show", unit, "-p", ",".join(props)], capture_output=True, text=True,
                             timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


# ------------------------------------------------------------------------------------------ commands

def _note(log: str, text: str) -> None:
    """A line for the operator, on stdout (the journal) and, if given, in the service's log."""
    print(text)
    sys.stdout.flush()
    if log:
        try:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write("%s a3_supervise: %s\n" % (time.strftime("%Y-%m-%d %H:%M:%S"), text))
        except OSError:
            pass


def cmd_wait(args) -> int:
    """Hard waits (the container, --tcp) must succeed within --timeout or the start fails. Soft waits
    (--soft-tcp) are only worth waiting for: after --soft-timeout the start goes on, and what it then
    runs into (a DP group that cannot form, say) is reported by the service itself."""
    deadline = time.monotonic() + args.timeout
    hard = list(zip(args.tcp, args.what + [""] * len(args.tcp)))
    marks = list(zip(args.file, args.file_what + [""] * len(args.file)))
    while True:
        if args.pid and not pid_alive(args.pid):
            # ExecStartPost: systemd handles the main process' exit only after this wait ends
            print("the unit's main process %s ended before it was ready" % args.pid, file=sys.stderr)
            return 1
        pending = []
        if args.container and not container_running(args.container):
            pending.append("container %s running" % args.container)
        else:
            pending += ["%s (%s) accepting connections" % (tcp_label(hp), what) for hp, what in hard
                        if not tcp_open(hp)]
            pending += ["%s (%s) present" % (path, what) for path, what in marks if not os.path.exists(path)]
        if not pending:
            break
        if time.monotonic() >= deadline:
            print("gave up after %gs waiting for: %s" % (args.timeout, "; ".join(pending)), file=sys.stderr)
            return 1
        time.sleep(args.interval)
    soft = list(zip(args.soft_tcp, args.soft_what + [""] * len(args.soft_tcp)))
    waiting = [(hp, what) for hp, what in soft if not tcp_open(hp)]
    if waiting:
        _note(args.log, "waiting up to %gs for %s" % (
            args.soft_timeout, ", ".join("%s (%s)" % w for w in waiting)))
        soft_deadline = time.monotonic() + args.soft_timeout
        while waiting and time.monotonic() < soft_deadline:
            time.sleep(args.interval)
            waiting = [(hp, what) for hp, what in waiting if not tcp_open(hp)]
        if waiting:
            _note(args.log, "starting anyway: %s not listening after %gs" % (
                ", ".join("%s (%s)" % w for w in waiting), args.soft_timeout))
    return 0


def _mark(marker: str) -> None:
    """Leave the marker file (its content: when)."""
    with open(marker, "w", encoding="utf-8") as fh:
        fh.write(str(time.time()))


def _take(marker: str) -> bool:
    """Remove the marker file; whether it was there."""
    try:
        os.unlink(marker)
        return True
    except FileNotFoundError:
        return False


def cmd_backoff(args) -> int:
    events = read_record(args.record)
    delay = backoff_delay(events, time.time(), args.base, args.max, args.window_min * 60)
    if _take(args.record + ".deliberate"):
        if delay > 0:
            print("a start the deployment asked for: no back-off (it would have been %gs)" % delay)
        delay = 0.0
    if delay > 0:
        print("back-off: waiting %gs before restarting (%d crashes within %g min)"
              % (delay, len(crashes_within(events, time.time(), args.window_min * 60)), args.window_min))
        sys.stdout.flush()
        # while it sleeps, a stop (systemctl stop/restart) ends this start before the process ran: record
        # reads the marker and does not count that as a crash
        _mark(args.record + ".backoff")
        time.sleep(delay)
        _take(args.record + ".backoff")
    if args.log:
        # remember where this run's log starts, so `record` reads only what this run wrote
        try:
            size = os.path.getsize(args.log)
        except OSError:
            size = 0
        with open(args.record + ".offset", "w", encoding="utf-8") as fh:
            fh.write(str(size))
    return 0


def cmd_deliberate(args) -> int:
    """Before `systemctl start/restart` asked for by the deployment (after an operator fixed the cause):
    the next start waits no back-off. The back-off is for systemd's automatic restarts."""
    _mark(args.record + ".deliberate")
    return 0


def cmd_stop_mark(args) -> int:
    """ExecStop runs on every stop, also after the process ended on its own; only then is $MAINPID
    empty. A stop asked for while the process runs (systemctl stop/restart) is planned."""
    if args.mainpid.strip():
        _mark(args.record + ".planned")
    return 0


def cmd_record(args) -> int:
    planned = _take(args.record + ".planned")
    in_backoff = _take(args.record + ".backoff")
    result = os.environ.get("SERVICE_RESULT", "")
    code = os.environ.get("EXIT_CODE", "")
    status = os.environ.get("EXIT_STATUS", "")
    signatures = []
    if args.signatures:
        try:
            with open(args.signatures, encoding="utf-8") as fh:
                signatures = json.load(fh)
        except (OSError, ValueError):
            signatures = []
    text = log_since_start(args.log, args.record + ".offset") if args.log else ""
    now = time.time()
    peer = False
    if planned:
        reason = "planned stop (systemctl stop/restart)"
    elif in_backoff and result != "timeout":
        # stopped while ExecStartPre slept: the process never ran, so this is no crash
        planned, reason = True, "stopped during its restart back-off (the process never ran)"
    else:
        reason, peer = exit_cause(result, code, status, text, signatures)
    event = {"t": now, "event": "exit", "planned": planned, "reason": reason,
             "result": result, "code": code, "status": status}
    if peer:
        event["peer"] = True
    reset = resets_start_limit(read_record(args.record), event)
    if reset and not peer:
        event["reset"] = True
    append_record(args.record, event)
    if reset:
        forgive(args.unit)
    if peer:
        print("%s: ended with its DP group, whose other member went away (not counted towards the crash loop; "
              "restarting): %s" % (args.unit, reason))
    elif not planned:
        crashes = len(crashes_within(read_record(args.record), now, args.window_min * 60))
        print(crash_loop_message(args.unit, crashes, args.restarts, args.window_min, reason))
    else:
        print("%s: %s" % (args.unit, reason))
    return 0


def cmd_canary(args) -> int:
    with open(args.config, encoding="utf-8") as fh:
        cfg = json.load(fh)
    unit = cfg["unit"]
    state_path = cfg["record"] + ".canary"
    show = systemctl_show(unit, ["ActiveState", "InvocationID", "ActiveEnterTimestampMonotonic"])
    if show.get("ActiveState") != "active":
        if os.path.exists(state_path):
            os.unlink(state_path)
        return 0
    state = read_canary_state(cfg["record"])
    invocation = show.get("InvocationID", "")
    if invocation and state.get("invocation") != invocation:
        # a new start of the unit (the canary did not see it inactive in between): its ranks start afresh
        state = dict((key, state[key]) for key in CANARY_KEPT if state.get(key))
        state["invocation"] = invocation
    bounds = canary_bounds(cfg)
    # the engines' key (vllm_api_key), from its 0600 file: never in argv nor in the settings
    key, no_key = read_api_key(cfg.get("api_key_file", ""))
    auth = {"Authorization": "Bearer " + key} if key else {}
    local, statuses = {}, {}
    for base in cfg["local"]:
        status, _unused = http_status(base + "/health", cfg.get("health_timeout", 5))
        if status != 200:
            local[base] = "down"
            continue
        status, body = http_status(base + "/v1/completions", cfg["timeout"],
                                   {"model": cfg["model"], "prompt": cfg.get("prompt", "canary"),
                                    "max_tokens": 1, "temperature": 0}, auth)
        # an engine that answers with an error is alive (not hung): only silence counts as a hang; a refused key
        # is neither
        local[base], statuses[base] = canary_verdict(status, body), status
    peers = {base: http_status(base + "/health", cfg.get("health_timeout", 5))[0] == 200
             for base in cfg["peers"]}
    for url, status in unauthorized_step(state, local, statuses):
        print(unauthorized_message(unit, url, status, no_key or "the key in %s" % cfg["api_key_file"]))
        sys.stdout.flush()
    held_before = (state.get("held") or {}).get("by")
    state, restart = canary_step(state, local, peers, cfg["hang_failures"], cfg["peer_failures"], time.time(),
                                 unit_up_for(show, time.monotonic()), bounds)
    if restart is not None and invocation and not same_start(unit, invocation):
        # the unit was started (or stopped) while this round asked its ranks, e.g. by a rolling restart that
        # replaced the container: the verdict is about a start that is over, and a restart now would end the new one
        print("%s: no restart: the unit started or stopped again during this round (the verdict was: %s); the next "
              "round judges its new start" % (unit, restart.reason))
        sys.stdout.flush()
        restart, state = None, dict((key, state[key]) for key in CANARY_KEPT if state.get(key))
    elif restart is None and invocation:
        state["invocation"] = invocation
    with open(state_path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(state, fh)
    os.replace(state_path + ".tmp", state_path)
    held = (state.get("held") or {}).get("by") if restart is None else None
    if held and held != held_before:
        print("%s: DP group held by %s: it fails /health while this node's ranks produce no token; waiting up to "
              "%gs for its own node to restart it (no restart here meanwhile)" % (unit, held, bounds.peer_wait))
        sys.stdout.flush()
    if restart is None:
        return 0
    print("%s: %s" % (unit, restart.reason))
    event = {"t": time.time(), "event": "canary", "planned": False, "reason": restart.reason}
    if restart.peer:
        event["peer"] = True
        forgive(unit)
    append_record(cfg["record"], event)
    subprocess.run(["systemctl", "restart", "--no-block", unit], check=False, timeout=30)
    return 0


def same_start(unit: str, invocation: str) -> bool:
    """Whether the unit is still active in the start whose InvocationID a canary round read at its beginning."""
    show = systemctl_show(unit, ["ActiveState", "InvocationID"])
    return show.get("ActiveState") == "active" and show.get("InvocationID", "") == invocation


def canary_bounds(cfg: dict):
    """The CanaryBounds of the canary's settings, or None when they name none (the timed rules are off)."""
    try:
        return CanaryBounds(float(cfg["down_grace"]), float(cfg["start_timeout"]), float(cfg["peer_wait"]))
    except (KeyError, TypeError, ValueError):
        return None


def unit_up_for(show: dict, monotonic_now: float):
    """Seconds since the unit became active, from systemd's ActiveEnterTimestampMonotonic (microseconds of the
    monotonic clock, which a container shares with its host), or None when systemd did not say."""
    try:
        entered = int(show.get("ActiveEnterTimestampMonotonic", ""))
    except ValueError:
        return None
    if entered <= 0:
        return None
    return max(0.0, monotonic_now - entered / 1e6)


def read_canary_state(record: str) -> dict:
    """The canary's state beside the unit's record (a JSON object), {} when there is none or it cannot be read (e.g.
    for a unit without a canary)."""
    try:
        with open(record + ".canary", encoding="utf-8") as fh:
            state = json.load(fh)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def canary_held(state: dict) -> str:
    """"<peer url> since <time>" when the canary's state says its DP group is held by a peer, else ""."""
    try:
        held = state.get("held") or {}
        return "%s since %s" % (held["by"], time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(held["since"])))
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError):
        return ""


def canary_unauthorized(record: str, state=None) -> list:
    """The local ranks the unit's canary found refusing its key in its last round, as "url (HTTP n)" (the canary's
    state beside the record, or the state given; [] without one, e.g. for a unit without a canary)."""
    known = (read_canary_state(record) if state is None else state).get("unauthorized") or {}
    return ["%s (HTTP %s)" % (url, status) for url, status in sorted(known.items())]


def unit_status(unit: str, record: str, window_s: float, now: float) -> dict:
    events = read_record(record)
    canary = read_canary_state(record)
    crashes = [e for e in events if not e.get("planned")]
    show = systemctl_show(unit, ["ActiveState", "SubState", "Result", "NRestarts", "UnitFileState"])
    last = crashes[-1] if crashes else None
    return {
        "canary_unauthorized": canary_unauthorized(record, canary),
        "held_by": canary_held(canary),
        "unit": unit,
        "active": show.get("ActiveState", "unknown"),
        "sub": show.get("SubState", ""),
        "enabled": show.get("UnitFileState", ""),
        "gave_up": show.get("Result") == "start-limit-hit",
        "restarts": len(crashes),
        "restarts_in_window": len(crashes_within(events, now, window_s)),
        "last_reason": last["reason"] if last else "",
        "last_time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["t"])) if last else "",
    }


def cmd_status(args) -> int:
    now = time.time()
    out = [unit_status(u, os.path.join(args.state_dir, u + ".jsonl"), args.window_min * 60, now)
           for u in args.unit]
    print(json.dumps(out, sort_keys=True))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="a3_supervise", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wait")
    w.add_argument("--container", default="")
    w.add_argument("--tcp", action="append", default=[],
                   help="HOST:PORT that must accept connections (HOST:PORT,HOST:PORT,...: any one of them)")
    w.add_argument("--what", action="append", default=[], help="what each --tcp is, for the message")
    w.add_argument("--file", action="append", default=[], help="a file that must exist (a readiness mark)")
    w.add_argument("--file-what", action="append", default=[], help="what each --file means, for the message")
    w.add_argument("--pid", default="", help="fail at once when this process ended (ExecStartPost: ${MAINPID})")
    w.add_argument("--timeout", type=float, default=300)
    w.add_argument("--soft-tcp", action="append", default=[], help="HOST:PORT worth waiting for, not required")
    w.add_argument("--soft-what", action="append", default=[])
    w.add_argument("--soft-timeout", type=float, default=60)
    w.add_argument("--log", default="", help="also note soft waits in this log file")
    w.add_argument("--interval", type=float, default=2)
    w.set_defaults(func=cmd_wait)
    b = sub.add_parser("backoff")
    b.add_argument("--record", required=True)
    b.add_argument("--log", default="")
    b.add_argument("--base", type=float, default=2)
    b.add_argument("--max", type=float, default=60)
    b.add_argument("--window-min", type=float, default=10)
    b.set_defaults(func=cmd_backoff)
    d = sub.add_parser("deliberate")
    d.add_argument("--record", required=True)
    d.set_defaults(func=cmd_deliberate)
    s = sub.add_parser("stop-mark")
    s.add_argument("--record", required=True)
    s.add_argument("--mainpid", default="")
    s.set_defaults(func=cmd_stop_mark)
    r = sub.add_parser("record")
    r.add_argument("--unit", required=True)
    r.add_argument("--record", required=True)
    r.add_argument("--log", default="")
    r.add_argument("--signatures", default="")
    r.add_argument("--restarts", type=int, default=5)
    r.add_argument("--window-min", type=float, default=10)
    r.set_defaults(func=cmd_record)
    c = sub.add_parser("canary")
    c.add_argument("--config", required=True)
    c.set_defaults(func=cmd_canary)
    st = sub.add_parser("status")
    st.add_argument("--state-dir", required=True)
    st.add_argument("--unit", action="append", default=[])
    st.add_argument("--window-min", type=float, default=10)
    st.set_defaults(func=cmd_status)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
