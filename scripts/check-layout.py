#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that the code follows the map at the top of docs/architecture.md.

The map is a table: a row per folder, what it owns, and which folders its
files may include ("may include"). A cell of the last column lists folders in
backticks (`engine/*` for every engine folder); a part after ";" may name
files, which alone may include that part's folders. The check fails when:
  - a folder with sources is not in the map, or a mapped folder is missing;
  - a file includes a project header from a folder its row does not allow;
  - a file outside fusefs/ includes a FUSE header.
Usage: scripts/check-layout.py [ROOT]   (exit 1 and a line per problem)
"""
import fnmatch
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
doc = open(os.path.join(root, "docs/architecture.md"), encoding="utf-8").read()
begin, end = doc.find("<!-- map -->"), doc.find("<!-- map end -->")
if begin < 0 or end < begin:
    sys.exit("check-layout: docs/architecture.md has no <!-- map --> ... <!-- map end --> table")

rules = {}  # folder -> [(folder patterns, files or None)]
for line in doc[begin:end].splitlines():
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    if len(cells) != 3 or not re.fullmatch(r"`[a-z_/]+/`", cells[0]):
        continue
    folder = cells[0].strip("`").rstrip("/")
    parts = []
    for part in cells[2].split(";"):
        names = re.findall(r"`([^`]+)`", part)
        files = [n for n in names if n.endswith((".cc", ".h"))]
        folders = [n.rstrip("/") for n in names if n not in files]
        parts.append((folders, files or None))
    rules[folder] = parts

problems = []
source_dirs = set()
for top in ("engine", "control", "host", "fusefs", "cli", "tools", "workloads"):
    for directory, _, names in os.walk(os.path.join(root, top)):
        if any(n.endswith((".cc", ".h")) for n in names):
            source_dirs.add(os.path.relpath(directory, root))
for folder in sorted(source_dirs - rules.keys()):
    problems.append(f"{folder}/: has sources but no row in the map")
for folder in sorted(rules.keys() - source_dirs):
    problems.append(f"{folder}/: in the map but has no sources")

include = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)
for folder in sorted(source_dirs & rules.keys()):
    for name in sorted(os.listdir(os.path.join(root, folder))):
        if not name.endswith((".cc", ".h")):
            continue
        path = f"{folder}/{name}"
        text = open(os.path.join(root, path), encoding="utf-8").read()
        for kind, header in include.findall(text):
            if kind == "<":
                if folder != "fusefs" and re.match(r"(fuse[0-9]*/|fuse[_.]|linux/fuse\.h)", header):
                    problems.append(f"{path}: includes <{header}>, and only fusefs/ may")
                continue
            target = os.path.dirname(header)
            if not target or target == folder or not os.path.exists(os.path.join(root, header)):
                continue
            allowed = any(
                any(fnmatch.fnmatchcase(target, pattern) for pattern in patterns)
                and (files is None or name in files)
                for patterns, files in rules[folder])
            if not allowed:
                problems.append(f"{path}: includes {header}, and {folder}/ may not include {target}/")

for problem in problems:
    print(f"check-layout: {problem}")
if problems:
    sys.exit(1)
print(f"check-layout: {len(rules)} folders, every include as the map allows")
