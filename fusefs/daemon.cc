// SPDX-License-Identifier: Apache-2.0
#include "fusefs/daemon.h"

#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "host/mount_checks.h"

namespace mimicfs {
namespace {

void on_wake_signal(int) {}  // only interrupts the serving thread's wait

}  // namespace

Daemon::Daemon(Engine& engine, std::string profile, AdapterOptions adapter, IoUring io_uring)
    : engine_(engine),
      profile_(std::move(profile)),
      adapter_options_(adapter),
      io_uring_(io_uring),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  // Operations waiting on a frozen volume give up once the daemon stops or a
  // session's loop has ended (its connection aborted).
  engine_.stop_waiting_when([this] { return stopping_.load() || any_session_exited(); });
}

Daemon::~Daemon() {
  stopping_.store(true);
  std::vector<std::unique_ptr<Session>> left;
  {
    std::lock_guard lock(mutex_);
    for (auto* list : {&serving_, &mounted_}) {
      for (auto& session : *list) left.push_back(std::move(session));
      list->clear();
    }
  }
  for (auto& session : left) {
    if (session->thread.joinable()) {
      fuse_session_exit(session->fuse->get());
      while (!session->ended.load()) {
        pthread_kill(session->thread.native_handle(), kWakeSignal);
        usleep(10'000);
      }
    }
    end(std::move(session));
  }
  engine_.stop_waiting_when({});
  close(wake_fd_);
}

std::unique_ptr<Daemon::Session> Daemon::mount(const std::string& mountpoint, FileSystem& fs,
                                               std::string& error) {
  auto session = std::make_unique<Session>();
  session->mountpoint = mountpoint;
  session->fs = &fs;
  session->adapter = std::make_unique<FuseAdapter>(engine_, fs, adapter_options_);
  session->adapter->control().mount_clients_with(
      [this](const std::string& path) { return mount_client(path); });
  // A restart through any client restarts every mount's view of the volume.
  session->adapter->control().after_restart([this] { restarted(); });
  session->fuse = std::make_unique<FuseSession>(*session->adapter, mountpoint, profile_, io_uring_);
  if (!session->fuse->error().empty()) {
    error = session->fuse->error();
    return nullptr;
  }
  return session;
}

std::string Daemon::mount_first(const std::string& mountpoint) {
  engine_.name_first_client(mountpoint);
  std::string error;
  auto session = mount(mountpoint, engine_.fs(), error);
  if (!session) return error;
  std::lock_guard lock(mutex_);
  claimed_.push_back(mountpoint);
  mounted_.push_back(std::move(session));
  return {};
}

Result<void> Daemon::mount_client(const std::string& path) {
  if (!engine_.has_clients()) {
    spdlog::warn("ctl: client mount {}: the profile is not an NFS client's (client.nfs)", path);
    return fail(EOPNOTSUPP);
  }
  if (std::string why = check_mountpoint(path); !why.empty()) {
    spdlog::warn("ctl: client mount: {}", why);
    return fail(EINVAL);
  }
  std::error_code error;
  const std::filesystem::path canonical = std::filesystem::canonical(path, error);
  if (error) {
    spdlog::warn("ctl: client mount {}: {}", path, error.message());
    return fail(EINVAL);
  }
  const std::string mountpoint = canonical.string();
  // Claimed first: a second `client mount` of it, or of a directory under or
  // over it, is refused meanwhile (a mount inside another of this daemon's
  // would be served through itself).
  {
    std::lock_guard lock(mutex_);
    if (stopping_.load()) return fail(ESHUTDOWN);
    for (const std::string& other : claimed_) {
      if (nested(other, mountpoint)) {
        spdlog::warn("ctl: client mount {}: inside or over the mount {}", mountpoint, other);
        return fail(EINVAL);
      }
    }
    claimed_.push_back(mountpoint);
  }
  auto unclaim = [this, &mountpoint] {
    std::lock_guard lock(mutex_);
    std::erase(claimed_, mountpoint);
  };
  FileSystem& client = engine_.add_client(mountpoint);
  std::string why;
  std::unique_ptr<Session> session;
  try {
    session = mount(mountpoint, client, why);
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!session) {
    engine_.remove_client(client);
    unclaim();
    spdlog::warn("ctl: client mount: {}", why);
    return fail(EIO);
  }
  {
    std::lock_guard lock(mutex_);
    if (!stopping_.load()) {
      spdlog::info("mimicfs {} client mounted on {}", profile_, mountpoint);
      mounted_.push_back(std::move(session));
    }
  }
  if (session) {  // the daemon is stopping: not served
    end(std::move(session));
    return fail(ESHUTDOWN);
  }
  wake_main();  // serve() starts its thread
  return {};
}

bool Daemon::nested(const std::string& a, const std::string& b) {
  const std::string& shorter = a.size() <= b.size() ? a : b;
  const std::string& longer = a.size() <= b.size() ? b : a;
  return longer.compare(0, shorter.size(), shorter) == 0 &&
         (longer.size() == shorter.size() || longer[shorter.size()] == '/' || shorter == "/");
}

void Daemon::start(Session& session) {
  session.thread = std::thread([this, &session] {
    pthread_setname_np(pthread_self(), "mimicfs-session");
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, kWakeSignal);
    pthread_sigmask(SIG_UNBLOCK, &wake, nullptr);
    session.adapter->start();  // its invalidation thread
    session.status = session.fuse->serve();
    session.ended.store(true);
    wake_main();
  });
}

