// SPDX-License-Identifier: Apache-2.0
#include "fusefs/fuse_session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fusefs/fuse_adapter.h"
#include "fusefs/fuse_channel.h"

namespace mimicfs {
namespace {

// libfuse's custom I/O passes the session's userdata, the adapter.
ssize_t channel_read(int fd, void* buffer, size_t length, void* userdata) {
  return static_cast<FuseAdapter*>(userdata)->channel().read(fd, buffer, length);
}

ssize_t channel_writev(int fd, iovec* iov, int count, void* userdata) {
  return static_cast<FuseAdapter*>(userdata)->channel().writev(fd, iov, count);
}

}  // namespace

FuseSession::FuseSession(FuseAdapter& adapter, const std::string& mountpoint,
                         const std::string& profile, IoUring io_uring)
    : adapter_(adapter) {
  // libfuse takes mount options as an argv.
  std::vector<std::string> words = {
      "mimicfs", "-o",
      fmt::format("fsname=mimicfs-{},subtype=mimicfs,default_permissions", profile)};
  if (geteuid() == 0) words.back() += ",allow_other";  // a database may run as another user
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  session_ = fuse_session_new(&args, &FuseAdapter::operations(), sizeof(fuse_lowlevel_ops),
                              &adapter_);
  fuse_opt_free_args(&args);
  if (session_ == nullptr) {
    error_ = "cannot create a FUSE session";
    spdlog::error("{}", error_);
    return;
  }
  if (fuse_session_mount(session_, mountpoint.c_str()) != 0) {
    error_ = fmt::format("cannot mount on {}", mountpoint);
    spdlog::error("{}", error_);
    tear_down();
    return;
  }
  mounted_ = true;
  // FUSE_HANDLE_KILLPRIV_V2 (no security.capability round trip before each
  // write) and O_TMPFILE, which libfuse 3.14 cannot serve.
  FuseChannel& channel = adapter_.channel();
  channel.serve_tmpfile();
  // FUSE over io_uring when the kernel offers it: set up at INIT.
  ring_ = std::make_unique<FuseRing>(session_, channel);
  channel.offer_ring(io_uring == IoUring::kOff ? nullptr : ring_.get(), io_uring == IoUring::kOn);
  fuse_custom_io io{};
  io.read = channel_read;
  io.writev = channel_writev;
  if (const int error = fuse_session_custom_io(session_, &io, fuse_session_fd(session_));
      error != 0) {
    error_ = fmt::format("cannot route /dev/fuse through the channel: {}", std::strerror(-error));
    spdlog::error("{}", error_);
    tear_down();
    return;
  }
  adapter_.control().describe_fuse([this] {
    return nlohmann::json{{"transport", ring_->serving() ? "io_uring" : "dev_fuse"},
                          {"ring_queues", ring_->queues()},
                          {"ring_requests", ring_->requests()},
                          {"workers", adapter_.channel().readers()},
                          {"max_workers", kMaxThreads}};
  });
  adapter_.set_session(session_);
}

FuseSession::~FuseSession() { tear_down(); }

void FuseSession::tear_down() {
  if (session_ != nullptr) adapter_.control().describe_fuse({});  // it reads the ring
  if (ring_) ring_->stop();
  adapter_.channel().offer_ring(nullptr, false);
  ring_.reset();
  if (session_ == nullptr) return;
  adapter_.detach();
  if (mounted_) fuse_session_unmount(session_);
  mounted_ = false;
  fuse_session_destroy(session_);
  session_ = nullptr;
}

int FuseSession::serve() {
  if (session_ == nullptr || !error_.empty()) return -ENOTCONN;  // never mounted
  fuse_loop_config* config = fuse_loop_cfg_create();
  if (config == nullptr) {
    spdlog::error("cannot serve /dev/fuse: no memory for the loop's configuration");
    return -ENOMEM;
  }
  fuse_loop_cfg_set_max_threads(config, kMaxThreads);
  fuse_loop_cfg_set_idle_threads(config, kMaxThreads);  // none ends before the loop
  fuse_loop_cfg_set_clone_fd(config, 0);
  const int status = fuse_session_loop_mt(session_, config);
  fuse_loop_cfg_destroy(config);
  // The loop resets the session as it returns; the ring's threads and the
  // operations waiting on a frozen volume must see it exited while they stop.
  fuse_session_exit(session_);
  ring_->stop();  // its threads serve through the adapter
  adapter_.detach();
  return status;
}

}  // namespace mimicfs
