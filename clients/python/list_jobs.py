#!/usr/bin/python3
"""Lists training jobs over gRPC (JobService.ListTrainJobs), the newest first, page by page
(page_token), as a table: job id, name, status, project, user, created.

    list_jobs.py [--status running] [--project P] [--limit N]
"""
import argparse

import jcgrpc
from jointcloud.v1 import jobs_pb2, jobs_pb2_grpc


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    jcgrpc.add_connection_flags(parser)
    parser.add_argument("--status", default="", help="only jobs of this status: pending, running, completed, failed")
    parser.add_argument("--project", default="", help="only this project's jobs")
    parser.add_argument("--limit", type=int, default=0, help="at most this many (default: all)")
    args = parser.parse_args()
    channel, metadata = jcgrpc.connect(args)
    jobs = jobs_pb2_grpc.JobServiceStub(channel)
    shown, page_token = 0, ""
    while True:
        page = jobs.ListTrainJobs(
            jobs_pb2.ListTrainJobsRequest(status=args.status, project=args.project,
                                          page_size=100, page_token=page_token),
            metadata=metadata, timeout=jcgrpc.CALL_TIMEOUT)
        if not page_token:  # the header once the server answered
            print(f"{'JOB':<16} {'NAME':<32} {'STATUS':<10} {'PROJECT':<16} {'USER':<16} CREATED")
        for job in page.jobs:
            if args.limit and shown == args.limit:
                return 0
            created = job.created_at.ToDatetime().strftime("%Y-%m-%d %H:%M:%S")
            print(f"{job.job_id:<16} {job.name:<32} {job.status:<10} {job.project:<16} {job.user_name:<16} {created}")
            shown += 1
        page_token = page.next_page_token
        if not page_token:
            return 0


if __name__ == "__main__":
    jcgrpc.main(main)
