#pragma once

// Fragmentation of a center's free accelerators (SPEC A9, A16): how many of them replicas
// of 2, 4, 8, 16 and 32 accelerators could not use, averaged over those sizes. Free
// accelerators F are unusable by a replica of k when F < k (all of them) and otherwise
// F mod k (what is left once as many k-replicas as fit are packed). The gpu_fragmentation
// scorer prefers the center where placing a replica raises this least (or lowers it most),
// as Alibaba's fragmentation gradient descent does for GPU nodes (Weng et al., ATC '23):
// narrow replicas fill centers already broken up, and whole blocks stay for wide ones.

namespace jc::scheduler {

// The sizes a free block is judged against: GPU jobs ask for powers of two.
inline constexpr int kWiderReplicaSizes[] = {2, 4, 8, 16, 32};
static_assert([] {
  for (int k : kWiderReplicaSizes) {
    if ((k & (k - 1)) != 0) return false;
  }
  return true;
}(), "UnusableAccelerators takes remainders by mask: powers of two only");

// Mean over kWiderReplicaSizes of the free accelerators (rounded down) a replica of that
// size could not use.
double UnusableAccelerators(double free);

}  // namespace jc::scheduler
