// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/layer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/volume_fixture.h"

namespace mimicfs {
namespace {

using namespace volume_fixture;

// Records every hook call; refuses the operations it is told to.
class RecordingLayer final : public Layer {
 public:
  explicit RecordingLayer(FileSystem& target) : Layer(target) {}
  std::vector<std::string> calls;
  Op refuse = Op::kCount;  // none

 protected:
  Result<void> enter(const Call& call, Work&) override {
    calls.push_back(fmt::format("enter {} {} {}", op_name(call.op), call.inode, call.name));
    if (call.op == refuse) return fail(EROFS);
    return {};
  }
  void leave(const Call& call, Work& work, int error) override {
    calls.push_back(
        fmt::format("leave {} {} bytes={}", op_name(call.op), errno_name(error), work.bytes));
  }
};

using Stack = LayerOverVolume<RecordingLayer>;

TEST(Layer, ForwardsEachOperationBetweenEnterAndLeave) {
  Stack s("ideal");
  FileSystem& fs = s.layer;
  auto file = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{});
  ASSERT_TRUE(file.has_value());
  ASSERT_TRUE(fs.write(file->inode, 0, as_bytes("hello")).has_value());
  EXPECT_EQ(s.layer.calls, (std::vector<std::string>{"enter create 1 f", "leave create 0 bytes=0",
                                                     fmt::format("enter write {} ", file->inode),
                                                     "leave write 0 bytes=5"}));
  // The target did the work: the volume has the file and its bytes.
  EXPECT_EQ(s.volume.getattr(file->inode)->size, 5u);
}

TEST(Layer, ARefusedOperationNeverReachesTheTargetButIsLeft) {
  Stack s("ideal");
  s.layer.refuse = Op::kMkdir;
  FileSystem& fs = s.layer;
  EXPECT_EQ(error_of(fs.mkdir(kRoot, "d", 0755, Owner{})), Errno{EROFS});
  EXPECT_EQ(error_of(s.volume.lookup(kRoot, "d")), Errno{ENOENT});
  EXPECT_EQ(s.layer.calls.back(), "leave mkdir EROFS bytes=0");
}

TEST(Layer, OperationClassFollowsTheArguments) {
  Stack s("ext4");
  FileSystem& fs = s.layer;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  AttributeChanges truncate;
  truncate.size = 0;
  ASSERT_TRUE(fs.setattr(f, truncate).has_value());
  ASSERT_TRUE(fs.write(f, 0, as_bytes(std::string(8192, 'x'))).has_value());
  ASSERT_TRUE(fs.fallocate(f, kPunch, 0, 4096).has_value());
  EXPECT_EQ(s.layer.calls[2], fmt::format("enter truncate {} ", f));
  EXPECT_EQ(s.layer.calls[6], fmt::format("enter punch {} ", f));
  EXPECT_EQ(s.layer.calls[7], "leave punch 0 bytes=4096");
}

TEST(Layer, ForgetIsNotAnOperation) {
  Stack s("ideal");
  FileSystem& fs = s.layer;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  s.layer.calls.clear();
  ASSERT_TRUE(fs.unlink(kRoot, "f").has_value());
  Work work;
  fs.forget(f, 1, work);
  EXPECT_EQ(s.layer.calls.size(), 2u);  // the unlink's enter and leave only
  EXPECT_EQ(work.destroyed_inodes, std::vector<uint64_t>{f});
}

// A layer that changes one operation, as NfsClientLayer does: its serve() for
// mkdir gives every new directory a prefix; everything else passes as it is.
class PrefixingLayer final : public Layer {
 public:
  explicit PrefixingLayer(FileSystem& target) : Layer(target) {}
  int passed = 0;

  OperationReply dispatch(const Operation& operation, Work& work) override {
    return serve_operation(operation, [&](const auto& request) { return serve(request, work); });
  }

 protected:
  Result<void> enter(const Call&, Work&) override {
    ++passed;
    return {};
  }

 private:
  Result<Attributes> serve(const ops::Mkdir& request, Work& work) {
    const std::string name = "p-" + request.name;
    return pass(ops::Mkdir{request.parent, name, request.mode, request.owner}, work);
  }
  template <typename R>
  ReplyOf<R> serve(const R& request, Work& work) {
    return pass(request, work);
  }
};

TEST(Layer, ALayerChangesOneOperationAndPassesTheRest) {
  LayerOverVolume<PrefixingLayer> s("ideal");
  FileSystem& fs = s.layer;
  ASSERT_TRUE(fs.mkdir(kRoot, "d", 0755, Owner{}).has_value());
  EXPECT_EQ(error_of(s.volume.lookup(kRoot, "d")), Errno{ENOENT});
  const auto made = fs.lookup(kRoot, "p-d");
  ASSERT_TRUE(made.has_value());
  EXPECT_TRUE(S_ISDIR(made->mode));
  // A call that leaves its Work out gets one of its own; the caller's is filled.
  Work work;
  const uint64_t f = fs.create(kRoot, "f", S_IFREG | 0644, 0, Owner{})->inode;
  ASSERT_EQ(fs.write(f, 0, as_bytes("abc"), 0, work), 3u);
  EXPECT_EQ(work.bytes, 3u);
  EXPECT_EQ(s.layer.passed, 4);  // mkdir, lookup, create, write: each entered once
}

}  // namespace
}  // namespace mimicfs
