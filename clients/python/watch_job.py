#!/usr/bin/python3
"""Watches a training job over gRPC (JobService.WatchTrainJobs) until it ends: one line per
event as the control plane commits it, then its end. Exits 0 when the job completed, 1
when it failed (a job stopped before its end fails), as `jcctl job watch` does.

A lost connection (the server restarted, a proxy cut it) is resumed after the last
revision received, so no event is missed or shown twice.

    watch_job.py JOB_ID               # the job as it stands, then each change
    watch_job.py JOB_ID --history     # its whole story from CREATED (also of a job long ended)
"""
import argparse
import sys
import time

import grpc

import jcgrpc
from jointcloud.v1 import jobs_pb2, jobs_pb2_grpc

Type = jobs_pb2.TrainJobEvent.Type


def describe(event):
    line = f"{event.revision:>6} {Type.Name(event.type):<8} {event.status}"
    if event.previous_status and event.previous_status != event.status:
        line += f" (was {event.previous_status})"
    for r in event.replicas:
        where = f" at {r.center_id}" if r.center_id else ""
        line += f"; task {r.task_index} replica {r.replica_index}: {r.phase}{where}"
        if r.message:
            line += f" ({r.message})"
    if event.type == Type.MOVED:
        line += f"; moved {event.move.from_center_id} -> {event.move.to_center_id}: {event.move.reason}"
    if event.type == Type.SNAPSHOT:  # the whole job as it stands, in event.job
        for t, task in enumerate(event.job.task_infos):
            for r, status in enumerate(task.replica_status):
                where = f" at {task.center_ids[r]}" if r < len(task.center_ids) and task.center_ids[r] else ""
                line += f"; task {t} replica {r}: {status}{where}"
    reason = event.status_reason or event.job.status_reason
    if reason and event.status in ("completed", "failed"):
        line += f": {reason}"
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    jcgrpc.add_connection_flags(parser)
    parser.add_argument("job_id")
    parser.add_argument("--since", type=int, default=0,
                        help="resume after this revision (default: 0, the job as it stands first)")
    parser.add_argument("--history", action="store_true",
                        help="first the job's past events from CREATED, rather than the job as it stands")
    args = parser.parse_args()
    channel, metadata = jcgrpc.connect(args)
    jobs = jobs_pb2_grpc.JobServiceStub(channel)
    since, lost = args.since, 0
    while True:
        request = jobs_pb2.WatchTrainJobsRequest(job_id=args.job_id, since_revision=since,
                                                 heartbeat_seconds=15, history=args.history)
        try:
            for event in jobs.WatchTrainJobs(request, metadata=metadata):
                lost = 0
                if event.type == Type.HEARTBEAT:
                    continue
                since = max(since, event.revision)
                print(describe(event), flush=True)
                if event.type == Type.ENDED or (event.type == Type.SNAPSHOT and
                                                event.status in ("completed", "failed")):
                    print(f"job {event.job_id} {event.status}", flush=True)
                    return 0 if event.status == "completed" else 1
            # The server ends a job's stream after ENDED; ending before it is a lost stream.
            why = "the stream ended before the job did"
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            why = f"connection lost: {error.details()}"
        lost += 1
        if lost > 30:
            sys.exit(f"error: {why}, 30 times in a row")
        print(f"({why}; resuming after revision {since})", file=sys.stderr, flush=True)
        time.sleep(1)


if __name__ == "__main__":
    jcgrpc.main(main)
