// Placement quality and simulator speed (issue 13's targets), printed, never asserted:
//   1. On a 10-center heterogeneous federation at 80% offered load, averaged over seeds:
//      the default profile's mean JCT against FCFS with first fit (target: >= 25% better),
//      and whether any single scorer beats it on mean JCT, cost and energy all at once
//      (target: none).
//   2. 100,000 jobs over 1,000 centers with the default profile: wall and CPU time
//      (target: under 60 s).
//   3. Issue 45 (SPEC A16): the shipped default (profile:default + the control plane's
//      queue order and aging) against FCFS with first fit on two federations and three trace
//      shapes, at 3.0 and 0.5 offered load, on traces whose jobs recur by name (generate
//      --recurring 0.8, so the estimator has something to learn), durations learned, never
//      peeked: mean and p95 JCT, mean wait, cost and Jain's index. Target: where FCFS first
//      fit's mean wait is at least a third of its JCT, >= 25% better mean JCT; elsewhere
//      never worse; everywhere never dearer, and Jain's index >= FCFS first fit's - 0.02,
//      judged over the projects' mean slowdown (JAIN_P) and, as the issue states it, over the
//      users' (JAIN_U). Ends with how many of the 12 cases it meets by each; with two seeds
//      or more, also the same comparison seed by seed (mean and Student's 95% interval of
//      each paired difference) and how many cases the seeds show a miss in, and who was
//      slowed: the share of users whose mean slowdown is above (and above twice) FCFS first
//      fit's on the same trace, and the worst-off user's (WORST_U) against first fit's
//      worst-off — what Jain's index, a measure of equality, cannot say. JAIN_UB: Jain's
//      index over the users' mean bounded slowdown (a job under 10 s counted as one of 10 s,
//      as parallel-job scheduling reports it), judged by the same rule and counted apart.
// usage: placement_quality_bench [seeds=5] [jobs=5000] [scale_jobs=100000] [scale_centers=1000]
//                                [a16_seeds=3]
// Part 3 runs on two federations (jc-sim federation --centers 10 --seed 1 and --seed 7) and
// three trace shapes (generated, philly, pai: generate --shape); its variants (the baseline,
// first_fit + fcfs, always runs): JC_A16_POLICIES and JC_A16_QUEUES (comma lists, or ; lists when an item holds commas; the
// shipped default's profile and queue order when unset), JC_A16_AGING (sef's aging; the
// shipped default's when unset), JC_A16_SHAPES and JC_A16_FEDERATIONS (comma lists),
// JC_A16_KEEP_SCARCE=0 (centers not kept for narrow waiting jobs: measurement only),
// JC_A16_SEED_FROM=N (trace seeds N+1 .. N+a16_seeds instead of 1 .. a16_seeds).

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/sim/experiments.h"
#include "tools/sim/federation.h"
#include "tools/sim/generator.h"
#include "tools/sim/policy.h"
#include "services/scheduler/queue_order.h"

using namespace jc::sim;

