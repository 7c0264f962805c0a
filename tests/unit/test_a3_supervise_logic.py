# -*- coding: utf-8 -*-
"""The supervisor helper's pure decisions, pinned whole (roles/supervise/files/a3_supervise.py): reading a record,
the crash window, the back-off, the exit reason and its signature, the crash-loop message, the canary's verdicts,
counters and messages, and the key file."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

HELPER = Path(__file__).resolve().parents[2] / "roles" / "supervise" / "files" / "a3_supervise.py"
if os.environ.get("A3_MUTATION_ROOT"):
    # tests/mutation.py: the helper as mutmut lays it out (its mutants are named after this import)
    sys.path.insert(0, os.environ["A3_MUTATION_ROOT"])
    import a3_supervise as sup  # noqa: E402
else:
    _spec = importlib.util.spec_from_file_location("a3_supervise", HELPER)
    sup = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sup)

A, B, C, P, Q = ("http://127.0.0.1:6700", "http://127.0.0.1:6701", "http://127.0.0.1:6702", "http://127.0.0.2:6700",
                 "http://127.0.0.2:6701")


def crash(t, reason="x"):
    return {"t": t, "event": "exit", "planned": False, "reason": reason}


def planned(t):
    return {"t": t, "event": "exit", "planned": True, "reason": "planned stop"}


def peer(t):
    return {"t": t, "event": "exit", "planned": False, "peer": True, "reason": "rank 0 disconnected"}


# ------------------------------------------------------------------------------------------------ read_record

def test_read_record_keeps_only_events_with_a_numeric_time_and_skips_what_it_cannot_read(tmp_path):
    path = tmp_path / "u.jsonl"
    path.write_text("\n".join([
        "not json",
        '{"t": 1, "reason": "int"}',
        "[1, 2]",
        '{"reason": "no time"}',
        '{"t": "2", "reason": "a text time"}',
        '{"t": null}',
        "5",
        '{"t": 2.5, "reason": "float"}',
        "{broken",
        '{"t": 3, "reason": "last", "peer": true}',
    ]) + "\n", encoding="utf-8")
    assert sup.read_record(str(path)) == [{"t": 1, "reason": "int"}, {"t": 2.5, "reason": "float"},
                                          {"t": 3, "reason": "last", "peer": True}]


def test_read_record_of_a_missing_file_is_empty(tmp_path):
    assert sup.read_record(str(tmp_path / "none.jsonl")) == []


def test_read_record_reads_utf8(tmp_path):
    path = tmp_path / "u.jsonl"
    path.write_bytes('{"t": 1, "reason": "Fehler: Überlauf ✗"}\n'.encode("utf-8"))
    assert sup.read_record(str(path)) == [{"t": 1, "reason": "Fehler: Überlauf ✗"}]


# ------------------------------------------------------------------------------------- crashes_within, backoff

@pytest.mark.parametrize("events, expected", [
    ([], []),
    ([crash(400), crash(399)], [crash(400)]),                   # exactly the window's age counts, one more does not
    ([crash(500), planned(600), crash(700)], [crash(500), crash(700)]),    # planned stops are no crashes
    ([crash(500), peer(600), crash(700)], [crash(700)]),        # the count starts afresh after a peer's exit
    ([crash(500), peer(600), crash(600), crash(601)], [crash(601)]),    # at the peer's time: not after it
    ([peer(600), crash(500), peer(550), crash(560)], []),       # the newest peer exit decides
    ([{"t": 700, "planned": False}], [{"t": 700, "planned": False}]),
    ([crash(500), dict(planned(600), reset=True), crash(700)], [crash(700)]),   # ... and after a planned stop's reset
    ([crash(500), dict(planned(600), reset=True), crash(600)], []),
    ([crash(500), dict(crash(600), reset=True), crash(700)], [crash(700)]),     # whatever the event that reset it
])
def test_crashes_within_counts_own_unplanned_exits_in_the_window_after_the_last_reset(events, expected):
    assert sup.crashes_within(events, 1000, 600) == expected


def canary(t, for_peer=False):
    event = {"t": t, "event": "canary", "planned": False, "reason": "stopped serving"}
    if for_peer:
        event["peer"] = True
    return event


@pytest.mark.parametrize("events, event, expected", [
    ([], peer(1000), True),                                     # a peer's exit
    ([canary(990)], peer(1000), True),
    ([], crash(1000), False),                                   # the unit's own crash counts
    ([canary(990)], crash(1000), False),
    ([], planned(1000), True),                                  # a planned stop: the deployment's or an operator's
    ([crash(900)], planned(1000), True),
    ([canary(990)], planned(1000), False),                      # the stop of the canary's restart for its own failure
    ([canary(990, for_peer=True)], planned(1000), True),        # ... for a peer: no failure of this unit
    ([canary(900), crash(950)], planned(1000), True),           # only the record's last event says whose stop it is
    ([{"t": 990, "event": "canary", "planned": True}], planned(1000), True),
])
def test_resets_start_limit_for_every_exit_but_the_units_own_failures(events, event, expected):
    assert sup.resets_start_limit(events, event) is expected


@pytest.mark.parametrize("events, base, maximum, expected", [
    ([crash(990), crash(995)], 3, 100, 3.0),
    ([crash(980), crash(990), crash(995)], 3, 100, 6.0),
    ([crash(970), crash(980), crash(990), crash(995)], 3, 100, 12.0),
    ([crash(t) for t in range(940, 1000, 10)], 3, 100, 48.0),      # 6 crashes: 3 x 2 ** 4
    ([crash(t) for t in range(930, 1000, 10)], 3, 100, 96.0),      # 7 crashes: 3 x 2 ** 5
    ([crash(t) for t in range(920, 1000, 10)], 3, 100, 100.0),     # 8: capped
    ([crash(t) for t in range(920, 1000, 10)], 3, 500, 192.0),     # 8 crashes: 3 x 2 ** 6
    ([crash(390), crash(995)], 3, 100, 0.0),                       # the first is out of the window
    ([crash(400), crash(995)], 3, 100, 3.0),                       # ... exactly at its edge it counts
    ([crash(980), crash(990), planned(995)], 3, 100, 0.0),
    ([crash(980), crash(990), peer(995)], 3, 100, 0.0),
    ([crash(970), crash(980), {"t": 990, "planned": False, "peer": False}], 3, 100, 6.0),
    ([crash(990), crash(995), peer(980)], 3, 100, 0.0),          # the last exit recorded (the clock stepped back)
    ([crash(990), crash(995), planned(980)], 3, 100, 0.0),
])
def test_backoff_delay_doubles_from_the_second_crash_and_is_a_float(events, base, maximum, expected):
    delay = sup.backoff_delay(events, 1000, base, maximum, 600)
    assert delay == expected and isinstance(delay, float)


# ---------------------------------------------------------------------------------- signatures, exit reasons

SIGS = [
    {"pattern": "Address already in use", "advice": "  a port is taken  "},
    {"pattern": r"Traceback \(most recent call last\)", "advice": "the engine crashed"},
]


@pytest.mark.parametrize("signatures, log, expected", [
    (SIGS, "a\n  Address already in use :1  \nb\n  Address already in use :2  \nTraceback (most recent call last)\n",
     (SIGS[0], "Address already in use :2")),          # list order first, then the newest line, stripped
    (SIGS, "Traceback (most recent call last)\n", (SIGS[1], "Traceback (most recent call last)")),
    (SIGS, "all fine\n", (None, None)),
    (SIGS, "", (None, None)),
    ([{"pattern": "("}, {"advice": "no pattern"}, {"pattern": None}, {"pattern": "boom"}], "x\nboom here\n",
     ({"pattern": "boom"}, "boom here")),             # a broken signature is skipped, the rest still match
])
def test_find_signature(signatures, log, expected):
    assert sup.find_signature(log, signatures) == expected


@pytest.mark.parametrize("result, code, status, log, signatures, expected", [
    ("exit-code", "exited", "1", "x\nTraceback (most recent call last)\n", SIGS,
     ("exited with status 1: Traceback (most recent call last) (the engine crashed)", False)),
    ("signal", "killed", "KILL", "Address already in use\n", SIGS,
     ("killed KILL: Address already in use (a port is taken)", False)),
    ("signal", "", "", "Address already in use\n", SIGS,
     ("ended: Address already in use (a port is taken)", False)),
    ("signal", "dumped", "", "boom\n", [{"pattern": "boom"}], ("dumped: boom ()", False)),
    ("signal", "killed", "KILL", "nothing\n", SIGS, ("killed KILL (signal); no fatal line in the log", False)),
    ("", "", "", "", SIGS, ("ended (unknown result); no fatal line in the log", False)),
    ("exit-code", "exited", "", "", [], ("exited with status (exit-code); no fatal line in the log", False)),
    ("exit-code", "exited", "1", "rank 1 disconnected\n",
     [{"pattern": "rank [0-9] disconnected", "peer": True, "advice": "a peer died"}],
     ("exited with status 1: rank 1 disconnected (a peer died)", True)),
    ("exit-code", "exited", "1", "rank 1 disconnected\n",
     [{"pattern": "rank [0-9] disconnected", "peer": 0, "advice": "a peer died"}],
     ("exited with status 1: rank 1 disconnected (a peer died)", False)),
    ("exit-code", "exited", "1", "E" * 310 + "\n", [{"pattern": "E", "advice": "long"}],
     ("exited with status 1: " + "E" * 300 + " (long)", False)),
])
def test_exit_cause_pins_the_whole_reason_and_the_peer_mark(result, code, status, log, signatures, expected):
    got = sup.exit_cause(result, code, status, log, signatures)
    assert got == expected and isinstance(got[1], bool)
    assert sup.exit_reason(result, code, status, log, signatures) == expected[0]


@pytest.mark.parametrize("crashes, restarts, expected", [
    (3, 3, "u.service: unplanned exit 3 of 3 allowed within 2.5 min: boom"),
    (1, 5, "u.service: unplanned exit 1 of 5 allowed within 2.5 min: boom"),
    (4, 3, "u.service: crash loop: 4 unplanned exits within 2.5 min, over the limit of 3 restarts: systemd stops "
           "restarting it at its start limit (then 'start-limit-hit' here, GAVE UP in playbooks/status.yml). "
           "Last: boom. Fix the cause, then rerun site.yml (or systemctl reset-failed u.service && systemctl start "
           "u.service)."),
])
def test_crash_loop_message_whole(crashes, restarts, expected):
    assert sup.crash_loop_message("u.service", crashes, restarts, 2.5, "boom") == expected


# -------------------------------------------------------------------------------------------- canary verdicts

@pytest.mark.parametrize("status, body, verdict", [
    (200, {"choices": [{"text": "x"}]}, "ok"),
    (200, {"choices": [{"text": ""}]}, "hung"),
    (0, {"choices": [{"text": "x"}]}, "hung"),
    (401, {"choices": [{"text": "x"}]}, "unauthorized"),
    (403, {"choices": [{"text": "x"}]}, "unauthorized"),
    (402, None, "ok"),
    (404, None, "ok"),
    (1, None, "ok"),
    (201, {"choices": []}, "ok"),
    (199, None, "ok"),
])
def test_canary_verdict(status, body, verdict):
    assert sup.canary_verdict(status, body) == verdict


@pytest.mark.parametrize("body, expected", [
    ({"choices": [{"text": ""}], "usage": {"completion_tokens": 1}}, True),
    ({"choices": [{"text": ""}], "usage": {"completion_tokens": 2}}, True),
    ({"choices": [{"text": "x"}], "usage": {"completion_tokens": -1}}, False),
    ({"choices": [{"text": "x"}], "usage": {"completion_tokens": 0}}, False),
    ({"choices": [{"text": "x"}], "usage": None}, True),
    ({"choices": [{"text": "x"}], "usage": [1]}, True),
    ({"choices": [{"text": "x"}], "usage": {"completion_tokens": 1.0}}, True),    # no int count: the text decides
    ({"choices": [{"text": ""}], "usage": {"completion_tokens": 1.0}}, False),
    ({"choices": ["x", {"text": "y"}]}, True),
    ({"choices": ["x"]}, False),
    ({"choices": [{"text": 5}]}, False),
    ({"choices": [{"text": " "}]}, True),
    ({"choices": {"text": "x"}}, False),
    ({"choices": [{"text": "x"}, {"text": ""}]}, True),
])
def test_produced_a_token(body, expected):
    assert sup.produced_a_token(body) is expected


# ---------------------------------------------------------------------------------------------- canary_step

def test_canary_step_counts_per_rank_and_forgets_ranks_no_longer_asked():
    state = {"hang": {C: 7}, "peer": {Q: 2}, "other": 1}
    state, restart = sup.canary_step(state, {A: "hung", B: "ok"}, {P: True}, 3, 3)
    assert restart is None
    assert state == {"hang": {A: 1, B: 0}, "peer": {P: 0}, "other": 1}
    state, restart = sup.canary_step(state, {A: "hung", B: "hung"}, {P: True}, 3, 3)
    assert restart is None and state == {"hang": {A: 2, B: 1}, "peer": {P: 0}, "other": 1}
    state, restart = sup.canary_step(state, {A: "down", B: "hung"}, {P: True}, 3, 3)
    assert restart is None and state == {"hang": {A: 0, B: 2}, "peer": {P: 0}, "other": 1}
    state, restart = sup.canary_step(state, {A: "ok", B: "hung"}, {P: True}, 3, 3)
    assert restart == sup.CanaryRestart(
        "hung: %s answers /health but produced no token in 3 canary requests in a row" % B, False)
    assert state == {"hang": {}, "peer": {}}


def test_canary_step_counts_down_peers_only_while_every_local_rank_serves():
    state = {}
    state, restart = sup.canary_step(state, {A: "ok", B: "unauthorized"}, {P: False, Q: True}, 3, 3)
    assert restart is None and state == {"hang": {A: 0}, "peer": {P: 1, Q: 0}}
    state, restart = sup.canary_step(state, {A: "ok", B: "unauthorized"}, {P: False, Q: False}, 3, 3)
    assert restart is None and state == {"hang": {A: 0}, "peer": {P: 2, Q: 1}}
    # one local rank hung: this node does not serve, the peer counts start over
    state, restart = sup.canary_step(state, {A: "ok", B: "hung"}, {P: False, Q: False}, 3, 3)
    assert restart is None and state == {"hang": {A: 0, B: 1}, "peer": {P: 0, Q: 0}}
    state, restart = sup.canary_step(state, {A: "ok", B: "ok"}, {P: False}, 3, 3)
    assert restart is None and state == {"hang": {A: 0, B: 0}, "peer": {P: 1}}
    state, restart = sup.canary_step(state, {A: "down", B: "ok"}, {P: False}, 3, 3)
    assert restart is None and state == {"hang": {A: 0, B: 0}, "peer": {P: 0}}


def test_canary_step_without_local_ranks_counts_no_peer():
    state, restart = sup.canary_step({}, {}, {P: False}, 1, 1)
    assert restart is None and state == {"hang": {}, "peer": {P: 0}}


def test_canary_step_restarts_for_the_first_hung_rank_in_url_order():
    state = {"hang": {B: 4, A: 4}, "peer": {P: 4}}
    state, restart = sup.canary_step(state, {B: "hung", A: "hung"}, {P: False}, 5, 1)
    assert restart == sup.CanaryRestart(
        "hung: %s answers /health but produced no token in 5 canary requests in a row" % A, False)
    assert state == {"hang": {}, "peer": {}}


def test_canary_step_restarts_at_the_thresholds_exactly_and_names_the_first_peer_in_order():
    state = {"hang": {A: 1}, "peer": {Q: 1, P: 1}, "unauthorized": {B: 403}}
    state, restart = sup.canary_step(state, {A: "ok", B: "unauthorized"}, {Q: False, P: False}, 3, 2)
    assert restart == sup.CanaryRestart(
        "DP group incomplete: %s has failed /health for 2 checks while this node's ranks serve; restarting them so "
        "the whole group forms again" % P, True)
    assert state == {"hang": {}, "peer": {}, "unauthorized": {B: 403}}


def test_canary_step_keeps_its_state_below_the_thresholds():
    state = {"hang": {A: 1}, "peer": {P: 0}, "unauthorized": {B: 401}}
    new, restart = sup.canary_step(state, {A: "hung", B: "unauthorized"}, {P: False}, 3, 2)
    assert restart is None and new is state
    assert new == {"hang": {A: 2}, "peer": {P: 0}, "unauthorized": {B: 401}}
    new, restart = sup.canary_step(new, {A: "ok", B: "unauthorized"}, {P: False}, 3, 2)
    assert restart is None and new == {"hang": {A: 0}, "peer": {P: 1}, "unauthorized": {B: 401}}


def test_an_empty_unauthorized_map_is_not_carried_over_a_restart():
    state, restart = sup.canary_step({"unauthorized": {}}, {A: "hung"}, {}, 1, 1)
    assert restart is not None and state == {"hang": {}, "peer": {}}


# ---------------------------------------------------------------------------------------- unauthorized_step

def test_unauthorized_step_reports_each_change_in_url_order_with_its_status():
    state = {"unauthorized": {C: 403, B: 401}}
    changes = sup.unauthorized_step(state, {C: "ok", A: "unauthorized", B: "unauthorized"}, {B: 403})
    assert changes == [(A, 401), (B, 403), (C, None)]     # no status known: 401
    assert state == {"unauthorized": {A: 401, B: 403}}


def test_unauthorized_step_keeps_a_down_rank_and_drops_the_map_when_none_refuses():
    state = {"unauthorized": {A: 403}}
    assert sup.unauthorized_step(state, {A: "down", B: "down"}, {}) == []
    assert state == {"unauthorized": {A: 403}}
    assert sup.unauthorized_step(state, {A: "ok", B: "down"}, {A: 200}) == [(A, None)]
    assert state == {}
    assert sup.unauthorized_step({}, {A: "down"}, {}) == []


def test_unauthorized_message_names_the_key_source_never_the_key():
    assert sup.unauthorized_message("u.service", A, 403, "the key in /etc/k") == (
        "u.service: http://127.0.0.1:6700 refused the canary request with HTTP 403 (unauthorized: the canary sends "
        "the key in /etc/k). Not a hang and no restart (a restart cannot fix a key), but no proof of life either: "
        "this rank is not checked for hangs until it accepts the key. Fix: the engines and the canary must hold the "
        "same vllm_api_key (Ansible Vault): rerun site.yml, which writes the key file and restarts the engines whose "
        "key changed (add -e vllm_restart=true when the file already holds the key but the engines run with another "
        "one). a3_supervise.py status lists the rank meanwhile (canary_unauthorized).")
    assert sup.unauthorized_message("u.service", A, None, "x") == (
        "u.service: http://127.0.0.1:6700 accepts the canary's key again; its canary requests count again")


# ---------------------------------------------------------------------------------------------- read_api_key

def test_read_api_key_whole_answers(tmp_path):
    key = tmp_path / "k"
    key.write_bytes("  s3crét \n".encode("utf-8"))
    assert sup.read_api_key(str(key)) == ("s3crét", "")
    key.write_text(" \n\t")
    assert sup.read_api_key(str(key)) == ("", "no key (%s is empty)" % key)
    assert sup.read_api_key(str(tmp_path / "none")) == (
        "", "no key (cannot read %s: No such file or directory)" % (tmp_path / "none"))
    assert sup.read_api_key(str(tmp_path)) == ("", "no key (cannot read %s: Is a directory)" % tmp_path)


def test_read_api_key_without_strerror_says_the_error(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("no way")
    monkeypatch.setattr("builtins.open", refuse)
    assert sup.read_api_key("/k") == ("", "no key (cannot read /k: no way)")


# ------------------------------------------------------------------------- canary_step: the timed rules (bounds)

BOUNDS = sup.CanaryBounds(down_grace=20, start_timeout=100, peer_wait=45)


def _rounds(rounds, hang_failures=2, peer_failures=3, bounds=BOUNDS):
    """Run canary rounds [(now, up_for, local, peers)]; returns [(now, CanaryRestart or None)] and the last state."""
    state, seen = {}, []
    for now, up_for, local, peers in rounds:
        state, restart = sup.canary_step(state, local, peers, hang_failures, peer_failures, now, up_for, bounds)
        seen.append((now, restart))
    return seen, state


def test_a_rank_that_answered_then_fails_health_is_restarted_after_the_grace_exactly():
    seen, _state = _rounds([(0, 5, {A: "ok"}, {P: True}), (10, 15, {A: "down"}, {P: True}),
                            (29, 34, {A: "down"}, {P: True}), (30, 35, {A: "down"}, {P: True})])
    assert [r for _t, r in seen[:3]] == [None, None, None]
    assert seen[3][1] == sup.CanaryRestart(
        "stopped serving: %s answered /health since this start, then failed it for 20s (grace 20s): a frozen or "
        "wedged rank, whose process lives on" % A, False)


def test_a_rank_that_answers_again_within_the_grace_starts_its_grace_over():
    seen, state = _rounds([(0, 5, {A: "ok"}, {}), (10, 15, {A: "down"}, {}), (25, 30, {A: "ok"}, {}),
                           (30, 35, {A: "down"}, {}), (45, 50, {A: "down"}, {})])
    assert [r for _t, r in seen] == [None] * 5
    assert state["down_since"] == {A: 30} and state["answered"] == [A]


def test_a_rank_that_never_answered_is_restarted_at_the_start_timeout_and_not_before():
    seen, _state = _rounds([(0, 10, {A: "down"}, {P: True}), (80, 99.5, {A: "down"}, {P: True}),
                            (81, 100, {A: "down"}, {P: True})])
    assert [r for _t, r in seen[:2]] == [None, None]
    assert seen[2][1] == sup.CanaryRestart(
        "never served: %s has not answered /health in the 100s since the unit started (start timeout 100s)" % A,
        False)
    # without the unit's start time the start timeout cannot be judged: no restart
    seen, _state = _rounds([(0, None, {A: "down"}, {}), (500, None, {A: "down"}, {})])
    assert [r for _t, r in seen] == [None, None]


def test_ranks_stalled_by_a_frozen_peer_wait_for_it_then_restart_once_the_wait_is_over():
    stalled = {A: "hung", B: "hung"}
    seen, state = _rounds([(0, 50, {A: "ok", B: "ok"}, {P: True}), (10, 60, stalled, {P: False}),
                           (20, 70, stalled, {P: False}), (54.9, 105, stalled, {P: False}),
                           (55, 105, stalled, {P: False})])
    # the hung rule (2 silent rounds) is held back while the peer fails /health
    assert [r for _t, r in seen[:4]] == [None] * 4
    assert seen[4][1] == sup.CanaryRestart(
        "DP group held by %s: it has failed /health for 45s while this node's ranks produce no token (%s, %s); its "
        "own node did not bring it back within 45s: restarting this node's ranks so the whole group forms again"
        % (P, A, B), True)
    assert state == {"hang": {}, "peer": {}}


def test_the_hold_names_the_peer_and_ends_when_the_peer_answers_again():
    seen, state = _rounds([(10, 60, {A: "hung"}, {P: False, Q: False}), (20, 70, {A: "hung"}, {P: False, Q: False})])
    assert state["held"] == {"by": P, "since": 10}
    # the first peer answers again: the hold passes to the one still failing, its wait starts then
    state, restart = sup.canary_step(state, {A: "hung"}, {P: True, Q: False}, 2, 3, 30, 80, BOUNDS)
    assert restart is None and state["held"] == {"by": Q, "since": 30}
    assert state["hang"] == {A: 0}     # silence while held counts for nothing
    # every peer answers: no hold any more; the group needs a moment to step again, so the hung rule counts afresh:
    # a rank still silent for hang_failures rounds after that is this node's own hang
    state, restart = sup.canary_step(state, {A: "hung"}, {P: True, Q: True}, 2, 3, 40, 90, BOUNDS)
    assert "held" not in state and restart is None and state["hang"] == {A: 1}
    state, restart = sup.canary_step(state, {A: "hung"}, {P: True, Q: True}, 2, 3, 50, 100, BOUNDS)
    assert restart == sup.CanaryRestart(
        "hung: %s answers /health but produced no token in 2 canary requests in a row" % A, False)


def test_a_local_frozen_rank_is_restarted_even_while_a_peer_also_fails():
    # the node's own rank stopped answering: that is this node's job, whatever the peers do
    seen, _state = _rounds([(0, 50, {A: "ok"}, {P: True}), (10, 60, {A: "down"}, {P: False}),
                            (30, 80, {A: "down"}, {P: False})])
    assert seen[2][1].reason.startswith("stopped serving: %s" % A) and seen[2][1].peer is False


def test_a_local_frozen_rank_wins_over_a_hold_on_a_peer():
    # A frozen, B stalled with it, and the peer of the other node stalled too (its /health fails meanwhile)
    seen, state = _rounds([(0, 50, {A: "ok", B: "ok"}, {P: True}), (10, 60, {A: "down", B: "hung"}, {P: False}),
                           (29, 79, {A: "down", B: "hung"}, {P: False}), (30, 80, {A: "down", B: "hung"}, {P: False})])
    assert [r for _t, r in seen[:3]] == [None] * 3
    assert seen[3][1].reason.startswith("stopped serving: %s answered /health since this start, then failed it for "
                                        "20s" % A) and seen[3][1].peer is False


def test_the_peer_rule_fires_once_per_outage_of_that_peer_with_bounds():
    serving = {A: "ok"}
    seen, state = _rounds([(t, 50 + t, serving, {P: False}) for t in (0, 10, 20)], peer_failures=3)
    assert seen[2][1].peer is True and seen[2][1].reason.startswith("DP group incomplete: %s" % P)
    assert state == {"hang": {}, "peer": {}, "peer_restarted": [P]}
    # the peer stays away: this node's restarted ranks do not restart again for it
    for t in (30, 40, 50, 60, 70):
        state, restart = sup.canary_step(state, serving, {P: False}, 2, 3, t, 10, BOUNDS)
        assert restart is None
    # it answers once, then fails again: a new outage, a new restart
    state, restart = sup.canary_step(state, serving, {P: True}, 2, 3, 80, 10, BOUNDS)
    assert restart is None and state["peer_restarted"] == []
    for t in (90, 100):
        state, restart = sup.canary_step(state, serving, {P: False}, 2, 3, t, 10, BOUNDS)
        assert restart is None
    state, restart = sup.canary_step(state, serving, {P: False}, 2, 3, 110, 10, BOUNDS)
    assert restart is not None and restart.peer


def test_without_bounds_the_counting_rules_are_unchanged_and_keep_no_times():
    seen, state = _rounds([(0, 5, {A: "ok"}, {}), (10, 15, {A: "down"}, {}), (999, 9999, {A: "down"}, {})],
                          bounds=None)
    assert [r for _t, r in seen] == [None] * 3 and state == {"hang": {A: 0}, "peer": {}}
    seen, _state = _rounds([(0, 5, {A: "hung"}, {P: False}), (10, 15, {A: "hung"}, {P: False})], bounds=None)
    assert seen[1][1].reason.startswith("hung: ")


def test_unit_up_for_reads_systemds_monotonic_microseconds():
    assert sup.unit_up_for({"ActiveEnterTimestampMonotonic": "5000000"}, 12.5) == 7.5
    assert sup.unit_up_for({"ActiveEnterTimestampMonotonic": "99000000"}, 12.5) == 0.0
    for show in ({}, {"ActiveEnterTimestampMonotonic": ""}, {"ActiveEnterTimestampMonotonic": "0"},
                 {"ActiveEnterTimestampMonotonic": "n/a"}):
        assert sup.unit_up_for(show, 12.5) is None


def test_canary_bounds_need_all_three_numbers():
    assert sup.canary_bounds({"down_grace": 20, "start_timeout": "100", "peer_wait": 45.5}) == (20.0, 100.0, 45.5)
    for cfg in ({}, {"down_grace": 20, "start_timeout": 100}, {"down_grace": "x", "start_timeout": 1, "peer_wait": 1},
                {"down_grace": None, "start_timeout": 1, "peer_wait": 1}):
        assert sup.canary_bounds(cfg) is None
