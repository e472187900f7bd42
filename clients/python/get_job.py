#!/usr/bin/python3
"""Gets a training job over gRPC (JobService.GetTrainJob, Appendix A.3): its status, each
task's replicas and centers, and every attempt (history), printed as JSON with the API's
names (jobId, taskInfos, centerIDs, replicaStatus), as GET /openapi/v1/trainjob/{jobId}
answers in its data.

    get_job.py JOB_ID
"""
import argparse

from google.protobuf import json_format

import jcgrpc
from jointcloud.v1 import jobs_pb2, jobs_pb2_grpc


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    jcgrpc.add_connection_flags(parser)
    parser.add_argument("job_id")
    args = parser.parse_args()
    channel, metadata = jcgrpc.connect(args)
    jobs = jobs_pb2_grpc.JobServiceStub(channel)
    job = jobs.GetTrainJob(jobs_pb2.GetTrainJobRequest(job_id=args.job_id),
                           metadata=metadata, timeout=jcgrpc.CALL_TIMEOUT)
    print(json_format.MessageToJson(job, including_default_value_fields=True, indent=2))
    return 0


if __name__ == "__main__":
    jcgrpc.main(main)