void Daemon::end(std::unique_ptr<Session> session) {
  if (session->thread.joinable()) session->thread.join();
  const std::string mountpoint = session->mountpoint;
  FileSystem* fs = session->fs;
  session->fuse.reset();  // unmounted, if the kernel still has it
  session->adapter.reset();
  engine_.remove_client(*fs);  // not the engine's own
  {
    std::lock_guard lock(mutex_);
    std::erase(claimed_, mountpoint);
  }
  spdlog::info("unmounted {}", mountpoint);
}

bool Daemon::any_session_exited() {
  std::lock_guard lock(mutex_);
  for (const auto& session : serving_) {
    if (fuse_session_exited(session->fuse->get())) return true;
  }
  return false;
}

void Daemon::restarted() {
  // Under the lock, so that no adapter goes meanwhile: each wait is bounded.
  std::lock_guard lock(mutex_);
  for (auto* list : {&serving_, &mounted_}) {
    for (const auto& session : *list) session->adapter->restarted();
  }
}

void Daemon::wake_main() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

int Daemon::serve(const sigset_t& stop_signals) {
  struct sigaction wake {};
  wake.sa_handler = on_wake_signal;  // no SA_RESTART: the wait returns EINTR
  sigemptyset(&wake.sa_mask);
  sigaction(kWakeSignal, &wake, nullptr);
  const int signal_fd = signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) {
    const int error = errno;
    spdlog::error("cannot read the stop signals: {}", std::strerror(error));
    return -error;
  }
  int status = 0;
  for (;;) {
    std::vector<std::unique_ptr<Session>> ended;
    bool none_left = false;
    {
      std::lock_guard lock(mutex_);
      for (auto& session : mounted_) {
        start(*session);
        serving_.push_back(std::move(session));
      }
      mounted_.clear();
      for (auto it = serving_.begin(); it != serving_.end();) {
        if ((*it)->ended.load()) {
          ended.push_back(std::move(*it));
          it = serving_.erase(it);
        } else {
          ++it;
        }
      }
      if (stopping_.load()) {
        for (auto& session : serving_) {
          fuse_session_exit(session->fuse->get());
          pthread_kill(session->thread.native_handle(), kWakeSignal);
        }
      }
      none_left = serving_.empty();
    }
    for (auto& session : ended) {
      if (session->status < 0 && status == 0) status = session->status;
      end(std::move(session));
    }
    if (none_left) break;

    // A stop re-sends the wake signal until every loop has seen it: one sent
    // before a thread reached its wait would be lost.
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, stopping_.load() ? 100 : -1) < 0 && errno != EINTR) {
      spdlog::error("daemon: poll: {}", std::strerror(errno));
      stopping_.store(true);
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      if (read(signal_fd, &info, sizeof info) == sizeof info) {
        spdlog::info("signal {}: unmounting every mount", info.ssi_signo);
        std::lock_guard lock(mutex_);  // a client mount under way sees it
        stopping_.store(true);
      }
    }
    if (fds[1].revents & POLLIN) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof count);
    }
  }
  close(signal_fd);
  return status;
}

}  // namespace mimicfs
