#!/usr/bin/env python3
"""Every Grafana dashboard under a directory, checked as Grafana would use it, against a real
Prometheus (issue 49 item 10; there is no Grafana in Debian 12 to load them into).

  dashboard_queries.py PROMETHEUS_URL DASHBOARD_DIR [--wait SECONDS]

For each *.json: the dashboard is well formed (uid, title, schemaVersion, panels with ids,
grid positions inside the 24 columns and targets with a refId and an expr; rows' own panels
included; templating variables defined once and every $variable an expr names defined).
Each query variable (label_values(...)) is asked of Prometheus and must have values; every
panel's expr, with each variable set to "All" where it has it, else the first of its values (as Grafana writes a value
into PromQL: regex-escaped for a multi-value variable) and $__rate_interval, $__interval and
$__range as Grafana's defaults for a 15 s scrape (1m, 15s, 1h), is evaluated with
/api/v1/query and /api/v1/query_range: each must
answer status "success" (an error fails at once). Every panel must also return data in each
of its targets, except those listed in MAY_BE_EMPTY below, with the reason why; the checker
asks again until --wait seconds have passed (rates need two scrapes).
Exit status 0 when all hold, 1 otherwise, naming each dashboard, panel and expr that failed.
"""
import glob
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# Panels that may answer nothing in the test command's run (tests/deploy/prometheus_test.sh:
# one demo center, jobs in one project with a budget, a job running), and why. A title here
# that no dashboard has is an error: the list follows the dashboards.
MAY_BE_EMPTY = {
    "jointcloud-federation": {
        "Replica moves and withdrawals (SPEC A16)":
            "no replica waits at a center past --move_after in the test, so none is withdrawn or moved",
        "Adapters refused":
            "the demo center's adapter is never refused (no center key is required of it)",
        "Adapter events the job manager ignored":
            "only late events of ended jobs and other control planes' or centers' replicas are ignored: "
            "usually none in the test",
    },
    "jointcloud-nexec": {
        "Preemptions, backfills and elastic resizes":
            "the demo center's master has one queue, no reservations and no elastic jobs: nothing is "
            "preempted, backfilled or resized",
        "Limits: held and in force": "the demo center's master runs without --config: no limits",
        "Fair share: dynamic priority": "the demo center's master runs without --config: no fair-share tree",
        "Virtual clusters: held and guaranteed": "the demo center's master runs without --config: no virtual clusters",
    },
}

# Grafana's built-in variables, as it sets them for a Prometheus data source scraped every
# 15 s and a dashboard showing the last hour.
BUILTINS = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__interval_ms": "15000",
    "__range": "1h",
    "__range_s": "3600",
    "__range_ms": "3600000",
}
VAR_RE = re.compile(r"\$\{([A-Za-z0-9_]+)(?::[A-Za-z]+)?\}|\[\[([A-Za-z0-9_]+)(?::[A-Za-z]+)?\]\]|\$([A-Za-z0-9_]+)")


class Prometheus:
    def __init__(self, url):
        self.url = url.rstrip("/")

    def get(self, path, params):
        url = f"{self.url}{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # 400 and 422 carry the error as JSON
            try:
                return json.load(e)
            except ValueError:
                return {"status": "error", "error": f"HTTP {e.code}"}

    def query(self, expr):
        return self.get("/api/v1/query", {"query": expr})

    def query_range(self, expr):
        now = time.time()
        return self.get("/api/v1/query_range", {"query": expr, "start": now - 600, "end": now, "step": "15"})


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels") or [])


def names_in(text):
    return {a or b or c for a, b, c in VAR_RE.findall(text)}


def grafana_regex_escape(value):
    # Grafana's prometheusSpecialRegexEscape: a value inside a PromQL regex string.
    value = value.replace("\\", "\\\\\\\\")
    return re.sub(r"([$^*{}\[\]'+?.()|])", r"\\\\\1", value)


def substitute(text, values):
    def one(m):
        name = m.group(1) or m.group(2) or m.group(3)
        return values.get(name, m.group(0))
    return VAR_RE.sub(one, text)


