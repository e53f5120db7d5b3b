// SPDX-License-Identifier: Apache-2.0
// FaultInjector: rules that make chosen operations fail with an errno, stall, or
// cut the power before or after them (crash points).
//
// A rule selects operations by name and path glob and says what to inject and
// when, e.g. "op=fsync,path=/db/*,error=EIO,nth=3". The injector only decides:
// the caller returns the error or waits the latency. Randomness comes from a
// generator per rule seeded by the rule, so the same sequence of calls fires the
// same faults.
//
// Thread-safe: rules and their counters are guarded by one mutex. empty() is a
// relaxed atomic, so with no rules check() costs one load and takes no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <expected>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/thread_annotations.h"
#include "engine/durability/power_cut.h"
#include "engine/stats/stats.h"

namespace mimicfs {

class FaultInjector {
 public:
  // A power cut a rule asks for, before the operation runs or after it.
  enum class Crash : uint8_t { kNone, kBefore, kAfter };

  // What to do to one operation: no fault when all are unset.
  struct Fault {
    int error = 0;            // positive errno to return instead of running it
    uint64_t latency_ns = 0;  // extra time the operation takes
    Crash crash = Crash::kNone;
    bool server_restart = false;  // an NFS server's restart, before it
    PowerCut power_cut;  // with crash: how, and the rule and operation (its cause)
  };

  FaultInjector();
  ~FaultInjector();
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // Parses one rule and appends it after the others. A rule is comma-separated
  // key=value pairs in any order:
  //   op=NAME[|NAME...]       operations as op_name() spells them, or * (default *);
  //                           fsync also names fdatasync, datasync is fdatasync
  //   path=GLOB               fnmatch(3) pattern, flags 0 so * crosses '/', matched
  //                           against the path from the mount root (default *)
  //   error=ENAME             errno to return, as strerrorname_np spells it  } exactly
  //   latency=N(ns|us|ms|s)   extra latency                                   } one
  //   crash=before|after      a power cut before the operation runs (it    }
  //                           gets EIO) or after it completes              }
  //   server=restart          NFS profiles: the server restarts before the
  //                           operation (`ctl server restart`, its profile's grace)
  //   restart=now|ctl         crash= only: the volume comes back at once (default)
  //                           or stays off until `ctl restart`
  //   from=N(ns|us|ms|s)      only operations from this emulated time on
  //   writeback=P             crash= only: each unit (device.atomic_write_bytes) of
  //                           data overwritten in place since its sync is durable
  //                           with probability P (seed= seeds it): pages persist
  //                           out of order and may tear
  //   probability=P           fire with probability 0 < P <= 1, drawn from
  //   seed=N                    a generator seeded with N (default 0)
  //   nth=N                   fire on the Nth matching occurrence only
  //   every=N                 fire on every Nth matching occurrence
  //   count=N                 fire at most N times
  // At most one of probability, nth and every; with none, every match fires. A
  // crash or server rule fires once unless count= is given.
  // On error returns `fault rule "TEXT": KEY: what is wrong` and adds nothing.
  std::expected<void, std::string> add(std::string_view rule_text);

  // The power cut a crash rule would make (`ctl crash`'s options are a crash
  // rule's keys), or the parser's error; nothing fires, nothing is logged.
  static std::expected<PowerCut, std::string> power_cut_of(std::string_view rule_text);

  // Forgets every rule and its counters.
  void clear();

  // Evaluates the rules in order against one operation on `path` ("/dir/file").
  // Each rule that selects it counts a match and may fire. The first firing error
  // rule sets `error`; a later error rule that would fire is shadowed (its match
  // counts, it does not fire). The latencies of all firing rules add up. Each firing
  // is logged with spdlog::warn. A rule added while check() runs on another
  // thread may not apply to that call.
  // `now_ns`: the emulated time, for from=.
  [[nodiscard]] Fault check(Op op, std::string_view path, uint64_t now_ns = 0);

  // True when no rule is set.
  bool empty() const { return empty_.load(std::memory_order_relaxed); }

  // [{"rule": text, "matched": n, "fired": n}, ...] in rule order.
  nlohmann::json to_json() const;

  // Firings of all current rules.
  uint64_t fired_total() const;

 private:
  struct Rule;  // defined in fault_injector.cc

  mutable std::mutex mutex_;
  std::vector<Rule> rules_ GUARDED_BY(mutex_);
  std::atomic<bool> empty_{true};  // written under mutex_, read without it
};

}  // namespace mimicfs
