#!/usr/bin/python3
"""Submits a training job over gRPC (JobService.CreateTrainJob, Appendix A.1 of the standard).

    submit_job.py --name mnist --command 'echo training' --spec cpu-1 [--image pytorch-demo] [--replicas 2]
    submit_job.py -f job.json      # the body of POST /openapi/v1/trainjob, the same JSON names

Prints "job <jobId> submitted" and where each task's replicas were placed (-q: the job id
alone, for scripts). A job the server refuses changes nothing: the error names the field.
"""
import argparse
import sys

from google.protobuf import json_format

import jcgrpc
from jointcloud.v1 import jobs_pb2, jobs_pb2_grpc


def request_from(args):
    if args.file:
        with open(args.file, encoding="utf-8") as f:
            # protobuf's JSON names are the API's (imageId, resourceSpecId, replicaNumber;
            # snake_case too), and an unknown field is an error here as at the gateway.
            return json_format.Parse(f.read(), jobs_pb2.CreateTrainJobRequest())
    task = jobs_pb2.TaskSpec(name=args.task, command=args.command or "",
                             resource_spec_id=args.spec or "", image_id=args.image or "")
    if args.replicas is not None:
        task.replica_number = args.replicas
    return jobs_pb2.CreateTrainJobRequest(name=args.name or "", tasks=[task])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    jcgrpc.add_connection_flags(parser)
    parser.add_argument("-f", "--file", help="a job as JSON (the REST body of POST /openapi/v1/trainjob)")
    parser.add_argument("--name", help="the job's name (< 32 characters)")
    parser.add_argument("--task", default="main", help="the task's name (default: main)")
    parser.add_argument("--command", help="what each replica runs (a shell command)")
    parser.add_argument("--spec", help="the resource spec id, e.g. cpu-1")
    parser.add_argument("--image", help="the image id, e.g. pytorch-demo")
    parser.add_argument("--replicas", type=int, help="how many replicas (default: 1)")
    parser.add_argument("--project", default="", help="the job's project (default: your only one)")
    parser.add_argument("--idempotency_key", default="",
                        help="a retried submit with the same key returns the first job")
    parser.add_argument("-q", "--quiet", action="store_true", help="print the job id alone")
    args = parser.parse_args()
    if args.file and (args.name or args.command or args.spec):
        parser.error("give -f or --name/--command/--spec, not both")
    try:
        request = request_from(args)
    except (OSError, json_format.ParseError) as error:
        sys.exit(f"error: {args.file}: {error}")
    if args.project:
        request.project = args.project
    if args.idempotency_key:
        request.idempotency_key = args.idempotency_key

    channel, metadata = jcgrpc.connect(args)
    jobs = jobs_pb2_grpc.JobServiceStub(channel)
    response = jobs.CreateTrainJob(request, metadata=metadata, timeout=jcgrpc.CALL_TIMEOUT)
    if args.quiet:
        print(response.job_id)
        return 0
    print(f"job {response.job_id} submitted")
    for task in response.task_infos:
        centers = ", ".join(c or "(waiting)" for c in task.center_ids) or "(waiting)"
        print(f"  task {task.name}: {task.replica_number} replica(s) at {centers}")
    return 0


if __name__ == "__main__":
    jcgrpc.main(main)
