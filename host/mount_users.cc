// SPDX-License-Identifier: Apache-2.0
#include "host/mount_users.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <thread>

namespace mimicfs {
namespace {

namespace fs = std::filesystem;

bool under(std::string_view path, std::string_view dir) {
  return path.starts_with(dir) && (path.size() == dir.size() || path[dir.size()] == '/');
}

bool link_under(const fs::path& link, std::string_view dir) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  return !ec && under(target.native(), dir);
}

// Reading /proc/PID/maps or a link's target never reaches the mount's daemon:
// the kernel names the files from its own records.
bool uses(const fs::path& process, std::string_view dir) {
  if (link_under(process / "cwd", dir) || link_under(process / "root", dir)) return true;
  std::error_code ec;
  for (fs::directory_iterator fd(process / "fd", ec), end; !ec && fd != end; fd.increment(ec)) {
    if (link_under(fd->path(), dir)) return true;
  }
  std::ifstream maps(process / "maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t path = line.find('/');
    if (path != std::string::npos && under(std::string_view(line).substr(path), dir)) return true;
  }
  return false;
}

// The fields of /proc/PID/stat after the command name (which may hold spaces
// and parentheses): state, ppid, ...; "" when the process is gone.
std::string stat_fields(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return "";
  const size_t name_end = text.rfind(')');
  return name_end == std::string::npos || name_end + 2 >= text.size() ? ""
                                                                      : text.substr(name_end + 2);
}

bool descends_from(pid_t pid, pid_t ancestor) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    const std::string fields = stat_fields(pid);
    if (fields.size() < 3) return false;
    pid_t parent = 0;
    std::from_chars(fields.data() + 2, fields.data() + fields.size(), parent);
    if (parent == ancestor) return true;
    pid = parent;
  }
  return false;
}

// Present: /proc/PID exists. A zombie counts until reaped, as kill(pid, 0)
// sees it (a server's lock file check does); this one's own are reaped here.
bool present(pid_t pid) {
  const std::string fields = stat_fields(pid);
  if (fields.empty()) return false;
  if (fields[0] == 'Z' || fields[0] == 'X') return waitpid(pid, nullptr, WNOHANG) != pid;
  return true;
}

}  // namespace

std::vector<pid_t> descendants_using(const std::string& mount_dir) {
  std::vector<pid_t> found;
  const pid_t self = getpid();
  std::error_code ec;
  for (fs::directory_iterator entry("/proc", ec), end; !ec && entry != end; entry.increment(ec)) {
    const std::string name = entry->path().filename();
    pid_t pid = 0;
    const auto [last, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (error != std::errc() || last != name.data() + name.size() || pid == self) continue;
    if (descends_from(pid, self) && uses(entry->path(), mount_dir)) found.push_back(pid);
  }
  return found;
}

void kill_all(const std::vector<pid_t>& processes) {
  for (const pid_t pid : processes) kill(pid, SIGKILL);
}

bool wait_until_gone(const std::vector<pid_t>& processes, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (const pid_t pid : processes) {
    while (present(pid)) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return true;
}

}  // namespace mimicfs
