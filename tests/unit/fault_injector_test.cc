// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/fault_injector.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace mimicfs {
namespace {

// Captures what spdlog's default logger writes, and keeps it off the console.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    sink->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("fault_injector_test", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

void add_ok(FaultInjector& faults, std::string_view rule) {
  auto added = faults.add(rule);
  ASSERT_TRUE(added.has_value()) << added.error();
}

int error_of(FaultInjector& faults, Op op, std::string_view path) {
  return faults.check(op, path).error;
}

// The indices (1-based) of the calls that failed among `calls` writes to `path`.
std::vector<int> failing_writes(FaultInjector& faults, int calls, std::string_view path = "/f") {
  std::vector<int> failed;
  for (int i = 1; i <= calls; ++i) {
    if (faults.check(Op::kWrite, path).error != 0) failed.push_back(i);
  }
  return failed;
}

// --- parsing

TEST(FaultInjector, AddAcceptsEachKey) {
  for (std::string_view rule : {
           "error=EIO",
           "op=write,error=EIO",
           "op=*,error=EIO",
           "op=write|fsync|punch,error=EIO",
           "path=/db/*.ibd,error=EIO",
           "op=fsync,error=ENOSPC",
           "op=read,latency=50ms",
           "error=EIO,probability=0.01",
           "op=write,path=/db/*.ibd,error=EIO,probability=0.01,seed=42",
           "seed=42,probability=1,error=EIO",
           "op=fsync,error=ENOSPC,nth=3",
           "op=write,error=EIO,every=10",
           "error=EIO,count=2",
           "error=EIO,every=2,count=5",
       }) {
    FaultInjector faults;
    auto added = faults.add(rule);
    EXPECT_TRUE(added.has_value()) << rule << ": " << added.error();
  }
}

TEST(FaultInjector, WhitespaceAroundItemsIsIgnored) {
  FaultInjector faults;
  add_ok(faults, " op = write | fsync , error = EIO , nth = 2 ");
  EXPECT_EQ(error_of(faults, Op::kFsync, "/f"), 0);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/f"), EIO);
}

// The exact one-line form a user sees on the command line.
TEST(FaultInjector, UnknownOperationErrorQuotesRuleKeyAndValue) {
  FaultInjector faults;
  auto added = faults.add("op=wrte,error=EIO");
  ASSERT_FALSE(added.has_value());
  EXPECT_EQ(added.error(), R"(fault rule "op=wrte,error=EIO": op: )"
                           R"(unknown operation "wrte" (did you mean write?))");
  auto far = faults.add("op=sync,error=EIO");
  ASSERT_FALSE(far.has_value());
  EXPECT_EQ(far.error(), R"(fault rule "op=sync,error=EIO": op: )"
                         R"(unknown operation "sync" (did you mean fsync?))");
  auto nothing_near = faults.add("op=compress,error=EIO");
  ASSERT_FALSE(nothing_near.has_value());
  EXPECT_EQ(nothing_near.error(),
            R"(fault rule "op=compress,error=EIO": op: unknown operation "compress")");
}

TEST(FaultInjector, MalformedRulesNameTheKey) {
  struct Case {
    std::string_view rule;
    std::string_view key;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"", "rule"},
           {"error=EIO,,op=write", "rule"},
           {"error=EIO,", "rule"},
           {"error", "error"},
           {"colour=red,error=EIO", "colour"},
           {"op=wrte,error=EIO", "op"},
           {"op=write|,error=EIO", "op"},
           {"op=Write,error=EIO", "op"},
           {"op=write,op=read,error=EIO", "op"},
           {"op=,error=EIO", "op"},
           {"path=db/*.ibd,error=EIO", "path"},
           {"op=write", "error"},
           {"error=EIO,latency=5ms", "error"},
           {"error=EIOX", "error"},
           {"error=eio", "error"},
           {"error=5", "error"},
           {"latency=50", "latency"},
           {"latency=ms", "latency"},
           {"latency=5m", "latency"},
           {"latency=1.5ms", "latency"},
           {"latency=0ms", "latency"},
           {"latency=99999999999999999999s", "latency"},
           {"latency=18446744073709551615s", "latency"},
           {"error=EIO,probability=0", "probability"},
           {"error=EIO,probability=1.5", "probability"},
           {"error=EIO,probability=-0.5", "probability"},
           {"error=EIO,probability=nan", "probability"},
           {"error=EIO,probability=0.5x", "probability"},
           {"error=EIO,probability=0.5,seed=x", "seed"},
           {"error=EIO,probability=0.5,seed=-1", "seed"},
           {"error=EIO,seed=1", "seed"},
           {"error=EIO,nth=0", "nth"},
           {"error=EIO,nth=-1", "nth"},
           {"error=EIO,nth=3x", "nth"},
           {"error=EIO,every=0", "every"},
           {"error=EIO,count=0", "count"},
           {"error=EIO,count=two", "count"},
           {"error=EIO,nth=3,probability=0.5", "probability"},
           {"error=EIO,every=2,probability=0.5", "probability"},
           {"error=EIO,nth=3,every=2", "nth"},
           {"error=EIO,nth=3,nth=4", "nth"},
           {"crash=now", "crash"},
           {"crash=after,error=EIO", "error"},
           {"crash=after,latency=1ms", "latency"},
           {"restart=ctl,error=EIO", "restart"},
           {"crash=after,restart=later", "restart"},
           {"crash=after,from=5", "from"},
           {"crash=after,from=0s", "from"},
           {"error=EIO,writeback=0.5", "writeback"},
           {"crash=after,writeback=0", "writeback"},
           {"crash=after,writeback=2", "writeback"},
       }) {
    FaultInjector faults;
    auto added = faults.add(c.rule);
    ASSERT_FALSE(added.has_value()) << c.rule;
    EXPECT_EQ(added.error().rfind(fmt::format("fault rule \"{}\": {}: ", c.rule, c.key), 0), 0u)
        << added.error();
    EXPECT_EQ(added.error().find('\n'), std::string::npos) << added.error();
    EXPECT_TRUE(faults.empty()) << c.rule;
  }
}

