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

problems = []
rules = {}  # folder -> [(folder patterns, files or None)]
for line in doc[begin:end].splitlines():
    if not line.startswith("|") or re.fullmatch(r"\|[-| ]+\|", line.strip()):
        continue
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    row = re.fullmatch(r"`([^`]+)/`", cells[0]) if len(cells) == 3 else None
    if not row:
        if cells[0] != "folder":
            problems.append(f"docs/architecture.md: a map row it cannot read: {line.strip()}")
        continue
    folder = row.group(1)
    if folder in rules:
        problems.append(f"{folder}/: two rows in the map")
    parts = []
    for part in cells[2].split(";"):
        names = re.findall(r"`([^`]+)`", part)
        files = [n for n in names if n.endswith((".cc", ".h"))]
        folders = [n.rstrip("/") for n in names if n not in files]
        parts.append((folders, files or None))
    rules[folder] = parts

# Every folder with sources, but those of the tests, the build and the tools
# around the code, which may include anything.
NOT_MAPPED = {"tests", "python", "docs", "scripts", "cmake"}
source_dirs = set()
for top in sorted(os.listdir(root)):
    if top.startswith((".", "build")) or top in NOT_MAPPED or not os.path.isdir(os.path.join(root, top)):
        continue
    for directory, _, names in os.walk(os.path.join(root, top)):
        if any(n.endswith((".cc", ".h", ".cc.in")) for n in names):
            source_dirs.add(os.path.relpath(directory, root))
for folder in sorted(source_dirs - rules.keys()):
    problems.append(f"{folder}/: has sources but no row in the map")
for folder in sorted(rules.keys() - source_dirs):
    problems.append(f"{folder}/: in the map but has no sources")

include = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)
fuse_header = re.compile(r"(.*/)?(fuse[0-9]*/.*|fuse_[a-z_]*\.h|fuse\.h|cuse_lowlevel\.h)$")
for folder in sorted(source_dirs & rules.keys()):
    for name in sorted(os.listdir(os.path.join(root, folder))):
        if not name.endswith((".cc", ".h", ".cc.in")):
            continue
        path = f"{folder}/{name}"
        text = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
        for kind, header in include.findall(text):
            if folder != "fusefs" and fuse_header.match(header) and not header.startswith("fusefs/"):
                problems.append(f"{path}: includes {header}, a FUSE header, and only fusefs/ may")
                continue
            # A project header, however written: from the root, or relative.
            relative = os.path.normpath(os.path.join(folder, header))
            if os.path.isfile(os.path.join(root, relative)) and not os.path.isfile(os.path.join(root, header)):
                header = relative
            if not os.path.isfile(os.path.join(root, header)):
                continue
            target = os.path.dirname(os.path.normpath(header))
            if not target or target == folder:
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
