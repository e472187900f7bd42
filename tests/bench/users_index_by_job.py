#!/usr/bin/env python3
"""Which user, and which job of theirs, moves Jain's index over users (issue 45).

For each trace seed, generates the trace placement_quality_bench part 3 replays (jc-sim
generate, 5,000 jobs, 80% recurring), runs FCFS + first fit and the default
(`profile:default` with the control plane's queue order) with --jobs-out, and joins every
job with the trace. Where the users' index falls by more than 0.02 under the default, it
names the user the index turns on (the highest mean slowdown under the default), whether
that user is better off, about as well off (within 25%) or worse off than under FCFS +
first fit, where that user ranks by GPU time (the generator's heavy users are its first
five), and that user's most slowed job. Ends with the counts and the summed falls by
kind. docs/placement-quality.md, "Session 72", shows its figures.

usage: users_index_by_job.py [--jc-sim build/tools/sim/jc-sim] [--federation-seed 7]
                             [--shape philly] [--load 3.0] [--seeds 25-48] [--work DIR]
"""

import argparse
import collections
import csv
import os
import subprocess
import sys
import tempfile


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def jobs_of(trace_csv, jobs_csv):
    trace = list(csv.DictReader(open(trace_csv)))
    out = {int(r["job"]): r for r in csv.DictReader(open(jobs_csv))}
    jobs = []
    for i, r in enumerate(trace, 1):
        o = out[i]
        submit, duration = float(r["submit_s"]), float(r["duration_s"])
        jobs.append({"job": i, "user": r["user"], "gpus": int(r["gpus"]), "duration": duration,
                     "wait": float(o["start_s"]) - submit, "slowdown": (float(o["end_s"]) - submit) / duration,
                     "name": r["name"], "center": o["center"]})
    return jobs


def user_means(jobs):
    by = collections.defaultdict(list)
    for j in jobs:
        by[j["user"]].append(j["slowdown"])
    return {u: sum(v) / len(v) for u, v in by.items()}, {u: len(v) for u, v in by.items()}


def jain(values):
    values = list(values)
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jc-sim", default="build/tools/sim/jc-sim")
    p.add_argument("--federation-seed", default="7")
    p.add_argument("--shape", default="philly", choices=["generated", "philly", "pai"])
    p.add_argument("--load", default="3.0")
    p.add_argument("--seeds", default="25-48", help="first-last trace seeds (JC_A16_SEED_FROM=24: 25-48)")
    p.add_argument("--work", default=None, help="where traces and job files go (default: a temporary folder)")
    a = p.parse_args()
    first, _, last = a.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    work = a.work or tempfile.mkdtemp(prefix="jc-users-index.")
    os.makedirs(work, exist_ok=True)
    sim = a.jc_sim
    fed = os.path.join(work, "federation.yaml")
    run([sim, "federation", "--centers", "10", "--seed", a.federation_seed, "--out", fed])

    counts, falls = collections.Counter(), collections.defaultdict(float)
    print(f"federation --seed {a.federation_seed}, {a.shape} trace, load {a.load}, seeds {a.seeds} ({work})")
    for s in seeds:
        base = os.path.join(work, f"{a.shape}_{s}")
        shape = [] if a.shape == "generated" else ["--shape", a.shape]
        run([sim, "generate", "--federation", fed, "--federation-out", base + ".yaml", "--out", base + ".csv",
             "--jobs", "5000", "--load", a.load, "--seed", str(s), "--recurring", "0.8"] + shape)
        run([sim, "run", "--federation", base + ".yaml", "--trace", base + ".csv", "--policy", "first_fit",
             "--queue", "fcfs", "--jobs-out", base + ".first_fit.csv"])
        run([sim, "run", "--federation", base + ".yaml", "--trace", base + ".csv", "--policy", "profile:default",
             "--jobs-out", base + ".default.csv"])
        gpu_time = collections.Counter()
        for r in csv.DictReader(open(base + ".csv")):
            gpu_time[r["user"]] += float(r["duration_s"]) * max(1, int(r["gpus"]))
        heaviest = [u for u, _ in gpu_time.most_common()]
        ff = jobs_of(base + ".csv", base + ".first_fit.csv")
        df = jobs_of(base + ".csv", base + ".default.csv")
        uf, _ = user_means(ff)
        ud, n = user_means(df)
        change = jain(ud.values()) - jain(uf.values())
        counts["traces"] += 1
        if change > 0.02:
            counts["rises"] += 1
        if change >= -0.02:
            print(f"seed {s}: Jain over users {change:+.3f}")
            continue
        counts["falls"] += 1
        falls["all"] += change
        top = max(ud, key=ud.get)
        ratio = ud[top] / uf[top]
        kind = "about as well off" if 0.8 <= ratio <= 1.25 else ("worse off" if ratio > 1.25 else "better off")
        counts[kind] += 1
        falls[kind] += change
        worst = max((j for j in df if j["user"] == top), key=lambda j: j["slowdown"])
        was = next(j for j in ff if j["job"] == worst["job"])
        if worst["gpus"] >= 8 and worst["duration"] <= 120:
            counts["wide and short"] += 1
        share = ud[top] ** 2 / sum(v * v for v in ud.values())
        rank = heaviest.index(top) + 1  # by the GPU time of the user's jobs in the trace
        if rank <= 5:
            counts["heavy"] += 1
        print(f"seed {s}: Jain over users {change:+.3f}; it turns on {top} ({n[top]} jobs, GPU time rank {rank}, "
              f"{share:.0%} of the "
              f"squares): mean slowdown {uf[top]:.0f} under FCFS + first fit, {ud[top]:.0f} under the default "
              f"({kind}); that user's most slowed job: {worst['gpus']} GPUs for {worst['duration']:.0f} s, "
              f"waited {was['wait']:.0f} s and {worst['wait']:.0f} s ({worst['name']})")
    print(f"\n{counts['traces']} traces: the users' index falls by more than 0.02 in {counts['falls']}, "
          f"rises by more in {counts['rises']}")
    for kind in ("better off", "about as well off", "worse off"):
        print(f"  the user it turns on is {kind}: {counts[kind]} traces, summed fall {falls[kind]:+.2f} "
              f"of {falls['all']:+.2f}")
    print(f"  that user is one of the five with the most GPU time: {counts['heavy']} of {counts['falls']}")
    print(f"  that user's most slowed job is 8 GPUs or more and 2 minutes or less: {counts['wide and short']} "
          f"of {counts['falls']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
