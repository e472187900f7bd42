// Rating's golden cases (formula 1 and the price in force): what an attempt costs and the
// energy it drew, and a correction's difference from the estimate it corrects.

#include "services/accounting/rating.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

namespace {

using jc::accounting::Rate;
using jc::accounting::Terms;

TEST_CASE("rating: cost is the price in force times the hours billed, energy is static power while the data came "
          "in plus execution power while it ran [A7][A12]",
          "[A7][A12]") {
  struct Golden {
    const char* what;
    Terms terms;
    double wall, transfer;
    double cost, energy_kwh;
  };
  const Golden cases[] = {
      // 1 h at 10/h, 300 W running, 200 W static for 30 s of transfer.
      {"an hour", {10, 300, 200}, 3600, 30, 10, (200.0 * 30 + 300.0 * 3600) / 3.6e6},
      // 90 s at 2.4/h: 0.06; 1 kW for 90 s: 0.025 kWh.
      {"90 seconds", {2.4, 1000, 0}, 90, 0, 0.06, 0.025},
      // Nothing ran: only the transfer's static draw, no cost.
      {"no run", {10, 300, 500}, 0, 72, 0, 0.01},
      // A free spec still draws power.
      {"free", {0, 360, 0}, 10000, 0, 0, 1},
      // Figures that cannot be: none, never a negative or NaN bill.
      {"negative run", {10, 300, 200}, -3600, -5, 0, 0},
      {"NaN run", {10, 300, 200}, std::nan(""), 0, 0, 0},
      {"infinite transfer", {10, 300, 200}, 0, std::numeric_limits<double>::infinity(), 0, 0},
      {"negative price", {-10, -300, -200}, 3600, 30, 0, 0},
  };
  for (const Golden& g : cases) {
    INFO(g.what);
    const auto rated = Rate(g.terms, g.wall, g.transfer);
    CHECK(rated.cost == Approx(g.cost).margin(1e-12));
    CHECK(rated.energy_kwh == Approx(g.energy_kwh).margin(1e-12));
    CHECK(rated.price_per_hour >= 0);
  }
}

TEST_CASE("rating: a correction carries the difference from the estimate, so the two records sum to the center's "
          "figures [A7]",
          "[A7]") {
  jointcloud::v1::UsageRecord center, estimate;
  center.set_wall_seconds(3000);
  center.set_cpu_seconds(2500);
  center.set_read_bytes(100);
  center.set_write_bytes(50);
  center.set_gpu_seconds(6000);
  center.set_energy_kwh(0.5);
  center.set_cost(8);
  estimate.set_wall_seconds(3600);
  estimate.set_gpu_seconds(7200);
  estimate.set_energy_kwh(0.6);
  estimate.set_cost(10);
  jointcloud::v1::UsageRecord correction = center;
  jc::accounting::SubtractEstimate(correction, estimate);
  CHECK(correction.wall_seconds() == Approx(-600));
  CHECK(correction.cpu_seconds() == Approx(2500));
  CHECK(correction.read_bytes() == 100);
  CHECK(correction.write_bytes() == 50);
  CHECK(correction.gpu_seconds() == Approx(-1200));
  CHECK(correction.energy_kwh() == Approx(-0.1));
  CHECK(correction.cost() == Approx(-2));
  CHECK(estimate.cost() + correction.cost() == Approx(center.cost()));
}

}  // namespace