TEST(FaultInjector, FailedAddChangesNothing) {
  FaultInjector faults;
  add_ok(faults, "op=write,error=EIO");
  EXPECT_FALSE(faults.add("op=write,error=EIO,nth=0").has_value());
  EXPECT_EQ(faults.to_json().size(), 1u);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/f"), EIO);
}

// The name table is glibc's, not a list of our own.
TEST(FaultInjector, AcceptsAnyErrnoNameGlibcKnows) {
  const std::pair<std::string_view, int> kNames[] = {
      {"EIO", EIO},
      {"ENOSPC", ENOSPC},
      {"EDQUOT", EDQUOT},
      {"ESTALE", ESTALE},
      {"EINTR", EINTR},
      {"EAGAIN", EAGAIN},
      {"EROFS", EROFS},
      {"EFBIG", EFBIG},
      {"ETIMEDOUT", ETIMEDOUT},
      {"EOPNOTSUPP", EOPNOTSUPP},
      {"EHWPOISON", EHWPOISON},
  };
  for (const auto& [name, value] : kNames) {
    FaultInjector faults;
    add_ok(faults, fmt::format("error={}", name));
    EXPECT_EQ(error_of(faults, Op::kWrite, "/f"), value) << name;
  }
}

// --- selection

// fnmatch without FNM_PATHNAME: "/db/*.ibd" covers the whole tree under /db.
TEST(FaultInjector, PathGlobStarCrossesSlash) {
  FaultInjector faults;
  add_ok(faults, "path=/db/*.ibd,error=EIO");
  EXPECT_EQ(error_of(faults, Op::kWrite, "/db/t1.ibd"), EIO);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/db/schema/t1.ibd"), EIO);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/db/t1.frm"), 0);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/log/t1.ibd"), 0);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/db"), 0);
}

TEST(FaultInjector, PathGlobClassesAndQuestionMark) {
  FaultInjector faults;
  add_ok(faults, "path=/log/ib_logfile[0-9]?,error=EIO");
  EXPECT_EQ(error_of(faults, Op::kWrite, "/log/ib_logfile01"), EIO);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/log/ib_logfile0"), 0);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/log/ib_logfilex1"), 0);
}

TEST(FaultInjector, DefaultsSelectEveryOpAndPath) {
  FaultInjector faults;
  add_ok(faults, "error=EIO");
  for (size_t i = 0; i < static_cast<size_t>(Op::kCount); ++i) {
    EXPECT_EQ(error_of(faults, static_cast<Op>(i), "/any/where"), EIO) << op_name(Op(i));
  }
  EXPECT_EQ(error_of(faults, Op::kGetattr, "/"), EIO);
}

TEST(FaultInjector, OpListSelectsEachListedOp) {
  FaultInjector faults;
  add_ok(faults, "op=write|fsync,error=EIO");
  EXPECT_EQ(error_of(faults, Op::kWrite, "/f"), EIO);
  EXPECT_EQ(error_of(faults, Op::kFsync, "/f"), EIO);
  EXPECT_EQ(error_of(faults, Op::kRead, "/f"), 0);
  EXPECT_EQ(error_of(faults, Op::kFlush, "/f"), 0);
  EXPECT_EQ(error_of(faults, Op::kPunch, "/f"), 0);
}

