// SPDX-License-Identifier: Apache-2.0
// ControlLayer: MOUNT/.mimicfs/ as a layer on top of a mount's view of the
// volume. It answers every operation on the control files (ControlFiles) and
// on the name ".mimicfs" in the root, with the errno a read-only directory of
// special files gets, and passes the rest on; it also answers the per-file
// user.mimicfs.* xattrs. What a reader of stats.json or layout.json sees is
// taken at open and kept per open file (the requests' `handle`) until its
// release.
//
// What it cannot do, being below the adapter: a frozen volume's requests are
// kept by the adapter before they reach any layer, so the adapter asks
// answers() first, and a control file's descriptor never goes stale.
//
// Thread-safety: as FileSystem; one mutex for the open files' contents.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "control/control_files.h"
#include "engine/base/thread_annotations.h"
#include "engine/layers/layer.h"

namespace mimicfs {

class ControlLayer final : public Layer {
 public:
  // Over `view`, the mount's view of the volume, with its control files.
  ControlLayer(FileSystem& view, ControlFiles& files) : Layer(view), files_(files) {}

  // Whether the layer answers a request about `inode` (or the entry `name`
  // in it) itself: it never reaches the volume.
  static bool answers(uint64_t inode, std::string_view name = {}) {
    return ControlFiles::owns(inode) || ControlFiles::reserved(inode, name);
  }

  // Whether it answers an xattr call for `name` itself (user.mimicfs.*).
  static bool answers_xattr(std::string_view name) {
    return name.starts_with(ControlFiles::kXattrPrefix);
  }

  OperationReply dispatch(const Operation& operation, Work& work) override;

 private:
  Result<Attributes> serve(const ops::Lookup& request, Work& work);
  Result<void> serve(const ops::Forget& request, Work& work);
  Result<Attributes> serve(const ops::Getattr& request, Work& work);
  Result<Attributes> serve(const ops::Setattr& request, Work& work);
  Result<Attributes> serve(const ops::Create& request, Work& work);
  Result<Attributes> serve(const ops::Tmpfile& request, Work& work);
  Result<Attributes> serve(const ops::Mkdir& request, Work& work);
  Result<Attributes> serve(const ops::Symlink& request, Work& work);
  Result<std::string> serve(const ops::Readlink& request, Work& work);
  Result<Attributes> serve(const ops::Link& request, Work& work);
  Result<void> serve(const ops::Unlink& request, Work& work);
  Result<void> serve(const ops::Rmdir& request, Work& work);
  Result<void> serve(const ops::Rename& request, Work& work);
  Result<std::vector<DirectoryEntry>> serve(const ops::ReadDirectory& request, Work& work);
  Result<void> serve(const ops::Open& request, Work& work);
  Result<void> serve(const ops::Flush& request, Work& work);
  Result<void> serve(const ops::Release& request, Work& work);
  Result<size_t> serve(const ops::Read& request, Work& work);
  Result<size_t> serve(const ops::Write& request, Work& work);
  Result<size_t> serve(const ops::CopyRange& request, Work& work);
  Result<void> serve(const ops::Fallocate& request, Work& work);
  Result<void> serve(const ops::Fsync& request, Work& work);
  Result<uint64_t> serve(const ops::Seek& request, Work& work);
  Result<void> serve(const ops::Setxattr& request, Work& work);
  Result<std::string> serve(const ops::Getxattr& request, Work& work);
  Result<std::vector<std::string>> serve(const ops::Listxattr& request, Work& work);
  Result<void> serve(const ops::Removexattr& request, Work& work);
  // Statfs: the volume's.
  template <typename R>
  ReplyOf<R> serve(const R& request, Work& work) {
    return pass(request, work);
  }

  ControlFiles& files_;
  std::mutex mutex_;
  // What each open stats.json or layout.json reads, by handle.
  std::unordered_map<uint64_t, std::string> contents_ GUARDED_BY(mutex_);
};

}  // namespace mimicfs
