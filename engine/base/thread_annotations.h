// SPDX-License-Identifier: Apache-2.0
// Lock requirements the compiler checks: clang's -Wthread-safety reads these
// attributes (scripts/check-locks.sh builds the engine with them, against
// libc++, whose std::mutex and std::lock_guard carry the matching capability
// attributes). Other compilers see nothing.
//
//   GUARDED_BY(m)      a field read or written only with m held
//   PT_GUARDED_BY(m)   what a pointer field points to, likewise
//   REQUIRES(m)        a function called with m held
//   EXCLUDES(m)        a function called without m (it takes m itself)
//   RETURN_CAPABILITY(m)  a function returning m (a lock taken through it is m)
//   ASSERT_HELD(m)     a statement: m is held here (a callback run under m)
#pragma once

// Abseil's headers (absl::btree_map, engine/space/block_range_set.h) define
// GUARDED_BY, PT_GUARDED_BY and ACQUIRED_BEFORE too: included first, so that
// the definitions below are the ones in force wherever this header is.
#include <absl/base/thread_annotations.h>
#undef GUARDED_BY
#undef PT_GUARDED_BY
#undef ACQUIRED_BEFORE

#if defined(__clang__)
#define MIMICFS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define MIMICFS_THREAD_ANNOTATION(x)
#endif

#define GUARDED_BY(x) MIMICFS_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) MIMICFS_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) MIMICFS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) MIMICFS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) MIMICFS_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define RETURN_CAPABILITY(x) MIMICFS_THREAD_ANNOTATION(lock_returned(x))

namespace mimicfs {

// Tells the analysis that `mutex` is held where it cannot see the lock taken
// (a callback called under it). No effect at run time.
template <typename Mutex>
inline void assert_held(const Mutex& mutex) MIMICFS_THREAD_ANNOTATION(assert_capability(mutex)) {
  (void)mutex;
}

}  // namespace mimicfs