def check_structure(path, d, errors):
    where = os.path.basename(path)
    for key in ("uid", "title"):
        if not isinstance(d.get(key), str) or not d.get(key):
            errors.append(f"{where}: no {key}")
    if len(d.get("uid", "")) > 40:
        errors.append(f"{where}: uid {d['uid']!r} is longer than Grafana's 40 characters")
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 30:
        errors.append(f"{where}: schemaVersion {d.get('schemaVersion')!r} is not a Grafana 8+ dashboard's")
    if not isinstance(d.get("panels"), list) or not d["panels"]:
        errors.append(f"{where}: no panels")
        return
    ids = set()
    for p in walk_panels(d["panels"]):
        title = p.get("title", "?")
        if not isinstance(p.get("id"), int) or p["id"] in ids:
            errors.append(f"{where}: panel {title!r} has no id of its own ({p.get('id')!r})")
        ids.add(p.get("id"))
        if not isinstance(p.get("type"), str):
            errors.append(f"{where}: panel {title!r} has no type")
        g = p.get("gridPos") or {}
        if not all(isinstance(g.get(k), int) for k in ("x", "y", "w", "h")) or g["x"] + g["w"] > 24 or g["w"] <= 0:
            errors.append(f"{where}: panel {title!r} has a grid position outside Grafana's 24 columns: {g}")
        if p.get("type") == "row":
            continue
        targets = p.get("targets")
        if not isinstance(targets, list) or not targets:
            errors.append(f"{where}: panel {title!r} has no targets")
            continue
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or not all(refs):
            errors.append(f"{where}: panel {title!r}: refIds {refs} are not distinct")
        for t in targets:
            if not isinstance(t.get("expr"), str) or not t["expr"].strip():
                errors.append(f"{where}: panel {title!r} target {t.get('refId')}: no expr")
    variables = [v.get("name") for v in d.get("templating", {}).get("list", [])]
    if len(set(variables)) != len(variables):
        errors.append(f"{where}: templating variables {variables} are not distinct")


def resolve_variables(prom, path, d, errors):
    """Each variable set to a real value: the first Prometheus has for it, written as Grafana
    writes it into an expr. Datasource variables are the data source and appear in no expr."""
    where = os.path.basename(path)
    values = dict(BUILTINS)
    for v in d.get("templating", {}).get("list", []):
        name, kind = v.get("name"), v.get("type")
        if kind == "datasource":
            values[name] = "Prometheus"
            continue
        if kind == "constant" or kind == "custom" or kind == "textbox":
            options = [o.strip() for o in str(v.get("query", "")).split(",") if o.strip()]
            found = options or [str(v.get("current", {}).get("value", ""))]
        elif kind == "interval":
            found = [o.strip() for o in str(v.get("query", "")).split(",") if o.strip()][:1]
        elif kind == "query":
            q = v.get("query")
            q = q.get("query", "") if isinstance(q, dict) else (q or v.get("definition", ""))
            q = substitute(q, values)
            m = re.fullmatch(r"\s*label_values\(\s*(?:(.+?)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", q)
            if not m:
                errors.append(f"{where}: variable {name}: {q!r} is not a label_values(...) query this check can ask")
                continue
            selector, label = m.group(1), m.group(2)
            if selector:
                answer = prom.get("/api/v1/series", {"match[]": selector})
                found = sorted({s[label] for s in answer.get("data") or [] if label in s})
            else:
                answer = prom.get(f"/api/v1/label/{label}/values", {})
                found = sorted(answer.get("data") or [])
            if answer.get("status") != "success":
                errors.append(f"{where}: variable {name}: {q!r}: {answer.get('error')}")
                continue
        else:
            errors.append(f"{where}: variable {name} is of type {kind!r}, which this check does not know")
            continue
        if not found:
            errors.append(f"{where}: variable {name} has no values in Prometheus ({v.get('definition') or v.get('query')})")
            continue
        if v.get("includeAll"):
            # "All", as the dashboards open: a panel's data may be at any of the values (the
            # running task at node2 while node1 came first: the check failed on a busy run).
            values[name] = v.get("allValue") or "(" + "|".join(grafana_regex_escape(f) for f in found) + ")"
        elif v.get("multi"):
            values[name] = grafana_regex_escape(found[0])
        else:
            values[name] = found[0]
    return values