int main(int argc, char** argv) {
  int seeds = argc > 1 ? std::atoi(argv[1]) : 5;
  int jobs = argc > 2 ? std::atoi(argv[2]) : 5000;
  int scale_jobs = argc > 3 ? std::atoi(argv[3]) : 100000;
  int scale_centers = argc > 4 ? std::atoi(argv[4]) : 1000;
  int a16_seeds = argc > 5 ? std::atoi(argv[5]) : 3;
  PolicyCatalog catalog;
  std::vector<std::string> policies = DefaultPolicies(catalog);
  struct Sum {
    double jct = 0, cost = 0, energy = 0;
  };
  std::map<std::string, Sum> sums;
  for (int s = 1; s <= seeds; ++s) {
    Federation f = GenerateFederation(10, 1);
    GeneratorOptions g;
    g.jobs = jobs;
    g.load = 0.8;
    g.seed = s;
    auto trace = GenerateTrace(g, f);
    if (!trace.ok()) return std::fprintf(stderr, "%s\n", std::string(trace.status().message()).c_str()), 1;
    std::vector<SimOptions> runs;
    for (const auto& p : policies) {
      SimOptions o;
      o.policy = p;
      runs.push_back(o);
    }
    auto results = RunAll(f, *trace, runs, catalog);
    if (!results.ok()) return std::fprintf(stderr, "%s\n", std::string(results.status().message()).c_str()), 1;
    for (const auto& r : *results) {
      Sum& sum = sums[r.metrics.policy];
      sum.jct += r.metrics.mean_jct / seeds;
      sum.cost += r.metrics.cost / seeds;
      sum.energy += r.metrics.energy_kwh / seeds;
    }
  }
  const Sum& d = sums["profile:default"];
  if (seeds > 0) {
    std::printf("10 centers, 80%% offered load, %d jobs x %d seeds (means over seeds)\n", jobs, seeds);
    std::printf("%-32s %10s %12s %10s\n", "POLICY", "MEAN_JCT", "COST", "ENERGY_KWH");
    int dominating = 0;
    for (const auto& p : policies) {
      const Sum& v = sums[p];
      bool dominates = p.rfind("scorer:", 0) == 0 && v.jct < d.jct && v.cost < d.cost && v.energy < d.energy;
      dominating += dominates;
      std::printf("%-32s %10.0f %12.1f %10.1f%s\n", p.c_str(), v.jct, v.cost, v.energy,
                  dominates ? "  <- better than default on all three" : "");
    }
    const Sum& ff = sums["first_fit"];
    std::printf("default profile vs first fit, mean JCT: %.1f%% better (target >= 25%%)\n", 100 * (1 - d.jct / ff.jct));
    std::printf("single scorers better than default on JCT, cost and energy at once: %d (target 0)\n", dominating);
  }  // seeds > 0

  if (a16_seeds > 0) {
    // Placement + queue order (issue 45): every combination on the same traces, on each
    // federation and trace shape, at a load where jobs wait and one where nobody does.
    auto list = [](const char* env, std::vector<std::string> fallback) {
      const char* v = std::getenv(env);
      if (v == nullptr || *v == '\0') return fallback;
      std::vector<std::string> out;
      // ';' separates the items when any is there (a weights: policy holds commas).
      const char sep = std::string(v).find(';') != std::string::npos ? ';' : ',';
      for (absl::string_view part : absl::StrSplit(v, sep)) out.emplace_back(part);
      return out;
    };
    const std::vector<std::string> a16_policies = list("JC_A16_POLICIES", {"profile:default"});
    const std::vector<std::string> a16_queues = list("JC_A16_QUEUES", {jc::scheduler::kDefaultQueueOrder});
    const double aging = std::getenv("JC_A16_AGING") ? std::atof(std::getenv("JC_A16_AGING"))
                                                     : jc::scheduler::kDefaultQueueAging;
    const std::vector<std::string> shapes = list("JC_A16_SHAPES", {"generated", "philly", "pai"});
    const std::vector<std::string> federations = list("JC_A16_FEDERATIONS", {"1", "7"});
    // A second set of traces, to see whether a count holds beyond the seeds it was read on.
    const int seed_from = std::getenv("JC_A16_SEED_FROM") ? std::atoi(std::getenv("JC_A16_SEED_FROM")) : 0;
    if (seed_from < 0) return std::fprintf(stderr, "JC_A16_SEED_FROM: a seed offset of 0 or more\n"), 2;
    int met = 0, met_users = 0, met_users_bounded = 0, cases = 0, shown_misses = 0;
    for (const std::string& fed_seed : federations) {
      for (const std::string& shape : shapes) {
        for (double load : {3.0, 0.5}) {
          struct Acc {
            double jct = 0, p95 = 0, wait = 0, cost = 0, jain = 0, jain_users = 0, jain_users_bounded = 0,
                   worst_user = 0;
            // Per seed, for the paired comparison with the baseline on the same trace.
            std::vector<double> jcts, costs, jains, jains_users, jains_users_bounded, worst_users;
            std::vector<std::map<std::pair<std::string, std::string>, double>> user_slowdowns;
          };
          std::map<std::string, Acc> acc;
          std::vector<std::string> order;
          for (int s = 1; s <= a16_seeds; ++s) {
            Federation f = GenerateFederation(10, std::strtoull(fed_seed.c_str(), nullptr, 10));
            GeneratorOptions g;
            g.jobs = jobs;
            g.load = load;
            g.seed = seed_from + s;
            g.recurring_share = 0.8;
            if (shape != "generated") g.shape = shape;
            auto trace = GenerateTrace(g, f);
            if (!trace.ok()) return std::fprintf(stderr, "%s\n", std::string(trace.status().message()).c_str()), 1;
            std::vector<SimOptions> runs;
            SimOptions baseline;
            baseline.policy = "first_fit";
            baseline.queue = *jc::scheduler::ParseQueueSettings("fcfs");
            runs.push_back(baseline);
            for (const auto& q : a16_queues) {
              for (const auto& p : a16_policies) {
                if (p == "first_fit" && q == "fcfs") continue;
                SimOptions o;
                o.policy = p;
                auto settings = jc::scheduler::ParseQueueSettings(q);
                if (!settings.ok()) {
                  return std::fprintf(stderr, "JC_A16_QUEUES: %s\n", std::string(settings.status().message()).c_str()), 2;
                }
                o.queue = *settings;
                o.queue.aging = aging;
                o.keep_scarce = std::getenv("JC_A16_KEEP_SCARCE") == nullptr ||
                                std::string(std::getenv("JC_A16_KEEP_SCARCE")) != "0";
                runs.push_back(o);
              }
            }
            auto results = RunAll(f, *trace, runs, catalog);
            if (!results.ok()) return std::fprintf(stderr, "%s\n", std::string(results.status().message()).c_str()), 1;
            for (const auto& r : *results) {
              std::string key = r.metrics.policy + " + " + r.metrics.queue;
              if (!acc.count(key)) order.push_back(key);
              Acc& a = acc[key];
              a.jct += r.metrics.mean_jct / a16_seeds;
              a.p95 += r.metrics.p95_jct / a16_seeds;
              a.wait += r.metrics.mean_wait / a16_seeds;
              a.cost += r.metrics.cost / a16_seeds;
              a.jain += r.metrics.jain_fairness / a16_seeds;
              a.jain_users += r.metrics.jain_users / a16_seeds;
              a.jain_users_bounded += r.metrics.jain_users_bounded / a16_seeds;
              a.jains_users_bounded.push_back(r.metrics.jain_users_bounded);
              a.worst_user += r.metrics.worst_user_slowdown / a16_seeds;
              a.worst_users.push_back(r.metrics.worst_user_slowdown);
              a.user_slowdowns.push_back(r.metrics.user_slowdown);
              a.jcts.push_back(r.metrics.mean_jct);
              a.costs.push_back(r.metrics.cost);
              a.jains.push_back(r.metrics.jain_fairness);
              a.jains_users.push_back(r.metrics.jain_users);
            }
          }
          const Acc& base = acc["first_fit + fcfs"];
          // The target where jobs wait (FCFS first fit's mean wait at least a third of its
          // JCT): >= 25% better mean JCT; elsewhere never worse. At every load never dearer,
          // and Jain's index over the projects' (and, apart, the users') mean slowdown >=
          // FCFS first fit's - 0.02: a gain bought by slowing some down does not count.
          const bool waits = base.wait >= base.jct / 3;
          std::printf("\nissue 45: federation --seed %s, %s trace, %.1f offered load, %d recurring jobs x %d seeds "
                      "(%d-%d), durations learned (means over seeds); FCFS first fit waits %s a third of its JCT "
                      "(target: %s)\n",
                      fed_seed.c_str(), shape.c_str(), load, jobs, a16_seeds, seed_from + 1, seed_from + a16_seeds,
                      waits ? ">=" : "<",
                      waits ? ">= 25% better mean JCT" : "never worse mean JCT");
          std::printf("%-40s %9s %9s %9s %10s %6s %6s %7s %7s %8s %8s\n", "POLICY + QUEUE", "MEAN_JCT", "P95_JCT",
                      "MEAN_WAIT", "COST", "JAIN_P", "JAIN_U", "JAIN_UB", "WORST_U", "JCT_VS", "COST_VS");
          for (const auto& key : order) {
            const Acc& a = acc[key];
            const bool meets = (waits ? a.jct <= 0.75 * base.jct : a.jct <= base.jct) && a.cost <= base.cost &&
                               a.jain >= base.jain - 0.02;
            const bool meets_users = (waits ? a.jct <= 0.75 * base.jct : a.jct <= base.jct) && a.cost <= base.cost &&
                                     a.jain_users >= base.jain_users - 0.02;
            const bool meets_users_bounded = (waits ? a.jct <= 0.75 * base.jct : a.jct <= base.jct) &&
                                             a.cost <= base.cost && a.jain_users_bounded >= base.jain_users_bounded - 0.02;
            const bool shipped = key == std::string("profile:default + ") + jc::scheduler::kDefaultQueueOrder;
            if (shipped) cases += 1, met += meets, met_users += meets_users, met_users_bounded += meets_users_bounded;
            std::printf("%-40s %9.0f %9.0f %9.0f %10.1f %6.3f %6.3f %7.3f %7.0f %+7.1f%% %+7.1f%%%s%s%s\n", key.c_str(),
                        a.jct, a.p95, a.wait, a.cost, a.jain, a.jain_users, a.jain_users_bounded, a.worst_user,
                        100 * (a.jct / base.jct - 1), 100 * (a.cost / base.cost - 1),
                        key == "first_fit + fcfs" ? "" : meets ? "  meets the target" : "  misses the target",
                        key == "first_fit + fcfs" ? "" : meets_users ? " (users: meets)" : " (users: misses)",
                        key == "first_fit + fcfs" ? "" : meets_users_bounded ? " (bounded: meets)" : " (bounded: misses)");
            if (key == "first_fit + fcfs" || a16_seeds < 2) continue;
            // The same comparison seed by seed (each against the baseline on its own trace),
            // with Student's 95% interval: a few jobs of weeks or one wide, short job decide a
            // seed's cost and Jain's index, so a miss by less than the seeds' spread is not
            // one the traces can tell from none. A miss is "shown" only where the whole
            // interval lies on the wrong side of the rule.
            std::vector<double> jct_change, cost_change, jain_diff, jain_users_diff, jain_bounded_diff;
            for (size_t i = 0; i < a.jcts.size(); ++i) {
              jct_change.push_back(100 * (a.jcts[i] / base.jcts[i] - 1));
              cost_change.push_back(100 * (a.costs[i] / base.costs[i] - 1));
              jain_diff.push_back(a.jains[i] - base.jains[i]);
              jain_users_diff.push_back(a.jains_users[i] - base.jains_users[i]);
              jain_bounded_diff.push_back(a.jains_users_bounded[i] - base.jains_users_bounded[i]);
            }
            const Estimate jct = EstimateOf(jct_change), cost = EstimateOf(cost_change);
            const Estimate jain = EstimateOf(jain_diff), jain_users = EstimateOf(jain_users_diff);
            const Estimate jain_bounded = EstimateOf(jain_bounded_diff);
            std::vector<std::string> shown;
            if (jct.mean - jct.ci95 > (waits ? -25.0 : 0.0)) shown.push_back("JCT");
            if (cost.mean - cost.ci95 > 0) shown.push_back("cost");
            if (jain.mean + jain.ci95 < -0.02) shown.push_back("Jain_P");
            if (jain_users.mean + jain_users.ci95 < -0.02) shown.push_back("Jain_U");
            std::printf("%-40s paired by seed (mean ± 95%%): JCT %+.1f%% ± %.1f, cost %+.1f%% ± %.1f, Jain_P %+.3f ± %.3f, "
                        "Jain_U %+.3f ± %.3f, Jain_UB %+.3f ± %.3f; a miss the seeds show: %s\n",
                        "", jct.mean, jct.ci95, cost.mean, cost.ci95, jain.mean, jain.ci95, jain_users.mean,
                        jain_users.ci95, jain_bounded.mean, jain_bounded.ci95,
                        shown.empty() ? "none" : absl::StrJoin(shown, ", ").c_str());
            // Who was slowed, user by user against the baseline on the same trace: Jain's
            // index says how equal the users' mean slowdowns are, not whether any got worse
            // (a run that cuts every user's but one's is less equal and starves nobody), and
            // issue 45's rule is against a gain bought by starving users.
            std::vector<double> slowed, starved, worst_ratio;
            for (size_t i = 0; i < a.user_slowdowns.size(); ++i) {
              int n = 0, up = 0, twice = 0;
              for (const auto& [user, slowdown] : a.user_slowdowns[i]) {
                auto b = base.user_slowdowns[i].find(user);
                if (b == base.user_slowdowns[i].end()) continue;
                ++n;
                up += slowdown > b->second;
                twice += slowdown > 2 * b->second;
              }
              slowed.push_back(n > 0 ? 100.0 * up / n : 0);
              starved.push_back(n > 0 ? 100.0 * twice / n : 0);
              if (base.worst_users[i] > 0) worst_ratio.push_back(a.worst_users[i] / base.worst_users[i]);
            }
            const Estimate slowed_e = EstimateOf(slowed), starved_e = EstimateOf(starved), worst_e = EstimateOf(worst_ratio);
            std::printf("%-40s users slowed (mean slowdown above FCFS first fit's): %.0f%% ± %.0f, more than twice: "
                        "%.1f%% ± %.1f; the worst-off user's mean slowdown x%.2f ± %.2f of FCFS first fit's worst-off\n",
                        "", slowed_e.mean, slowed_e.ci95, starved_e.mean, starved_e.ci95, worst_e.mean, worst_e.ci95);
            if (shipped) shown_misses += !shown.empty();
          }
        }
      }
    }
    if (cases > 0) {
      const std::string order = jc::scheduler::kDefaultQueueOrder;
      std::printf("\nissue 45: the shipped default (profile:default + %s%s) meets the target in %d of %d cases\n",
                  order.c_str(), order == "sef" ? absl::StrFormat(", aging %g", aging).c_str() : "", met, cases);
      std::printf("issue 45: with Jain's index over the users' mean slowdown: %d of %d cases\n", met_users, cases);
      std::printf("issue 45: with Jain's index over the users' mean bounded slowdown (a job under 10 s counted as 10 s): "
                  "%d of %d cases\n",
                  met_users_bounded, cases);
      if (a16_seeds >= 2) {
        std::printf("issue 45: cases where the seeds show a miss (the whole 95%% interval of a paired difference on the "
                    "wrong side of the rule, either Jain): %d of %d\n",
                    shown_misses, cases);
      }
    }
  }

  if (scale_jobs > 0) {
    Federation big = GenerateFederation(scale_centers, 1);
    GeneratorOptions g;
    g.jobs = scale_jobs;
    g.load = 0.8;
    auto trace = GenerateTrace(g, big);
    if (!trace.ok()) return 1;
    SimOptions o;
    auto r = RunAll(big, *trace, {o}, catalog, 1);
    if (!r.ok()) return std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str()), 1;
    const RunMetrics& m = (*r)[0].metrics;
    std::printf("scale: %d jobs over %d centers with the default profile: %.1f s wall, %.1f s CPU "
                "(%.0f us of CPU per job, %lld decisions; target < 60 s)\n",
                m.jobs, scale_centers, m.wall_seconds, m.cpu_seconds, 1e6 * m.cpu_seconds / m.jobs,
                static_cast<long long>(m.decisions));
  }
  return 0;
}
