// SPDX-License-Identifier: Apache-2.0
// Random conformance scripts: calls drawn over a few names, descriptors, users
// and modes (set-ID bits included), so that sequences no one thought to write
// meet the same comparison as the fixed table. std::mt19937_64 is specified
// exactly, and the draws take it modulo: one seed, the same scripts anywhere.
#include <random>
#include <string>

#include "tests/conformance/table.h"

namespace mimicfs::conformance {
namespace {

class Draw {
 public:
  explicit Draw(uint64_t seed) : engine_(seed) {}
  size_t below(size_t n) { return static_cast<size_t>(engine_() % n); }
  template <typename T, size_t N>
  const T& pick(const T (&items)[N]) {
    return items[below(N)];
  }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }

 private:
  std::mt19937_64 engine_;
};

constexpr const char* kPaths[] = {"a", "b", "c", "d", "d/a", "d/b", "e", "e/f", "d/e", "l"};
constexpr const char* kModes[] = {"644", "755", "600", "777", "6755", "2745", "4711",
                                  "1777", "0",   "2775", "444", "6777"};
constexpr const char* kUids[] = {"0", "65534", "65533", "-1"};
constexpr const char* kGids[] = {"0", "65533", "65532", "65531", "-1"};
constexpr const char* kUsers[] = {"", "", "", "", "as 65534:65533:65533,65532 ",
                                  "as 65534:65533:65533,65532 ", "as 65534:65531:65531 ",
                                  "as 65533:65533:65533 ", "as 65530:65530 "};
constexpr const char* kOpenFlags[] = {"rdonly", "wronly", "rdwr", "wronly|creat",
                                      "rdwr|creat|excl", "wronly|trunc", "rdwr|append",
                                      "rdonly|nofollow", "rdonly|directory", "wronly|creat|trunc"};
constexpr const char* kLengths[] = {"0", "1", "100", "4096", "5000", "70000"};
constexpr const char* kOffsets[] = {"0", "1", "4095", "4096", "10000", "1048576"};
constexpr const char* kSlots[] = {"1", "2", "3"};
constexpr const char* kXattrs[] = {"user.a", "user.b", "trusted.t"};
constexpr const char* kTimes[] = {"now", "omit", "100", "200"};

std::string statement(Draw& d, const Features& features, bool (&open)[3]) {
  const std::string as = d.pick(kUsers);
  const std::string p = d.pick(kPaths);
  const size_t slot_index = d.below(3);
  const std::string slot = kSlots[slot_index];
  switch (d.below(27)) {
    case 0: case 1: return as + "creat " + p + " " + d.pick(kModes);
    case 2: return as + "mkdir " + p + " " + d.pick(kModes);
    case 3: return as + "mknod " + p + " fifo " + d.pick(kModes);
    case 4: return as + "symlink " + (d.chance(50) ? std::string(d.pick(kPaths)) : "nowhere") + " " + p;
    case 5: return as + "link " + p + " " + d.pick(kPaths);
    case 6: {
      const char* flags[] = {"", "", " noreplace", " exchange"};
      return as + "rename " + p + " " + d.pick(kPaths) + d.pick(flags);
    }
    case 7: return as + "unlink " + p;
    case 8: return as + "rmdir " + p;
    case 9: return as + "chmod " + p + " " + d.pick(kModes);
    case 10: {
      // Not chown(-1, -1): FUSE cannot tell it from the kernel's own privilege
      // removal (docs/conformance.md, Intended differences).
      const std::string uid = d.pick(kUids), gid = d.pick(kGids);
      return as + (d.chance(70) ? "chown " : "lchown ") + p + " " + uid + " " +
             (uid == "-1" && gid == "-1" ? "65532" : gid);
    }
    case 11: return as + "truncate " + p + " " + d.pick(kLengths);
    case 12: case 13: {
      std::string text = open[slot_index] ? "close " + slot + "; " : "";
      open[slot_index] = true;
      // O_TMPFILE where the profile has it: a file with no name, that linkfd names.
      if (features.tmpfile && d.chance(15)) {
        const char* dirs[] = {".", "d", "e"};
        return text + as + "open " + slot + " " + d.pick(dirs) + " rdwr|tmpfile " + d.pick(kModes) +
               "; " + as + "linkfd " + slot + " " + d.pick(kPaths);
      }
      // O_NONBLOCK: an open of a fifo for reading would wait for a writer.
      return text + as + "open " + slot + " " + p + " " + d.pick(kOpenFlags) + "|nonblock " +
             d.pick(kModes);
    }
    case 14: open[slot_index] = false; return "close " + slot;
    case 15: return as + "write " + slot + " " + d.pick(kLengths);
    case 16: return as + "pwrite " + slot + " " + d.pick(kOffsets) + " " + d.pick(kLengths);
    case 17: return as + "pread " + slot + " " + d.pick(kOffsets) + " " + d.pick(kLengths);
    case 18: return as + "ftruncate " + slot + " " + d.pick(kLengths);
    // No fallocate: what a call that changes nothing still touches differs
    // from one kernel filesystem to the next (docs/conformance.md); the fixed
    // table checks each mode.
    case 19: return as + (d.chance(50) ? "fsync " : "fdatasync ") + slot;
    case 20: {
      const char* flags[] = {"", "", " create", " replace"};
      return as + "setxattr " + p + " " + d.pick(kXattrs) + " v" + std::to_string(d.below(3)) + d.pick(flags);
    }
    case 21: return as + "getxattr " + p + " " + d.pick(kXattrs);
    case 22: return as + "removexattr " + p + " " + d.pick(kXattrs);
    case 23: return as + "utimens " + p + " " + d.pick(kTimes) + " " + d.pick(kTimes);
    case 24: return as + (d.chance(50) ? "stat " : "lstat ") + p;
    case 25: return as + "readdir " + (d.chance(50) ? std::string(".") : p);
    default: {
      const char* modes[] = {"f", "r", "w", "x", "rw"};
      return as + "access " + p + " " + d.pick(modes);
    }
  }
}

}  // namespace

std::vector<Script> random_scripts(uint64_t seed, int count, int length, const Features& features) {
  std::vector<Script> scripts;
  for (int i = 0; i < count; ++i) {
    Draw d(seed * 1'000'003 + i);
    bool open[3] = {false, false, false};
    std::string text = "mkdir d 0777; mkdir e 0755; chown e 65534 65533";
    for (int s = 0; s < length; ++s) text += "; " + statement(d, features, open);
    scripts.push_back({"random/" + std::to_string(seed) + "/" + std::to_string(i), text});
  }
  return scripts;
}

}  // namespace mimicfs::conformance