// fsync(2)'s man page covers both calls, and so does "fsync" in a rule; the
// other name picks fdatasync alone, as stats.json counts it.
TEST(FaultInjector, FsyncNamesBothSyncsAndFdatasyncOnlyItself) {
  FaultInjector both;
  add_ok(both, "op=fsync,error=EIO");
  EXPECT_EQ(error_of(both, Op::kFsync, "/f"), EIO);
  EXPECT_EQ(error_of(both, Op::kFdatasync, "/f"), EIO);
  for (std::string_view rule : {"op=fdatasync,error=EIO", "op=datasync,error=EIO"}) {
    FaultInjector data;
    add_ok(data, rule);
    EXPECT_EQ(error_of(data, Op::kFdatasync, "/f"), EIO) << rule;
    EXPECT_EQ(error_of(data, Op::kFsync, "/f"), 0) << rule;
    EXPECT_EQ(error_of(data, Op::kWrite, "/f"), 0) << rule;
  }
}

// --- triggers

// Only matching operations count towards nth: reads and other paths do not.
TEST(FaultInjector, NthFiresOnceOnTheNthMatch) {
  FaultInjector faults;
  add_ok(faults, "op=write,path=/db/*,error=EIO,nth=3");
  EXPECT_EQ(error_of(faults, Op::kWrite, "/db/a"), 0);
  EXPECT_EQ(error_of(faults, Op::kRead, "/db/a"), 0);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/log/a"), 0);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/db/b"), 0);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/db/c"), EIO);
  EXPECT_EQ(failing_writes(faults, 20, "/db/a"), std::vector<int>{});
  EXPECT_EQ(faults.fired_total(), 1u);
}

TEST(FaultInjector, EveryFiresOnEachMultiple) {
  FaultInjector faults;
  add_ok(faults, "op=write,error=EIO,every=10");
  EXPECT_EQ(failing_writes(faults, 35), (std::vector<int>{10, 20, 30}));
}

TEST(FaultInjector, CountStopsAfterNFirings) {
  FaultInjector faults;
  add_ok(faults, "op=write,error=ENOSPC,count=2");
  EXPECT_EQ(failing_writes(faults, 5), (std::vector<int>{1, 2}));
  add_ok(faults, "op=write,error=EIO,every=2,count=3");
  EXPECT_EQ(failing_writes(faults, 10), (std::vector<int>{2, 4, 6}));
}

// The same rule text gives the same firings, whatever injector runs it.
TEST(FaultInjector, ProbabilityWithSeedIsReproducible) {
  LogCapture quiet;
  FaultInjector first, second, other_seed;
  add_ok(first, "op=write,error=EIO,probability=0.3,seed=42");
  add_ok(second, "op=write,error=EIO,probability=0.3,seed=42");
  add_ok(other_seed, "op=write,error=EIO,probability=0.3,seed=43");
  const std::vector<int> fired = failing_writes(first, 200);
  EXPECT_FALSE(fired.empty());
  EXPECT_EQ(failing_writes(second, 200), fired);
  EXPECT_NE(failing_writes(other_seed, 200), fired);
}

// Without seed= the seed is 0, not the time.
TEST(FaultInjector, ProbabilityDefaultSeedIsZero) {
  LogCapture quiet;
  FaultInjector unseeded, seeded_zero;
  add_ok(unseeded, "error=EIO,probability=0.5");
  add_ok(seeded_zero, "error=EIO,probability=0.5,seed=0");
  EXPECT_EQ(failing_writes(unseeded, 100), failing_writes(seeded_zero, 100));
}

// Seeded, so exact; the bound (about 4 standard deviations) is what the test
// promises should the generator ever change.
TEST(FaultInjector, ProbabilityFiresRoughlyP) {
  LogCapture quiet;
  for (uint64_t seed : {0, 1, 42}) {
    FaultInjector faults;
    add_ok(faults, fmt::format("op=write,error=EIO,probability=0.1,seed={}", seed));
    const size_t fired = failing_writes(faults, 1000).size();
    EXPECT_GE(fired, 60u) << "seed " << seed;
    EXPECT_LE(fired, 140u) << "seed " << seed;
    EXPECT_EQ(faults.to_json()[0]["matched"], 1000u);
  }
}

