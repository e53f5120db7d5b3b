// SPDX-License-Identifier: Apache-2.0
#include "fusefs/mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/memory_data_store.h"
#include "fusefs/control_files.h"
#include "fusefs/exit_status.h"
#include "fusefs/fuse_channel.h"
#include "fusefs/fuse_ring.h"
#include "fusefs/fuse_workers.h"
#include "fusefs/heap_trimmer.h"
#include "fusefs/request_buffers.h"

namespace mimicfs {

std::string check_mountpoint(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return fmt::format("mountpoint {}: {}", path, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return fmt::format("mountpoint {}: not a directory", path);
  // A mimicfs mount lists nothing (its control directory is hidden): a second
  // daemon would stack on it.
  const std::string control = path + "/" + std::string(ControlFiles::kDirectoryName);
  if (struct stat control_st{}; stat(control.c_str(), &control_st) == 0) {
    return fmt::format("mountpoint {}: already a mimicfs mount (unmount it: fusermount3 -u {})",
                       path, path);
  }
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), closedir);
  if (!dir) return fmt::format("mountpoint {}: {}", path, std::strerror(errno));
  while (const dirent* entry = readdir(dir.get())) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") {
      return fmt::format("mountpoint {}: not empty (found \"{}\")", path, name);
    }
  }
  return {};
}

std::string check_fuse_device() {
  struct stat st {};
  if (stat("/dev/fuse", &st) != 0)
    return fmt::format("cannot use /dev/fuse: {}", std::strerror(errno));
  if (!S_ISCHR(st.st_mode)) return "cannot use /dev/fuse: not a character device";
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return fmt::format("cannot use /dev/fuse: {}", std::strerror(errno));
  ::close(fd);
  return {};
}

namespace {

// The volume into its data directory after the unmount, as a real unmount
// syncs: the next mount of the directory restores it. When it cannot be saved
// the `mounted` marker stays with the reason, and the next mount refuses the
// directory saying why. False when it was not saved.
bool save_volume(Engine& engine, HostDataStore& data_dir, const Profile& profile) {
  // A signal now would kill the daemon half-way through the save.
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) std::signal(signal, SIG_IGN);
  data_dir.note_serving("saving");
  std::string failure;
  try {
    ImageJson image = engine.save_image();
    image["profile"] = {{"name", profile.name}, {"toml", profile.to_toml()}};
    if (auto saved = data_dir.save_volume(image); !saved) failure = saved.error();
  } catch (const std::exception& e) {
    failure = fmt::format("data directory {}: cannot save the volume: {}", data_dir.directory(),
                          e.what());
  }
  if (!failure.empty()) {
    spdlog::error("{}", failure);
    data_dir.note_serving("save failed: " + failure);
    return false;
  }
  data_dir.end_serving();
  spdlog::info("saved the volume in {}", data_dir.directory());
  return true;
}

}  // namespace

