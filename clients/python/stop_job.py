#!/usr/bin/python3
"""Stops a training job over gRPC (JobService.StopTrainJob, Appendix A.2): its replicas are
stopped at their centers and the job ends failed, "stopped by the user" (a service or a
notebook, which run until stopped, completes). Watch it end with watch_job.py.

    stop_job.py JOB_ID
"""
import argparse

import jcgrpc
from jointcloud.v1 import jobs_pb2, jobs_pb2_grpc


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    jcgrpc.add_connection_flags(parser)
    parser.add_argument("job_id")
    args = parser.parse_args()
    channel, metadata = jcgrpc.connect(args)
    jobs = jobs_pb2_grpc.JobServiceStub(channel)
    jobs.StopTrainJob(jobs_pb2.StopTrainJobRequest(job_id=args.job_id),
                      metadata=metadata, timeout=jcgrpc.CALL_TIMEOUT)
    print(f"job {args.job_id} stopping")
    return 0


if __name__ == "__main__":
    jcgrpc.main(main)