TEST(FaultInjector, ProbabilityOneFiresEveryTime) {
  LogCapture quiet;
  FaultInjector faults;
  add_ok(faults, "op=write,error=EIO,probability=1");
  EXPECT_EQ(failing_writes(faults, 100).size(), 100u);
}

// --- effects

// A crash point: the power goes once, before or after the chosen operation.
TEST(FaultInjector, ACrashRuleFiresOnceAtItsPoint) {
  LogCapture quiet;
  FaultInjector faults;
  add_ok(faults, "op=fsync,path=/db/*.wal,nth=2,crash=after");
  EXPECT_EQ(faults.check(Op::kFsync, "/db/1.wal").crash, FaultInjector::Crash::kNone);
  EXPECT_EQ(faults.check(Op::kFsync, "/db/t.ibd").crash, FaultInjector::Crash::kNone);
  const FaultInjector::Fault fault = faults.check(Op::kFsync, "/db/1.wal");
  EXPECT_EQ(fault.crash, FaultInjector::Crash::kAfter);
  EXPECT_FALSE(fault.power_cut.hold);
  EXPECT_EQ(fault.error, 0);
  EXPECT_NE(fault.power_cut.cause.find("fsync /db/1.wal (after it)"), std::string::npos)
      << fault.power_cut.cause;

  FaultInjector every;
  add_ok(every, "op=write,crash=before,restart=ctl");
  EXPECT_EQ(every.check(Op::kWrite, "/f").crash, FaultInjector::Crash::kBefore);
  EXPECT_TRUE(every.check(Op::kWrite, "/f").crash == FaultInjector::Crash::kNone)
      << "a power cut happens once";
  FaultInjector twice;
  add_ok(twice, "op=write,crash=before,count=2");
  (void)twice.check(Op::kWrite, "/f");
  EXPECT_EQ(twice.check(Op::kWrite, "/f").crash, FaultInjector::Crash::kBefore);
}

TEST(FaultInjector, ACrashRuleCarriesItsWriteback) {
  LogCapture quiet;
  FaultInjector faults;
  add_ok(faults, "op=fsync,crash=before,writeback=0.25,seed=9,restart=ctl");
  const FaultInjector::Fault fault = faults.check(Op::kFsync, "/f");
  EXPECT_EQ(fault.power_cut.writeback, 0.25);
  EXPECT_EQ(fault.power_cut.seed, 9u);
  EXPECT_TRUE(fault.power_cut.hold);
  EXPECT_FALSE(fault.power_cut.freeze);

  FaultInjector frozen;
  add_ok(frozen, "op=fsync,crash=after,restart=freeze");
  const FaultInjector::Fault cut = frozen.check(Op::kFsync, "/f");
  EXPECT_TRUE(cut.power_cut.hold);
  EXPECT_TRUE(cut.power_cut.freeze);
}

