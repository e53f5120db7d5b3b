#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds mimicfs with sanitizers and runs the tests they check:
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer: unit and mount tests
#                (the mounted daemon is the instrumented binary too)
#   build-tsan/  ThreadSanitizer: the unit tests whose code runs on several threads
#                (tests/CMakeLists.txt's mimicfs_threaded_tests: the engine's stress
#                test and layers, the request buffers' release, the saved pages' runs)
# Any report fails the run. Usage: scripts/sanitize.sh [asan|tsan]... (default both)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(asan tsan)

# -O1 -g1, as the sanitizers' own documentation suggests: reports keep their
# file:line stacks, and the build takes about a third of -O2 -g's time (an
# instrumented volume_test.cc: 53 s against 157 s). Without -DNDEBUG, so the
# libraries' own assertions (nlohmann::json's among them) are checked too; and
# without GCC 12's -Wmaybe-uninitialized, which the instrumentation makes report
# std::regex's own members (false positives).
# Configured every run, so a build directory made with other flags takes these.
configure() {  # DIR SANITIZERS
  cmake -S "$root" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -Wno-maybe-uninitialized" \
    -DMIMICFS_SANITIZE="$2" >/dev/null
}

# A test binary's tests in one shard per CPU, side by side (gtest's sharding):
# instrumented unit tests take minutes on one core. Any shard's failure fails.
run_sharded() {  # BINARY
  local shards pids=() status=0
  shards=$(nproc)
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$1" --gtest_brief=1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  return "$status"
}

for kind in "${kinds[@]}"; do
  case "$kind" in
    asan)
      dir="$root/build-asan"
      configure "$dir" address,undefined
      cmake --build "$dir" --target mimicfs mimicfs-scenarios mimicfs_unit_tests mimicfs_mount_tests
      export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
      export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
      run_sharded "$dir/tests/mimicfs_unit_tests"
      "$dir/tests/mimicfs_mount_tests" --gtest_brief=1
      ;;
    tsan)
      dir="$root/build-tsan"
      configure "$dir" thread
      cmake --build "$dir" --target mimicfs_threaded_tests
      TSAN_OPTIONS=halt_on_error=1 "$dir/tests/mimicfs_threaded_tests" --gtest_brief=1
      ;;
    *)
      echo "sanitize.sh: unknown kind \"$kind\" (known: asan, tsan)" >&2
      exit 2
      ;;
  esac
done
