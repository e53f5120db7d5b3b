// SPDX-License-Identifier: Apache-2.0
// Layer: a FileSystem over another one (its target), as LevelDB's EnvWrapper
// and nbdkit's filters wrap theirs. Every operation calls enter(), forwards to
// the target unless enter() refused it, then calls leave(). A layer overrides
// those two hooks for what it does to every operation (inject a fault, charge
// time, count), and any single operation it changes.
//
// The stack a mount uses (engine.h), top first:
//   [NfsClientLayer ->] CountingLayer -> CostLayer -> FaultLayer -> Volume
// so a fault's error and latency are charged and counted like the core's work.
//
// Thread-safety: as FileSystem. Hooks run on the calling thread, with no lock of
// the target held: a layer may wait (CostLayer in real latency mode).
#pragma once

#include <optional>

#include "engine/fs/file_system.h"

namespace mimicfs {

// One operation as a layer sees it.
struct Call {
  Op op;
  uint64_t inode = 0;     // the file, or the directory holding `name`
  std::string_view name;  // the entry a namespace operation is about, else empty
};

class Layer : public FileSystem {
 public:
  explicit Layer(FileSystem& target) : target_(target) {}

  const Profile& profile() const override { return target_.profile(); }

  Result<Attributes> lookup(uint64_t parent, const std::string& name, Work& work) override;
  void forget(uint64_t inode, uint64_t references, Work& work) override;
  Result<Attributes> getattr(uint64_t inode, Work& work) override;
  Result<Attributes> setattr(uint64_t inode, const AttributeChanges& changes, Work& work) override;
  Result<Attributes> create(uint64_t parent, const std::string& name, uint32_t mode, uint64_t rdev,
                            Owner owner, bool open_handle, Work& work) override;
  Result<Attributes> tmpfile(uint64_t parent, uint32_t mode, Owner owner, Work& work) override;
  Result<Attributes> mkdir(uint64_t parent, const std::string& name, uint32_t mode, Owner owner,
                           Work& work) override;
  Result<Attributes> symlink(uint64_t parent, const std::string& name, const std::string& target,
                             Owner owner, Work& work) override;
  Result<std::string> readlink(uint64_t inode, Work& work) override;
  Result<Attributes> link(uint64_t inode, uint64_t new_parent, const std::string& new_name,
                          Work& work) override;
  Result<void> unlink(uint64_t parent, const std::string& name, Work& work) override;
  Result<void> rmdir(uint64_t parent, const std::string& name, Work& work) override;
  Result<void> rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                      const std::string& new_name, unsigned flags, Work& work) override;
  Result<std::vector<DirectoryEntry>> read_directory(uint64_t inode, Work& work) override;
  Result<void> open(uint64_t inode, int flags, Work& work) override;
  Result<void> flush(uint64_t inode, bool writer, Work& work) override;
  void release(uint64_t inode, Work& work) override;
  Result<size_t> read(uint64_t inode, uint64_t offset, std::span<std::byte> out, int flags,
                      Work& work) override;
  Result<size_t> write(uint64_t inode, uint64_t offset, std::span<const std::byte> data, int flags,
                       Work& work) override;
  Result<size_t> copy_range(uint64_t in, uint64_t in_offset, uint64_t out, uint64_t out_offset,
                            uint64_t length, int flags, Work& work) override;
  Result<void> fallocate(uint64_t inode, int mode, uint64_t offset, uint64_t length,
                         Work& work) override;
  Result<void> fsync(uint64_t inode, bool datasync, Work& work) override;
  Result<uint64_t> seek(uint64_t inode, uint64_t offset, int whence, Work& work) override;
  Result<FilesystemStats> statfs(Work& work) override;
  Result<void> setxattr(uint64_t inode, const std::string& name, std::string_view value, int flags,
                        Work& work) override;
  Result<std::string> getxattr(uint64_t inode, const std::string& name, Work& work) override;
  Result<std::vector<std::string>> listxattr(uint64_t inode, Work& work) override;
  Result<void> removexattr(uint64_t inode, const std::string& name, Work& work) override;
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
  using FileSystem::create;
  using FileSystem::tmpfile;
  using FileSystem::fallocate;
  using FileSystem::flush;
  using FileSystem::forget;
  using FileSystem::fsync;
  using FileSystem::getattr;
  using FileSystem::getxattr;
  using FileSystem::link;
  using FileSystem::listxattr;
  using FileSystem::lookup;
  using FileSystem::mkdir;
  using FileSystem::open;
  using FileSystem::read;
  using FileSystem::read_directory;
  using FileSystem::readlink;
  using FileSystem::release;
  using FileSystem::removexattr;
  using FileSystem::rename;
  using FileSystem::rmdir;
  using FileSystem::seek;
  using FileSystem::setattr;
  using FileSystem::setxattr;
  using FileSystem::statfs;
  using FileSystem::symlink;
  using FileSystem::sync_all;
  using FileSystem::unlink;
  using FileSystem::write;

 protected:
  // Before `call` reaches the target. An error is returned instead of running
  // it; leave() still runs. The default lets everything through.
  virtual Result<void> enter(const Call& call, Work& work);
  // After `call`, with `error` 0 on success. The default does nothing.
  virtual void leave(const Call& call, Work& work, int error);

  FileSystem& target() { return target_; }

 private:
  // enter(), `forward` unless refused, leave(): every operation's shape.
  template <typename T, typename Forward>
  Result<T> around(const Call& call, Work& work, Forward&& forward);

  FileSystem& target_;
};

}  // namespace mimicfs
