#include "fusefs/mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backends/memory_data_store.h"
#include "fusefs/control_files.h"
#include "fusefs/exit_status.h"
#include "fusefs/fuse_channel.h"
#include "fusefs/heap_trimmer.h"

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

int mount_and_serve(MountOptions options) {
  SystemWallClock wall_clock;
  if (!options.store) options.store = std::make_unique<MemoryDataStore>();
  Engine engine(options.profile, std::move(options.store), wall_clock, options.latency);
  for (const std::string& rule : options.faults) {
    if (auto added = engine.faults().add(rule); !added) {
      spdlog::error("{}", added.error());
      return kExitUsage;
    }
  }
  FuseAdapter adapter(engine, options.adapter);

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
    return kExitFailure;
  }
  if (fuse_set_signal_handlers(session) != 0) {
    fuse_session_destroy(session);
    spdlog::error("cannot install signal handlers");
    return kExitFailure;
  }
  if (fuse_session_mount(session, options.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(session);
    fuse_session_destroy(session);
    spdlog::error("cannot mount on {}", options.mountpoint);
    return kExitFailure;
  }
  // FUSE_HANDLE_KILLPRIV_V2 (no security.capability round trip before each
  // write) and O_TMPFILE, which libfuse 3.14 cannot serve.
  fuse_channel::serve_tmpfile();
  if (!fuse_channel::attach(session)) {
    fuse_session_unmount(session);
    fuse_remove_signal_handlers(session);
    fuse_session_destroy(session);
    return kExitFailure;
  }
  adapter.set_session(session);
  spdlog::info("mimicfs {} mounted on {} (latency {})", options.profile.name, options.mountpoint,
               options.latency.to_string());
  // The mount exists now; the parent returns from here and the child serves it.
  fuse_daemonize(options.foreground ? 1 : 0);
  HeapTrimmer heap_trimmer;  // a thread: after the fork

  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(config, 16);
  const int loop_status = fuse_session_loop_mt(session, config);
  fuse_loop_cfg_destroy(config);
  adapter.detach();

  fuse_session_unmount(session);
  fuse_remove_signal_handlers(session);
  fuse_session_destroy(session);
  spdlog::info("unmounted {}", options.mountpoint);
  // The loop returns 0 after an unmount, the signal number after SIGINT/SIGTERM/SIGHUP
  // (a clean stop too), and a negative errno when serving failed.
  return loop_status >= 0 ? kExitOk : kExitFailure;
}

}  // namespace mimicfs
