#!/usr/bin/env python3
"""[C1] Every Catch2 test name can be run by ctest: catch_discover_tests hands ctest each
name, and ctest splits a name at ';' into two that match no test (each then 'fails' in
0.01 s without running anything). Reads every TEST_CASE's name, literals joined.
    test_names_test.py ROOT"""
import glob
import re
import sys

root = sys.argv[1]
bad = []
for path in glob.glob(f"{root}/tests/**/*.cc", recursive=True):
    text = open(path, encoding="utf-8", errors="replace").read()
    for m in re.finditer(r'TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', text):
        name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        if ";" in name:
            bad.append(f"{path}: {name}")
for b in bad:
    print(f"FAIL: a test name with ';' (ctest splits it): {b}")
print(f"ok: no test name holds ';'" if not bad else f"{len(bad)} test names hold ';'")
sys.exit(1 if bad else 0)
