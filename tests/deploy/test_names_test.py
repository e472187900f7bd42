#!/usr/bin/env python3
"""[C1] Every Catch2 test name can be run by ctest: catch_discover_tests hands ctest each
name, and ctest splits a name at ';' into two that match no test (each then 'fails' in
0.01 s without running anything). And Catch2's console reporter can print the name: it
indents a name's later lines to just after its first ": ", and with that at its 78th to
80th column (of 79) it writes the name for ever when the test fails, as built here with
NDEBUG (a failing test once filled a 69 GB disk); a first ": " ending at columns 76 to 82
is refused. Reads every
TEST_CASE's name, literals joined.
    test_names_test.py ROOT"""
import glob
import re
import sys

root = sys.argv[1]
bad = []
late_colon = []
for path in glob.glob(f"{root}/tests/**/*.cc", recursive=True):
    text = open(path, encoding="utf-8", errors="replace").read()
    for m in re.finditer(r'TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', text):
        name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        if ";" in name:
            bad.append(f"{path}: {name}")
        # Escapes count as one character each, as Catch2 sees the name.
        shown = re.sub(r"\\.", "x", name)
        colon = shown.find(": ")
        if colon >= 0 and 76 <= colon + 2 <= 82:
            late_colon.append(f"{path}: {name}")
for b in bad:
    print(f"FAIL: a test name with ';' (ctest splits it): {b}")
for b in late_colon:
    print(f"FAIL: a test name whose first ': ' ends at column 76 to 82 (Catch2 prints it for ever when it fails): {b}")
print(f"ok: no test name holds ';' or a late ': '" if not bad and not late_colon
      else f"{len(bad)} test names hold ';', {len(late_colon)} a late ': '")
sys.exit(1 if bad or late_colon else 0)
