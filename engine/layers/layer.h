// SPDX-License-Identifier: Apache-2.0
// Layer: a FileSystem over another one (its target), as LevelDB's EnvWrapper
// and nbdkit's filters wrap theirs. Every operation calls enter(), forwards to
// the target unless enter() refused it, then calls leave(). A layer overrides
// those two hooks for what it does to every operation (inject a fault, charge
// time, count), and dispatch() for the operations it changes (NfsClientLayer).
//
// The stack a mount uses (engine.h), top first:
//   ControlLayer -> [NfsClientLayer ->] CountingLayer -> CostLayer -> FaultLayer -> Volume
// so a fault's error and latency are charged and counted like the core's work.
//
// Thread-safety: as FileSystem. Hooks run on the calling thread, with no lock of
// the target held: a layer may wait (CostLayer in real latency mode).
#pragma once

#include <type_traits>

#include "engine/fs/file_system.h"

namespace mimicfs {

class Layer : public FileSystem {
 public:
  explicit Layer(FileSystem& target) : target_(target) {}

  const Profile& profile() const override { return target_.profile(); }

  // Passes every operation on (pass()); a layer that changes one overrides
  // this and visits the operation with a serve() for each it changes.
  OperationReply dispatch(const Operation& operation, Work& work) override;

  CrashReport crash(Work& work) override { return target_.crash(work); }
  uint64_t crashes() override { return target_.crashes(); }
  uint64_t write_back_at_random(double fraction, uint64_t seed) override {
    return target_.write_back_at_random(fraction, seed);
  }
  void sync_all(Work& work) override { target_.sync_all(work); }
  BackgroundReport background(uint64_t now_ns, bool flush, bool commit, Work& work) override {
    return target_.background(now_ns, flush, commit, work);
  }

  bool complete_deferred(uint64_t id) override { return target_.complete_deferred(id); }
  size_t complete_all_deferred() override { return target_.complete_all_deferred(); }
  std::string path(uint64_t inode) override { return target_.path(inode); }
  Result<Attributes> entry(uint64_t parent, const std::string& name) override {
    return target_.entry(parent, name);
  }
  Result<FileStats> file_stats(uint64_t inode) override { return target_.file_stats(inode); }
  Result<std::vector<Extent>> file_extents(uint64_t inode) override {
    return target_.file_extents(inode);
  }
  StatsSnapshot snapshot() override { return target_.snapshot(); }
  DeviceLayout layout() override { return target_.layout(); }
  void reset_statistics() override { target_.reset_statistics(); }

  using FileSystem::crash;
  using FileSystem::sync_all;

 protected:
  // Before `call` reaches the target. An error is returned instead of running
  // it; leave() still runs. The default lets everything through.
  virtual Result<void> enter(const Call& call, Work& work);
  // After `call`, with `error` 0 on success. The default does nothing.
  virtual void leave(const Call& call, Work& work, int error);

  // enter(), the target's operation unless enter() refused it, leave(): what
  // the layer does with every operation it does not change itself. An
  // operation layers do not see (no call(): forget) goes to the target alone.
  template <typename R>
  ReplyOf<R> pass(const R& request, Work& work) {
    if constexpr (Seen<R>) {
      const Call call = request.call();
      ReplyOf<R> reply = [&]() -> ReplyOf<R> {
        if (auto entered = enter(call, work); !entered) return std::unexpected(entered.error());
        return target_.run(request, work);
      }();
      leave(call, work, reply ? 0 : reply.error().value);
      if constexpr (std::is_same_v<R, ops::Release>) return {};  // gone whatever a layer said
      return reply;
    } else {
      return target_.run(request, work);
    }
  }

  FileSystem& target() { return target_; }

 private:
  FileSystem& target_;
};

}  // namespace mimicfs
