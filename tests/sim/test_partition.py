# -*- coding: utf-8 -*-
"""sim/lib/partition.py: the rules that cut a node off, reading them back, and telling the nodes' processes apart
(pure functions; the cut itself runs against the live cluster in molecule/selfheal)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim" / "lib"))
import partition  # noqa: E402


def test_class_ids_are_one_per_node_in_inventory_order():
    assert [partition.class_id(n) for n in ("p0", "p1", "d0", "d1")] == [0xA30001, 0xA30002, 0xA30003, 0xA30004]


def test_cut_rules_drop_both_directions_between_the_node_and_every_other_node_only():
    rules = partition.cut_rules("d1")
    assert len(rules) == 6
    assert rules[0] == ["-m", "cgroup", "--cgroup", "0x00a30004", "-d", "127.30.0.11/32", "-m", "comment",
                        "--comment", "a3sim-cut-d1", "-j", "DROP"]
    assert rules[1] == ["-m", "cgroup", "--cgroup", "0x00a30001", "-d", "127.30.0.14/32", "-m", "comment",
                        "--comment", "a3sim-cut-d1", "-j", "DROP"]
    pairs = {(r[3], r[5]) for r in rules}
    assert pairs == {("0x00a30004", "127.30.0.11/32"), ("0x00a30004", "127.30.0.12/32"),
                     ("0x00a30004", "127.30.0.13/32"), ("0x00a30001", "127.30.0.14/32"),
                     ("0x00a30002", "127.30.0.14/32"), ("0x00a30003", "127.30.0.14/32")}


def test_cut_rules_of_nodes_in_namespaces_of_their_own_drop_by_address_both_ways():
    rules = partition.cut_rules("p1", netns=True)
    assert len(rules) == 6
    assert rules[0] == ["-s", "127.30.0.12/32", "-d", "127.30.0.11/32", "-m", "comment", "--comment", "a3sim-cut-p1",
                        "-j", "DROP"]
    assert {(r[1], r[3]) for r in rules} == {
        ("127.30.0.12/32", "127.30.0.11/32"), ("127.30.0.11/32", "127.30.0.12/32"),
        ("127.30.0.12/32", "127.30.0.13/32"), ("127.30.0.13/32", "127.30.0.12/32"),
        ("127.30.0.12/32", "127.30.0.14/32"), ("127.30.0.14/32", "127.30.0.12/32")}
    assert not any("cgroup" in r for r in rules)


def test_the_chain_is_jumped_to_from_forward_for_bridged_nodes_and_from_output_else():
    # a chain reachable from FORWARD refuses the cgroup match: the shared-namespace rules live behind OUTPUT only
    assert partition.hook_of(True) == "FORWARD" and partition.hook_of(False) == "OUTPUT"


LISTING = """-N A3SIM-PART
-A A3SIM-PART -d 127.30.0.11/32 -m cgroup --cgroup 10682372 -m comment --comment a3sim-cut-d1 -j DROP
-A A3SIM-PART -d 127.30.0.14/32 -m cgroup --cgroup 10682369 -m comment --comment "a3sim-cut-d1" -j DROP
-A A3SIM-PART -d 127.30.0.11/32 -m cgroup --cgroup 10682370 -m comment --comment a3sim-cut-p1 -j DROP
-A A3SIM-PART -d 127.30.0.11/32 -m comment --comment a3sim-cut-d10 -j DROP
"""


def test_the_cuts_in_place_are_read_back_from_the_listing():
    assert partition.cuts_in(LISTING) == ["d1", "d10", "p1"]
    assert partition.cuts_in("-N A3SIM-PART\n") == [] and partition.cuts_in("") == []


def test_healing_one_node_deletes_its_rules_and_no_other():
    lines = partition.rule_lines_of(LISTING, "d1")
    assert lines == [
        ["-d", "127.30.0.11/32", "-m", "cgroup", "--cgroup", "10682372", "-m", "comment", "--comment", "a3sim-cut-d1",
         "-j", "DROP"],
        ["-d", "127.30.0.14/32", "-m", "cgroup", "--cgroup", "10682369", "-m", "comment", "--comment",
         '"a3sim-cut-d1"', "-j", "DROP"]]
    assert len(partition.rule_lines_of(LISTING, "p1")) == 1 and partition.rule_lines_of(LISTING, "p0") == []


NODE_ID, NESTED_ID, OTHER_ID = "a" * 64, "b" * 64, "c" * 64
IDS = {"d0": [OTHER_ID], "d1": [NODE_ID, NESTED_ID]}


@pytest.mark.parametrize("text, node", [
    ("12:net_cls:/\n4:memory:/docker/%s/system.slice/ascend-vllm.service\n" % NODE_ID, "d1"),
    ("4:memory:/docker/%s\n12:net_cls:/docker/%s\n" % (NESTED_ID, NESTED_ID), "d1"),
    ("4:memory:/docker/%s\n" % OTHER_ID, "d0"),
    ("4:memory:/process_api/5e21c\n0::/\n", None),
    # the net_cls line is what the script itself changes: it never decides whose process it is
    ("12:net_cls:/docker/%s\n4:memory:/\n" % NODE_ID, None),
    ("garbage\n", None),
])
def test_a_process_belongs_to_the_node_whose_container_holds_it(text, node):
    assert partition.node_of(text, IDS) == node


def test_the_net_cls_path_of_a_process():
    assert partition.net_cls_path("4:memory:/x\n12:net_cls:/docker/abc\n") == "/docker/abc"
    assert partition.net_cls_path("12:net_cls,net_prio:/a3sim-d1\n") == "/a3sim-d1"
    assert partition.net_cls_path("4:memory:/x\n") is None


def test_the_command_line_refuses_unknown_nodes_and_verbs(capsys):
    assert partition.main(["cut", "x9"]) == 2
    assert partition.main(["heal", "p0", "p1"]) == 2
    assert partition.main(["frobnicate"]) == 2
    assert "partition.py cut NODE" in capsys.readouterr().err
