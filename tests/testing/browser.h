#pragma once

// A person at the console, in Debian's chromium driven by puppeteer-core
// (tests/browser/drive.mjs): signs in by typing the token into the console's form — never by
// a URL — then opens each page in the same tab and waits until what the test expects is on
// it. The driver is installed into the build tree on first use (tests/browser/install.sh).

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/testing/server_processes.h"

namespace jc::testing {

struct BrowserStep {
  std::string hash;                // "#/centers": the console's page, in the signed-in tab
  std::vector<std::string> until;  // texts the page must show (waited for, 15 s at most)
  std::string screenshot;          // a PNG of it, when named
  std::string open;                // instead of hash: this address as it is (a link sent)
  // Then a click on this selector, which opens a tab: waited on for `popup_until`, where
  // `popup_eval` (an async function's source) runs.
  std::string click;
  std::vector<std::string> popup_until;
  std::string popup_eval;
  // Or: these fields filled (selector, text), then a click on `press` (`press_times` times),
  // waited on for `press_until`.
  std::vector<std::pair<std::string, std::string>> fill;
  std::string press;
  int press_times = 1;
  std::vector<std::string> press_until;
};

struct BrowserRun {
  bool signed_in = false;
  std::string sign_in_error;
  struct Page {
    bool reached = false;  // every `until` text was there
    std::string address;   // where the tab ended
    std::string dom;
    struct Popup {
      bool opened = false;
      bool reached = false;
      std::string address;
      std::string dom;
      std::string eval;  // what popup_eval returned
    } popup;
    struct Pressed {
      bool reached = false;  // every press_until text was there
      std::string address;
      std::string dom;
    } pressed;
  };
  std::vector<Page> pages;
  std::vector<std::string> addresses;  // every address the tab was at
  std::vector<std::string> requests;   // every URL it requested
  std::vector<std::string> errors;     // uncaught errors of the page's script
};

// Runs `steps` in one tab of a fresh profile under `dir`, signed in with `token` through the
// sign-in form first (none when empty). `source_dir` and `tools_dir`: the repository and
// where in the build tree the driver is installed.
inline BrowserRun Browse(const std::string& source_dir, const std::string& tools_dir, const std::string& dir,
                         const std::string& base, const std::string& token, const std::vector<BrowserStep>& steps) {
  Ran installed = RunCaptured(dir, {"bash", source_dir + "/tests/browser/install.sh", source_dir, tools_dir});
  INFO(installed.out << installed.err);
  REQUIRE(installed.code == 0);
  static int n = 0;
  const std::string plan_file = dir + "/browse." + std::to_string(++n) + ".json";
  nlohmann::json plan = {{"base", base}, {"token", token}, {"profile", dir + "/profile." + std::to_string(n)},
                         {"steps", nlohmann::json::array()}};
  for (const auto& s : steps) {
    nlohmann::json step = {{"until", s.until}};
    if (!s.open.empty()) step["open"] = s.open;
    if (!s.hash.empty()) step["hash"] = s.hash;
    if (!s.screenshot.empty()) step["screenshot"] = s.screenshot;
    if (!s.click.empty()) {
      step["click"] = s.click;
      step["popup_until"] = s.popup_until;
      step["popup_eval"] = s.popup_eval;
    }
    if (!s.press.empty()) {
      step["press"] = s.press;
      step["press_times"] = s.press_times;
      step["press_until"] = s.press_until;
      step["fill"] = nlohmann::json::array();
      for (const auto& [selector, text] : s.fill) step["fill"].push_back({selector, text});
    }
    plan["steps"].push_back(step);
  }
  std::ofstream(plan_file) << plan.dump();
  Ran ran = RunCaptured(dir, {"node", tools_dir + "/drive.mjs", plan_file});
  INFO(ran.err);
  REQUIRE(ran.code == 0);
  nlohmann::json out = nlohmann::json::parse(ran.out);
  BrowserRun run;
  run.signed_in = out.value("signed_in", false);
  run.sign_in_error = out.value("sign_in_error", "");
  for (const auto& p : out["steps"]) {
    BrowserRun::Page page{p.value("reached", false), p.value("address", ""), p.value("dom", ""), {}, {}};
    if (p.contains("pressed")) {
      const auto& t = p["pressed"];
      page.pressed = {t.value("reached", false), t.value("address", ""), t.value("dom", "")};
    }
    if (p.contains("popup")) {
      const auto& t = p["popup"];
      page.popup = {t.value("opened", false), t.value("reached", false), t.value("address", ""), t.value("dom", ""),
                    t.value("eval", "")};
    }
    run.pages.push_back(std::move(page));
  }
  run.addresses = out["addresses"].get<std::vector<std::string>>();
  run.requests = out["requests"].get<std::vector<std::string>>();
  run.errors = out["console_errors"].get<std::vector<std::string>>();
  return run;
}

}  // namespace jc::testing
