#!/usr/bin/env python3
"""One line per store-leader kill of a chaos run: how the survivors elected a new leader.

Usage: scripts/elections.py CLUSTER_DIR

Reads CLUSTER_DIR/report/chaos-report.json and the members' logs CLUSTER_DIR/logs/s*.log, which
need raft-rs's records (RUST_LOG with store=info or store::raft=info). Times are seconds after
the kill:
  precand   the first campaigns (member, time): pre-vote rounds started
  ignored   pre-votes ignored because the voter was still inside the dead leader's lease
  rejected  votes rejected (the voter's log was longer, or it had voted already)
  leader    who won, when
  served    when the new leader applied its first entry (and ms after winning)
  recover   the chaos report's recovery: the first acknowledged store write sent after the kill
"""
import datetime
import glob
import json
import os
import re
import sys


def stamp(line, start):
    try:
        at = datetime.datetime.fromisoformat(line[:26])
    except ValueError:
        return None
    return (at - start).total_seconds()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    base = sys.argv[1]
    report = json.load(open(os.path.join(base, "report", "chaos-report.json")))
    start = datetime.datetime.fromisoformat(report["started_at"][:26])
    events = []
    for path in sorted(glob.glob(os.path.join(base, "logs", "s[0-9]*.log"))):
        member = os.path.basename(path)[:-4]
        with open(path, errors="replace") as f:
            for line in f:
                at = stamp(line, start)
                if at is not None:
                    events.append((at, member, line[28:].strip()))
    events.sort()
    recovered = {
        r["at_s"]: r["recover_s"] for r in report["availability"].get("recoveries", [])
    }
    kills = [a for a in report["actions"] if a["kind"] == "kill-store-leader" and a["target"]]
    for i, kill in enumerate(kills):
        at = kill["at_s"]
        until = kills[i + 1]["at_s"] if i + 1 < len(kills) else at + 30.0
        window = [e for e in events if at <= e[0] < until]

        def when(text):
            return [(round(e[0] - at, 3), e[1]) for e in window if text in e[2]]

        served = []
        for e in window:
            if "first entry applied" in e[2]:
                after = re.search(r"after_ms=(\d+)", e[2])
                served.append((round(e[0] - at, 3), after.group(1) if after else "?"))
        recover = recovered.get(at)
        print(
            f"{at:8.2f} {kill['target']} recover={'-' if recover is None else f'{recover:.2f}'}"
            f" precand={when('became pre-candidate')[:3]}"
            f" ignored={len(when('lease is not expired'))}"
            f" rejected={len(when('rejected vote'))}"
            f" leader={when('became leader member')[:2]} served={served[:2]}"
        )


if __name__ == "__main__":
    main()
