#!/usr/bin/env -S python3 -S
"""Simulated `npu-smi` of an Atlas 800 A3 node (8 cards x 2 chips = 16 Phy-IDs).

  npu-smi info                              the chip table and the process table
  npu-smi info -t spod-info -i CARD -c CHIP super-pod block of one chip

Exit codes:
  0  success
  1  usage error, unknown subcommand or -t type, invalid card id or chip id
  3  simulator setup error (unreadable node.json / faults.json; message on stderr)

Faults read (see docs/SIM-CONTRACT.md): unhealthy_chips + chip_health {"phy": "Warning"|...}
(default "Alarm"), hbm_used_mb {"phy": MB}, processes [{npu, chip, pid, name, mem_mb}]
(a chip's HBM usage grows by its processes' memory unless hbm_used_mb sets it), delay_ms.
Node keys read (all optional here): npus, index, driver_version, super_pod_id, super_pod_size,
server_index.
"""
import os
import sys

sys.dont_write_bytecode = True
# a3sim_tools.py sits beside the script; in a container where npu-smi is bind-mounted alone it is
# found in the mounted driver directory (beside hccn_tool).
sys.path[:0] = [os.path.dirname(os.path.realpath(__file__)), "/usr/local/lib/a3sim", "/usr/local/Ascend/driver/tools"]
from a3sim_tools import DRIVER_VERSION, Sim, ToolError, run  # noqa: E402

USAGE = """Usage: npu-smi info
       npu-smi info -t spod-info -i <card_id> -c <chip_id>"""
HBM_TOTAL = 65536
# Idle A3 values per Phy-ID (tests/fixtures/npu-smi_info_a3_idle.txt); power is per card.
BUS = "9D 9F 99 9B 95 97 91 93 8D 8F 89 8B 85 87 81 83".split()
TEMP = [37, 36, 37, 37, 36, 36, 36, 36, 37, 36, 36, 36, 35, 34, 35, 37]
HBM = [3440, 3205, 3432, 3208, 3443, 3196, 3433, 3210, 3439, 3205, 3433, 3205, 3452, 3194, 3447, 3192]
POWER = [174.3, 184.0, 176.8, 188.1, 175.2, 177.1, 176.9, 183.1]

BAR = "+" + "-" * 96 + "+"
COLS = "+{}+{}+{}+".format("-" * 27, "-" * 15, "-" * 52)
EQ = COLS.replace("-", "=")
PROC_HEADER = "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |"


def header(version):
    return [BAR,
            "| " + f"npu-smi {version:<25}Version: {version}".ljust(95) + "|",
            COLS,
            "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
            "| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
            EQ]


def chip_rows(sim, phy, procs):
    card, chip = divmod(phy, 2)
    k = phy % 16
    health = sim.per_dev("chip_health", phy, "Alarm") if sim.in_list("unhealthy_chips", phy) else "OK"
    used = sim.per_dev("hbm_used_mb", phy, None)
    if used is None:
        used = min(HBM_TOTAL, HBM[k] + sum(p["mem_mb"] for p in procs if (p["npu"], p["chip"]) == (card, chip)))
    power = f"{POWER[card % 8]:.1f}" if chip == 0 else "-"
    return [f"| {card:<6}{'Ascend910':<20}| {health:<14}| {power:<12}{TEMP[k]:<18}{0:<5}/ {0:<14}|",
            f"| {chip:<6}{phy:<20}| 0000:{BUS[k]}:00.0  | {0:<12}{0:<5}/ {0:<11}{used:<5}/ {HBM_TOTAL:<14}|"]


def process_table(cards, procs):
    lines = [COLS, PROC_HEADER, EQ]
    for card in range(cards):
        rows = sorted((p for p in procs if p["npu"] == card), key=lambda p: (p["chip"], p["pid"]))
        lines += [f"| {p['npu']:<8}{p['chip']:<18}| {p['pid']:<14}| {p.get('name', '')[:24]:<25}| {p['mem_mb']:<24}|"
                  for p in rows] or [f"| No running processes found in NPU {card}".ljust(97) + "|"]
        lines.append(EQ)
    return lines


def info(sim):
    procs = sim.faults.get("processes") or []
    lines = header(sim.node.get("driver_version", DRIVER_VERSION))
    for phy in range(sim.npus):
        lines += chip_rows(sim, phy, procs)
        lines.append(EQ if phy % 2 else BAR)
    lines += process_table((sim.npus + 1) // 2, procs)
    return "\n".join(lines)


def spod_info(sim, card, chip):
    # The A3 (910_93) build of npu-smi prints these four keys, "\t%-30s : %u" each.
    phy = card * 2 + chip
    server = int(sim.node.get("server_index", sim.index))
    size = sim.node.get("super_pod_size", len(sim.node.get("vnic_ips") or {1: 0}) * sim.npus)
    values = {"SDID": (server << 22) | (phy << 16), "Super Pod Size": size,
              "Super Pod ID": sim.node.get("super_pod_id", 0), "Server Index": server}
    return "\n".join(f"\t{k:<30} : {v}" for k, v in values.items())


def main(argv):
    if argv[:1] != ["info"]:
        raise ToolError(USAGE, 1)
    sim = Sim(node_required=False)
    if argv == ["info"]:
        sim.delay("info")
        print(info(sim))
        return 0
    opts = dict(zip(argv[1::2], argv[2::2]))
    if len(argv) != 7 or set(opts) != {"-t", "-i", "-c"} or opts["-t"] != "spod-info":
        raise ToolError(USAGE, 1)
    cards = (sim.npus + 1) // 2
    for opt, limit, what in (("-i", cards, "card"), ("-c", 2, "chip")):
        if not opts[opt].isdigit() or int(opts[opt]) >= limit:
            raise ToolError(f"The {what} id {opts[opt]} is invalid. Valid {what} ids: 0-{limit - 1}.", 1)
    sim.delay("spod-info")
    print(spod_info(sim, int(opts["-i"]), int(opts["-c"])))
    return 0


if __name__ == "__main__":
    run(main)
