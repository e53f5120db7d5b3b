// SPDX-License-Identifier: Apache-2.0
#include "cli/client_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "control/control_files.h"
#include "host/exit_status.h"
#include "host/mount_checks.h"

namespace mimicfs {
namespace {

int usage(const std::string& message) {
  fmt::print(stderr, "mimicfs: {}\n", message);
  return kExitUsage;
}

}  // namespace

int mount_client_of(const std::string& server, const std::string& mountpoint) {
  namespace fs = std::filesystem;
  const std::string control = (fs::path(server) / ControlFiles::kDirectoryName).string();
  std::ifstream stats_file(control + "/stats.json");
  nlohmann::json stats = nlohmann::json::parse(stats_file, nullptr, /*allow_exceptions=*/false);
  if (!stats_file.is_open() || stats.is_discarded() || !stats.is_object()) {
    return usage(fmt::format("--client-of {}: not a mimicfs mount", server));
  }
  if (!stats.contains("client")) {
    return usage(fmt::format(
        "--client-of {}: its profile ({}) is a local filesystem's; only an NFS profile's "
        "mounts are clients of one server (client.nfs)",
        server, stats.value("profile", std::string("?"))));
  }
  if (auto why = check_mountpoint(mountpoint); !why.empty()) return usage(why);
  std::error_code error;
  const fs::path dir = fs::canonical(mountpoint, error);
  if (error) return usage(fmt::format("mountpoint {}: {}", mountpoint, error.message()));
  const fs::path served = fs::canonical(server, error);
  if (error) return usage(fmt::format("--client-of {}: {}", server, error.message()));
  // A mount inside its own server would be served through itself.
  if (const auto [end, _] = std::mismatch(served.begin(), served.end(), dir.begin(), dir.end());
      end == served.end()) {
    return usage(fmt::format("mountpoint {}: inside the mount it would be a client of ({})",
                             mountpoint, server));
  }

  const std::string command = fmt::format("client mount {}\n", dir.string());
  const int fd = ::open((control + "/ctl").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return usage(fmt::format("--client-of {}: cannot open its ctl: {}", server,
                             std::strerror(errno)));
  }
  const ssize_t written = ::write(fd, command.data(), command.size());
  const int write_error = errno;
  ::close(fd);
  if (written >= 0) return kExitOk;
  if (write_error == EOPNOTSUPP) {
    return usage(fmt::format("--client-of {}: its daemon serves no NFS clients", server));
  }
  if (write_error == EINVAL) {
    return usage(fmt::format("mountpoint {}: refused by the daemon of {} (its log says why)",
                             mountpoint, server));
  }
  fmt::print(stderr, "mimicfs: cannot mount {} as a client of {}: {} (its log says why)\n",
             mountpoint, server, std::strerror(write_error));
  return kExitFailure;
}

}  // namespace mimicfs
