// Prints the part of a Slurm batch script that runs COMMAND in IMAGE as UID:GID with GPUS
// GPUs (adapters/slurm/slurm_backend.h ImageScript), for tests/gpu/gpu-check.sh to run on
// the GPU machine without Slurm (it sets SLURM_JOB_ID and CUDA_VISIBLE_DEVICES itself).
//   slurm_image_script RUNNER HELPER STORE IMAGE UID GID GPUS CWD COMMAND
#include <cstdio>
#include <cstdlib>

#include "adapters/slurm/slurm_backend.h"

int main(int argc, char** argv) {
  if (argc != 10) {
    std::fprintf(stderr, "usage: slurm_image_script RUNNER HELPER STORE IMAGE UID GID GPUS CWD COMMAND\n");
    return 2;
  }
  jc::adapter::SlurmOptions o;
  o.image_runner = argv[1];
  o.userns_helper = argv[2];
  o.image_store = argv[3];
  auto script = jc::adapter::ImageScript(o, argv[4], argv[9], static_cast<uid_t>(std::atoi(argv[5])),
                                         static_cast<gid_t>(std::atoi(argv[6])), argv[8], {}, std::atoi(argv[7]));
  if (!script.ok()) {
    std::fprintf(stderr, "%s\n", script.status().ToString().c_str());
    return 1;
  }
  std::printf("#!/bin/sh\n%s", script->c_str());
  return 0;
}
