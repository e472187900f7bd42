// Drives Debian's chromium through the console as a person would (tests/testing/browser.h):
// signs in by typing the token into the console's form, never by a URL, then opens each page
// of the plan in the same tab (loaded afresh) and waits until what the test expects is on it (with a
// deadline: a page that never shows it is dumped as it is, and the test says what is
// missing). Prints one JSON object: for each step its DOM, whether it was reached and the
// address it ended at; every address the tab was at and every URL it requested.
//
//   node drive.mjs PLAN.json
//   PLAN: {"base": "http://127.0.0.1:PORT/ui/", "token": "...", "profile": DIR,
//          "steps": [{"hash": "#/centers", "until": ["Centers (3)"], "screenshot": FILE}]}
//   A step with "open" instead of "hash" loads that address as it is (a link someone sent).
//   A step with "click" (a selector) clicks it once the page shows "until", and follows the tab
//   it opens: waits there for "popup_until", then runs "popup_eval" (an async function's
//   source) in it; the step's "popup" says where the tab went, its DOM and what that returned.
//   A step with "press" (a selector) fills "fill" ([[selector, text], ...]) once the page shows
//   "until", clicks it "press_times" times (1), and waits for "press_until": its "pressed".
//   An empty token: no sign-in (what a caller without one sees). "insecure": true takes a
//   certificate chromium does not know (the development CA's).
import puppeteer from "puppeteer-core";
import { readFileSync } from "node:fs";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const deadline = plan.deadline_ms ?? 15000;
const browser = await puppeteer.launch({
  executablePath: process.env.JC_CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  userDataDir: plan.profile,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
         // "insecure": a gateway serving the development CA's certificate, which chromium does not know
         ...(plan.insecure ? ["--ignore-certificate-errors"] : [])],
  defaultViewport: { width: 1400, height: 1000 },
});
const out = { signed_in: false, sign_in_error: "", steps: [], addresses: [], requests: [], console_errors: [] };
try {
  const page = await browser.newPage();
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame() && frame.url() !== "about:blank") out.addresses.push(frame.url());
  });
  page.on("request", (request) => out.requests.push(request.url()));
  page.on("pageerror", (error) => out.console_errors.push(`step ${out.steps.length}: ${error.stack || error}`));

  // Every expected text on the page, or the deadline.
  const waitFor = async (until) => {
    try {
      await page.waitForFunction(
        (texts) => texts.every((t) => document.documentElement.outerHTML.includes(t)),
        { timeout: deadline, polling: 100 },
        until,
      );
      return true;
    } catch (e) {
      return false;
    }
  };

  // Clicks `step.click` on the page, which opens a tab; waits there for `popup_until`, runs
  // `popup_eval` (the source of an async function) in it, and closes it.
  const clickToPopup = async (step) => {
    const opened = new Promise((resolve) => {
      const onTarget = async (target) => {
        if (target.type() !== "page") return;
        browser.off("targetcreated", onTarget);
        resolve(await target.page());
      };
      browser.on("targetcreated", onTarget);
    });
    await page.click(step.click);
    const tab = await Promise.race([opened, new Promise((resolve) => setTimeout(() => resolve(null), deadline))]);
    if (!tab) return { opened: false };
    tab.on("request", (request) => out.requests.push(request.url()));
    let reached = false;
    try {
      await tab.waitForFunction(
        (texts) => location.href !== "about:blank" && texts.every((t) => document.documentElement.outerHTML.includes(t)),
        { timeout: deadline, polling: 100 },
        step.popup_until ?? [],
      );
      reached = true;
    } catch (e) { /* dumped below */ }
    let evaluated = "";
    if (reached && step.popup_eval) {
      try {
        evaluated = String(await tab.evaluate(`(${step.popup_eval})()`));
      } catch (e) {
        evaluated = `error: ${e}`;
      }
    }
    const popup = { opened: true, reached, address: tab.url(), dom: await tab.content(), eval: evaluated };
    await tab.close();
    return popup;
  };

  if (plan.token) {
    await page.goto(plan.base, { waitUntil: "domcontentloaded" });
    await page.waitForSelector("#token", { visible: true, timeout: deadline });
    await page.type("#token", plan.token);
    await page.keyboard.press("Enter");
    out.signed_in = await waitFor(["signed in as "]);
    if (!out.signed_in) {
      out.sign_in_error = await page.$eval("#login-error", (e) => e.textContent).catch(() => "");
    }
  }
  for (const step of plan.steps) {
    const address = step.open ?? plan.base + step.hash;
    // Each page loaded afresh in the same tab (its session, and so the sign-in, stays): a
    // change of the address's fragment alone would keep the last page's DOM until the new
    // one renders, and the wait could read the old one.
    await page.goto("about:blank");
    await page.goto(address, { waitUntil: "domcontentloaded" });
    const reached = await waitFor(step.until ?? []);
    if (step.screenshot) await page.screenshot({ path: step.screenshot });
    const result = { reached, address: page.url(), dom: await page.content() };
    if (step.click && reached) result.popup = await clickToPopup(step);
    if (step.press && reached) {
      // As a person: fill the fields (a value set and an input event, as typing ends), then
      // press the button once and wait for what it should show.
      for (const [selector, text] of step.fill ?? []) {
        await page.$eval(selector, (el, value) => {
          el.value = value;
          el.dispatchEvent(new Event("input", { bubbles: true }));
        }, text);
      }
      for (let i = 0; i < (step.press_times ?? 1); i++) await page.click(step.press);
      const pressedReached = await waitFor(step.press_until ?? []);
      result.pressed = { reached: pressedReached, address: page.url(), dom: await page.content() };
    }
    out.steps.push(result);
  }
  out.addresses.push(page.url());
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
