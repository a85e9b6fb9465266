#!/usr/bin/env python3
"""Merges step validation records of one set measured in several device calls (each call has a
time limit) into one record: the cases in the set's order, each part's provenance kept under
`parts`. The summary is not copied: `ulysses validate --stored` recomputes it with today's model.
--add-key KEY=VALUE[:IF_KEY=IF_VALUE] appends a key to every case (or to the cases that have
IF_KEY=IF_VALUE): a plan key the worker of that commit ran implicitly, now explicit in the set.
The parts must name one `profile_used`; --profile-used P names it for all of them when they ran the same profile
under different paths (e.g. a calibrated copy on the device, committed as P afterwards): each part keeps its own
under `parts`.
Usage: merge_step_records.py OUT.json PART.json... [--add-key ...] [--profile-used P]"""
import json
import os
import sys


def merge(argv):
    out, parts, add, profile_used = None, [], [], None
    it = iter(argv[1:])
    for a in it:
        if a in ("--add-key", "--profile-used"):
            value = next(it, None)
            if value is None:
                raise Refused(f"{a} needs a value")
            if a == "--add-key":
                kv, _, cond = value.partition(":")
                if "=" not in kv or (cond and "=" not in cond):
                    raise Refused(f"--add-key {value}: KEY=VALUE[:IF_KEY=IF_VALUE]")
                add.append(value)
            else:
                profile_used = value
        elif out is None:
            out = a
        else:
            parts.append(a)
    if out is None or not parts:
        print(__doc__, file=sys.stderr)
        return 2
    recs = []
    for p in parts:
        try:
            with open(p) as f:
                recs.append(json.load(f))
        except (OSError, ValueError) as e:
            raise Refused(f"{p}: not a readable JSON record ({e.__class__.__name__}: {e})")
    first = recs[0]
    if any(not isinstance(r, dict) or r.get("format") != "ulysses-step-validation/1" or r.get("set") != first.get("set")
           or not isinstance(r.get("cases"), list) for r in recs):
        print("merge_step_records.py: the parts must be step validation records of one set", file=sys.stderr)
        return 2
    used = {r.get("profile_used") for r in recs}
    if profile_used is None and len(used) > 1:
        print(f"merge_step_records.py: the parts ran different profiles ({', '.join(sorted(map(str, used)))}); "
              "--profile-used names the one they share", file=sys.stderr)
        return 2
    merged = {k: v for k, v in first.items() if k not in ("cases", "summary", "wall_s", "failed_cases")}
    if profile_used is not None:
        merged["profile_used"] = profile_used
    merged["parts"] = [{"file": os.path.basename(p), "measured_at": r.get("measured_at"), "command": r.get("command"),
                        "profile_used": r.get("profile_used"), "cases": [c["name"] for c in r["cases"]]}
                       for p, r in zip(parts, recs)]
    names = set()
    merged["cases"] = []
    for r in recs:
        for c in r["cases"]:
            if c["name"] in names:
                print(f"merge_step_records.py: case {c['name']} is in two parts", file=sys.stderr)
                return 2
            names.add(c["name"])
            for spec in add:
                kv, _, cond = spec.partition(":")
                k, v = kv.split("=", 1)
                if cond:
                    ck, cv = cond.split("=", 1)
                    if [ck, cv] not in c["keys"]:
                        continue
                c["keys"].append([k, v])
            merged["cases"].append(c)
    tmp = f"{out}.tmp{os.getpid()}"  # written whole or not at all
    with open(tmp, "w") as f:
        json.dump(merged, f, indent=1, allow_nan=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    print(f"wrote {out}: {len(merged['cases'])} cases from {len(parts)} parts")
    return 0


class Refused(Exception):
    """One line for stderr, exit 2, nothing written."""


def main(argv):
    try:
        return merge(argv)
    except Refused as e:
        print(f"merge_step_records.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
