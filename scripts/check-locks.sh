#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the lock requirements written in the code (engine/base/thread_annotations.h:
# GUARDED_BY, REQUIRES, ...) with clang's -Wthread-safety: every engine and
# adapter source is compiled (syntax only) by clang against libc++, whose
# std::mutex and std::lock_guard carry the capability attributes the analysis
# follows. Any warning fails. Installs clang-16 and libc++-16 if missing.
#
#   scripts/check-locks.sh [FILE.cc...]   (default: every .cc of engine/, control/, host/, fusefs/, cli/)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh" --with clang-16 libc++-16-dev libc++abi-16-dev
cd "$root"
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(engine/*/*.cc control/*.cc host/*.cc fusefs/*.cc cli/*.cc)
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -I{} \
  clang++-16 -std=c++2b -stdlib=libc++ -fsyntax-only -D_LIBCPP_ENABLE_THREAD_SAFETY_ANNOTATIONS \
  -Wthread-safety -Werror=thread-safety -I. $(pkg-config --cflags fuse3) {}
echo "check-locks: ${#files[@]} files, no lock requirement broken"