int mount_and_serve(MountOptions options) {
  SystemWallClock wall_clock;
  if (!options.store) {
    auto memory = std::make_unique<MemoryDataStore>();
    spdlog::info("file contents in memory; a new page gets its memory {}",
                 memory->page_fill() == PageFill::kCopy ? "with its data (userfaultfd)"
                                                        : "zeroed, at its first write's fault");
    options.store = std::move(memory);
  }
  Engine engine(options.profile, std::move(options.store), wall_clock, options.latency);
  for (const std::string& rule : options.faults) {
    if (auto added = engine.faults().add(rule); !added) {
      spdlog::error("{}", added.error());
      return kExitUsage;
    }
  }
  FuseAdapter adapter(engine, options.adapter);
  HostDataStore* const data_dir = options.data_dir;
  if (options.image) {
    try {
      engine.load_image(*options.image);
    } catch (const std::exception& e) {
      // What was loaded goes with the engine; the host files stay for the image.
      fmt::print(stderr, "mimicfs: --data-dir {}: its saved volume cannot be restored: {}\n",
                 data_dir->directory(), e.what());
      return kExitUsage;
    }
    options.image.reset();
    spdlog::info("restored the volume saved in {}", data_dir->directory());
  }
  // Every way out before the volume is served leaves the saved one as it was.
  if (data_dir) {
    if (auto begun = data_dir->begin_serving(); !begun) {
      fmt::print(stderr, "mimicfs: {}\n", begun.error());
      return kExitUsage;
    }
  }
  auto abandon_serving = [&] {
    if (data_dir) data_dir->end_serving();
  };

  // libfuse takes mount options as an argv.
  std::vector<std::string> words = {
      "mimicfs", "-o",
      fmt::format("fsname=mimicfs-{},subtype=mimicfs,default_permissions", options.profile.name)};
  if (geteuid() == 0) words.back() += ",allow_other";  // a database may run as another user
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  fuse_session* session =
      fuse_session_new(&args, &FuseAdapter::operations(), sizeof(fuse_lowlevel_ops), &adapter);
  fuse_opt_free_args(&args);
  if (!session) {
    spdlog::error("cannot create a FUSE session");
    abandon_serving();
    return kExitFailure;
  }
  if (fuse_set_signal_handlers(session) != 0) {
    fuse_session_destroy(session);
    spdlog::error("cannot install signal handlers");
    abandon_serving();
    return kExitFailure;
  }
  if (fuse_session_mount(session, options.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(session);
    fuse_session_destroy(session);
    spdlog::error("cannot mount on {}", options.mountpoint);
    abandon_serving();
    return kExitFailure;
  }
  // FUSE_HANDLE_KILLPRIV_V2 (no security.capability round trip before each
  // write) and O_TMPFILE, which libfuse 3.14 cannot serve.
  fuse_channel::serve_tmpfile();
  // FUSE over io_uring when the kernel offers it: set up at INIT, after the fork.
  FuseRing ring(session);
  // The threads that serve /dev/fuse (all of it, or what the ring leaves it).
  FuseWorkers workers(session, 16);
  adapter.control().describe_fuse([&ring, &workers] {
    return nlohmann::json{{"transport", ring.serving() ? "io_uring" : "dev_fuse"},
                          {"ring_queues", ring.queues()},
                          {"ring_requests", ring.requests()},
                          {"workers", workers.workers()},
                          {"workers_started", workers.started()}};
  });
  using IoUring = MountOptions::IoUring;
  if (!fuse_channel::attach(session, options.io_uring == IoUring::kOff ? nullptr : &ring,
                            options.io_uring == IoUring::kOn)) {
    fuse_session_unmount(session);
    fuse_remove_signal_handlers(session);
    fuse_session_destroy(session);
    abandon_serving();
    return kExitFailure;
  }
  adapter.set_session(session);
  spdlog::info("mimicfs {} mounted on {} (latency {})", options.profile.name, options.mountpoint,
               options.latency.to_string());
  // The mount exists now; the parent returns from here and the child serves it.
  fuse_daemonize(options.foreground ? 1 : 0);
  request_buffers::block_release_signal();  // for every thread but the workers
  // A thread, after the fork; at each check it also ends the idle workers.
  HeapTrimmer heap_trimmer([&workers] { return workers.end_idle(); });
  adapter.start();  // its invalidation thread, likewise

  const int loop_status = workers.run();
  ring.stop();  // its threads serve through the adapter
  adapter.detach();

  fuse_session_unmount(session);
  fuse_remove_signal_handlers(session);
  fuse_session_destroy(session);
  spdlog::info("unmounted {}", options.mountpoint);
  if (data_dir && !save_volume(engine, *data_dir, options.profile)) return kExitFailure;
  // The loop returns 0 after an unmount, the signal number after SIGINT/SIGTERM/SIGHUP
  // (a clean stop too), and a negative errno when serving failed.
  return loop_status >= 0 ? kExitOk : kExitFailure;
}

}  // namespace mimicfs
