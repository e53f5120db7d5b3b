// SPDX-License-Identifier: Apache-2.0
#include "fusefs/mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

#include <csignal>
#include <cstring>
#include <memory>
#include <vector>

#include "control/control_files.h"
#include "engine/data/memory_data_store.h"
#include "fusefs/daemon.h"
#include "fusefs/fuse_session.h"
#include "fusefs/heap_trimmer.h"
#include "host/exit_status.h"

namespace mimicfs {

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

  // The stop signals are read by the daemon's main thread (Daemon::serve):
  // every thread, those the engine, the trimmer and the sessions start,
  // keeps them blocked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, signal);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a reply or a log line to a process that went away
  int loop_status = 0;
  {
    Daemon daemon(engine, options.profile.name, options.adapter, options.io_uring);
    if (auto error = daemon.mount_first(options.mountpoint); !error.empty()) {
      abandon_serving();
      return kExitFailure;
    }
    spdlog::info("mimicfs {} mounted on {} (latency {})", options.profile.name,
                 options.mountpoint, options.latency.to_string());
    // The mount exists now; the parent returns from here and the child serves it.
    fuse_daemonize(options.foreground ? 1 : 0);
    // Threads, after the fork.
    HeapTrimmer heap_trimmer;
    loop_status = daemon.serve(stop_signals);
  }  // every session unmounted
  if (data_dir && !save_volume(engine, *data_dir, options.profile)) return kExitFailure;
  // 0 after the unmounts or a stop signal, a negative errno when serving failed.
  return loop_status >= 0 ? kExitOk : kExitFailure;
}

}  // namespace mimicfs
