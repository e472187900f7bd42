#include "services/accounting/rating.h"

#include <cmath>

namespace jc::accounting {
namespace {

double NonNegative(double x) { return std::isfinite(x) && x > 0 ? x : 0; }

}  // namespace

Rated Rate(const Terms& terms, double wall_seconds, double transfer_seconds) {
  const double wall = NonNegative(wall_seconds);
  const double transfer = NonNegative(transfer_seconds);
  Rated r;
  r.price_per_hour = NonNegative(terms.price_per_hour);
  r.cost = r.price_per_hour * wall / 3600.0;
  r.energy_kwh = (NonNegative(terms.static_power_watts) * transfer + NonNegative(terms.execution_power_watts) * wall) /
                 3.6e6;
  return r;
}

void SubtractEstimate(v1::UsageRecord& record, const v1::UsageRecord& estimate) {
  record.set_wall_seconds(record.wall_seconds() - estimate.wall_seconds());
  record.set_cpu_seconds(record.cpu_seconds() - estimate.cpu_seconds());
  record.set_read_bytes(record.read_bytes() - estimate.read_bytes());
  record.set_write_bytes(record.write_bytes() - estimate.write_bytes());
  record.set_gpu_seconds(record.gpu_seconds() - estimate.gpu_seconds());
  record.set_energy_kwh(record.energy_kwh() - estimate.energy_kwh());
  record.set_cost(record.cost() - estimate.cost());
}

}  // namespace jc::accounting