def main():
    args = sys.argv[1:]
    wait = 60.0
    if "--wait" in args:
        i = args.index("--wait")
        wait = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    prom, directory = Prometheus(args[0]), args[1]
    files = sorted(glob.glob(os.path.join(directory, "*.json")))
    if not files:
        print(f"FAIL: no dashboards in {directory}")
        return 1
    errors = []
    queries = []  # (dashboard uid, file, panel title, refId, expr)
    uids = {}
    for path in files:
        try:
            with open(path) as f:
                d = json.load(f)
        except ValueError as e:
            errors.append(f"{os.path.basename(path)}: not JSON: {e}")
            continue
        check_structure(path, d, errors)
        if d.get("uid") in uids:
            errors.append(f"{os.path.basename(path)}: uid {d['uid']!r} is also {uids[d['uid']]}'s")
        uids[d.get("uid")] = os.path.basename(path)
        defined = {v.get("name") for v in d.get("templating", {}).get("list", [])} | set(BUILTINS)
        values = resolve_variables(prom, path, d, errors)
        chosen = [f"{v['name']}={values[v['name']]}" for v in d.get("templating", {}).get("list", [])
                  if v.get("type") != "datasource" and v.get("name") in values]
        if chosen:
            print(f"{os.path.basename(path)}: variables {', '.join(chosen)}")
        titles = set()
        for p in walk_panels(d.get("panels") or []):
            if p.get("type") == "row":
                continue
            titles.add(p.get("title"))
            for t in p.get("targets") or []:
                expr = t.get("expr") or ""
                for name in names_in(expr) - defined:
                    errors.append(f"{os.path.basename(path)}: panel {p.get('title')!r}: ${name} is no variable of the dashboard")
                queries.append((d.get("uid"), os.path.basename(path), p.get("title"), t.get("refId"), substitute(expr, values)))
        for title in MAY_BE_EMPTY.get(d.get("uid"), {}):
            if title not in titles:
                errors.append(f"{os.path.basename(path)}: MAY_BE_EMPTY names panel {title!r}, which the dashboard does not have")
    for uid in MAY_BE_EMPTY:
        if uid not in uids:
            errors.append(f"MAY_BE_EMPTY names dashboard {uid!r}, which {directory} does not have")
    if errors:
        for e in errors:
            print(f"FAIL: {e}")
        return 1

    # Every query is asked; an error fails at once, an empty answer is asked again until it
    # has data or --wait has passed.
    deadline = time.time() + wait
    pending = list(queries)
    empty_allowed = []
    while True:
        still_empty = []
        for q in pending:
            uid, fname, title, ref, expr = q
            if "$" in expr:
                errors.append(f"{fname}: panel {title!r} {ref}: a variable is left in {expr!r}")
                continue
            instant = prom.query(expr)
            for kind, answer in (("query", instant), ("query_range", prom.query_range(expr))):
                if answer.get("status") != "success":
                    errors.append(f"{fname}: panel {title!r} {ref}: /api/v1/{kind} of {expr!r} answered "
                                  f"{answer.get('errorType')}: {answer.get('error')}")
            result = (instant.get("data") or {}).get("result")
            if not result:
                if title in MAY_BE_EMPTY.get(uid, {}):
                    empty_allowed.append(q)
                else:
                    still_empty.append(q)
        if errors:
            for e in errors:
                print(f"FAIL: {e}")
            return 1
        if not still_empty or time.time() >= deadline:
            break
        pending = still_empty
        time.sleep(1)
    if still_empty:
        for uid, fname, title, ref, expr in still_empty:
            print(f"FAIL: {fname}: panel {title!r} {ref} returned no data: {expr}")
        return 1
    panels = {(q[0], q[2]) for q in queries}
    allowed = sorted({(q[1], q[2]) for q in empty_allowed})
    for fname, title in allowed:
        uid = next(q[0] for q in queries if q[1] == fname and q[2] == title)
        print(f"ok (allowed empty): {fname}: {title!r}: {MAY_BE_EMPTY[uid][title]}")
    print(f"ok: {len(files)} dashboards, {len(panels)} panels, {len(queries)} queries: every one evaluated "
          f"without error, all but {len(allowed)} panels (allowed, above) with data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