TEST(FaultInjector, FromWaitsForTheEmulatedClock) {
  LogCapture quiet;
  FaultInjector faults;
  add_ok(faults, "op=write,from=2s,crash=before");
  EXPECT_EQ(faults.check(Op::kWrite, "/f", 1'999'999'999).crash, FaultInjector::Crash::kNone);
  EXPECT_EQ(faults.check(Op::kWrite, "/f", 2'000'000'000).crash, FaultInjector::Crash::kBefore);
  EXPECT_EQ(faults.to_json()[0]["matched"], 1) << "before its time nothing is matched";
}

TEST(FaultInjector, LatencyUnits) {
  const std::pair<std::string_view, uint64_t> kLatencies[] = {
      {"7ns", 7}, {"7us", 7'000}, {"7ms", 7'000'000}, {"7s", 7'000'000'000}};
  for (const auto& [text, ns] : kLatencies) {
    FaultInjector faults;
    add_ok(faults, fmt::format("op=read,path=/log/*,latency={}", text));
    const FaultInjector::Fault fault = faults.check(Op::kRead, "/log/x");
    EXPECT_EQ(fault.latency_ns, ns) << text;
    EXPECT_EQ(fault.error, 0) << text;
    EXPECT_EQ(faults.check(Op::kRead, "/db/x").latency_ns, 0u) << text;
  }
}

TEST(FaultInjector, FirstErrorWinsAndLatenciesAdd) {
  FaultInjector faults;
  add_ok(faults, "op=write,latency=1ms");
  add_ok(faults, "op=write,error=ENOSPC");
  add_ok(faults, "op=write,latency=2us");
  add_ok(faults, "op=write,error=EIO");
  const FaultInjector::Fault fault = faults.check(Op::kWrite, "/f");
  EXPECT_EQ(fault.error, ENOSPC);
  EXPECT_EQ(fault.latency_ns, 1'002'000u);
}

// A later error rule that would fire is shadowed: its match counts (so nth and
// the random sequence stay its own), but it injected nothing, so it did not fire.
TEST(FaultInjector, ShadowedErrorRuleCountsTheMatchButDoesNotFire) {
  FaultInjector faults;
  add_ok(faults, "op=write,error=ENOSPC,nth=1");
  add_ok(faults, "op=write,error=EIO,count=1");
  EXPECT_EQ(error_of(faults, Op::kWrite, "/f"), ENOSPC);
  EXPECT_EQ(error_of(faults, Op::kWrite, "/f"), EIO);  // count=1 was not used up
  EXPECT_EQ(error_of(faults, Op::kWrite, "/f"), 0);
  EXPECT_EQ(faults.to_json(), nlohmann::json::parse(R"([
    {"rule": "op=write,error=ENOSPC,nth=1", "matched": 3, "fired": 1},
    {"rule": "op=write,error=EIO,count=1", "matched": 3, "fired": 1}
  ])"));
}

// --- state

TEST(FaultInjector, EmptyUntilARuleIsAdded) {
  FaultInjector faults;
  EXPECT_TRUE(faults.empty());
  const FaultInjector::Fault none = faults.check(Op::kWrite, "/f");
  EXPECT_EQ(none.error, 0);
  EXPECT_EQ(none.latency_ns, 0u);
  EXPECT_FALSE(faults.add("bogus").has_value());
  EXPECT_TRUE(faults.empty());
  add_ok(faults, "error=EIO");
  EXPECT_FALSE(faults.empty());
}

TEST(FaultInjector, ClearForgetsRulesAndCounters) {
  FaultInjector faults;
  add_ok(faults, "op=write,error=EIO");
  EXPECT_EQ(error_of(faults, Op::kWrite, "/f"), EIO);
  faults.clear();
  EXPECT_TRUE(faults.empty());
  EXPECT_EQ(error_of(faults, Op::kWrite, "/f"), 0);
  EXPECT_EQ(faults.fired_total(), 0u);
  EXPECT_EQ(faults.to_json(), nlohmann::json::array());
  // Rules added after a clear start counting from nothing.
  add_ok(faults, "op=write,error=EIO,nth=2");
  EXPECT_EQ(failing_writes(faults, 3), std::vector<int>{2});
}

TEST(FaultInjector, ToJsonReportsMatchedAndFired) {
  FaultInjector faults;
  EXPECT_EQ(faults.to_json(), nlohmann::json::array());
  add_ok(faults, "op=fsync,error=ENOSPC,nth=3");
  add_ok(faults, " op=read,latency=50ms ");
  for (int i = 0; i < 4; ++i) (void)faults.check(Op::kFsync, "/f");
  (void)faults.check(Op::kRead, "/f");
  (void)faults.check(Op::kWrite, "/f");
  EXPECT_EQ(faults.to_json(), nlohmann::json::parse(R"([
    {"rule": "op=fsync,error=ENOSPC,nth=3", "matched": 4, "fired": 1},
    {"rule": "op=read,latency=50ms", "matched": 1, "fired": 1}
  ])"));
  EXPECT_EQ(faults.fired_total(), 2u);
}

TEST(FaultInjector, FiringIsLoggedAsWarning) {
  LogCapture log;
  FaultInjector faults;
  add_ok(faults, "op=read,latency=50ms");
  add_ok(faults, "op=write,error=EIO,nth=2");
  (void)faults.check(Op::kWrite, "/a/b");
  (void)faults.check(Op::kWrite, "/a/b");
  (void)faults.check(Op::kRead, "/a/b");
  EXPECT_EQ(log.text(),
            "warning fault: rule 2 \"op=write,error=EIO,nth=2\" fired: write /a/b -> EIO\n"
            "warning fault: rule 1 \"op=read,latency=50ms\" fired: read /a/b -> latency 50ms\n");
}

// Every match is counted once however the calls interleave.
TEST(FaultInjector, ConcurrentChecksCountEveryMatch) {
  LogCapture quiet;
  FaultInjector faults;
  add_ok(faults, "op=write,error=EIO,every=7");
  constexpr int kThreads = 4;
  constexpr int kCalls = 700;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&faults] {
      for (int i = 0; i < kCalls; ++i) (void)faults.check(Op::kWrite, "/f");
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(faults.to_json()[0]["matched"], kThreads * kCalls);
  EXPECT_EQ(faults.fired_total(), uint64_t{kThreads * kCalls / 7});
}

}  // namespace
}  // namespace mimicfs
