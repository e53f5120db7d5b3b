// SPDX-License-Identifier: Apache-2.0
#include "tests/conformance/script.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/falloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace mimicfs::conformance {
namespace {

// The line that says a statement could not be run at all.
constexpr const char* kScriptError = "script error: ";

// A statement's user: root by default.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

struct Statement {
  std::string text;  // as written, for the transcript
  Credentials as;
  std::vector<std::string> words;  // the operation and its arguments
};

class ScriptError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(separator, start), text.size());
    parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::string trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

uint64_t number(const std::string& word) {
  size_t used = 0;
  uint64_t value = 0;
  try {
    value = std::stoull(word, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != word.size() || word.empty()) throw ScriptError("not a number: " + word);
  return value;
}

// An owner argument: -1 leaves it as it is, as chown(2) takes it.
uint32_t owner_id(const std::string& word) {
  return word == "-1" ? static_cast<uint32_t>(-1) : static_cast<uint32_t>(number(word));
}

Credentials parse_credentials(const std::string& spec) {
  const std::vector<std::string> parts = split(spec, ':');
  if (parts.size() < 2 || parts.size() > 3) throw ScriptError("as needs UID:GID[:GROUPS]: " + spec);
  Credentials c{static_cast<uid_t>(number(parts[0])), static_cast<gid_t>(number(parts[1])), {}};
  if (parts.size() == 3) {
    for (const std::string& g : split(parts[2], ',')) c.groups.push_back(number(g));
  }
  return c;
}

std::vector<Statement> parse(const std::string& text) {
  std::vector<Statement> statements;
  for (const std::string& line : split(text, '\n')) {
    for (const std::string& raw : split(line, ';')) {
      const std::string stmt = trim(raw);
      if (stmt.empty() || stmt[0] == '#') continue;
      std::istringstream in(stmt);
      Statement s{stmt, {}, {}};
      std::string word;
      while (in >> word) s.words.push_back(word);
      if (s.words[0] == "as") {
        if (s.words.size() < 3) throw ScriptError("as without an operation: " + stmt);
        s.as = parse_credentials(s.words[1]);
        s.words.erase(s.words.begin(), s.words.begin() + 2);
      }
      statements.push_back(std::move(s));
    }
  }
  return statements;
}

// `@name255`, `@name256`, and paths that contain them ("d/@name255").
std::string path_arg(const std::string& word) {
  std::string path = word;
  for (const auto& [token, length] : {std::pair{"@name255", 255}, std::pair{"@name256", 256}}) {
    size_t at;
    while ((at = path.find(token)) != std::string::npos) {
      path.replace(at, std::strlen(token), std::string(length, 'n'));
    }
  }
  return path;
}

int flag_bits(const std::string& word, const std::map<std::string, int>& names) {
  int bits = 0;
  for (const std::string& name : split(word, '|')) {
    if (name == "0") continue;
    auto it = names.find(name);
    if (it == names.end()) throw ScriptError("unknown flag: " + name);
    bits |= it->second;
  }
  return bits;
}

int open_flags(const std::string& word) {
  static const std::map<std::string, int> names = {
      {"rdonly", O_RDONLY}, {"wronly", O_WRONLY},       {"rdwr", O_RDWR},
      {"creat", O_CREAT},   {"excl", O_EXCL},           {"trunc", O_TRUNC},
      {"append", O_APPEND}, {"nofollow", O_NOFOLLOW},   {"directory", O_DIRECTORY},
      {"tmpfile", O_TMPFILE}, {"sync", O_SYNC},         {"dsync", O_DSYNC},
      {"nonblock", O_NONBLOCK}, {"path", O_PATH}};
  return flag_bits(word, names);
}

int fallocate_mode(const std::string& word) {
  static const std::map<std::string, int> names = {{"keep_size", FALLOC_FL_KEEP_SIZE},
                                                   {"punch_hole", FALLOC_FL_PUNCH_HOLE},
                                                   {"zero_range", FALLOC_FL_ZERO_RANGE}};
  return flag_bits(word, names);
}

timespec time_arg(const std::string& word) {
  if (word == "now") return {0, UTIME_NOW};
  if (word == "omit") return {0, UTIME_OMIT};
  return {static_cast<time_t>(number(word)), 0};
}

const char* type_name(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "reg";
    case S_IFDIR: return "dir";
    case S_IFLNK: return "lnk";
    case S_IFIFO: return "fifo";
    case S_IFSOCK: return "sock";
    case S_IFCHR: return "chr";
    case S_IFBLK: return "blk";
  }
  return "?";
}

std::string octal(unsigned value) {
  std::ostringstream out;
  out << std::oct << value;
  return out.str();
}

// "ENOENT", or the number where glibc has no name for it.
std::string errno_name(int error) {
  const char* name = strerrorname_np(error);
  return name ? name : "errno " + std::to_string(error);
}

// A timestamp a script set (before 2001) is shown; one the filesystem took
// from its clock is "now", as the two clocks differ.
std::string time_text(const timespec& t) {
  return t.tv_sec < 1'000'000'000 ? std::to_string(t.tv_sec) : "now";
}

// What stat shows that the two filesystems must agree on; no size for a
// directory (each filesystem sizes its directories its own way), no atime
// (mimicfs keeps no access times: `times` shows them where a script set them).
std::string describe(const struct stat& st) {
  std::ostringstream out;
  out << type_name(st.st_mode) << ' ' << octal(st.st_mode & 07777) << ' ' << st.st_uid << ':'
      << st.st_gid;
  if (!S_ISDIR(st.st_mode)) out << " size=" << st.st_size;
  out << " nlink=" << st.st_nlink;
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    out << " rdev=" << major(st.st_rdev) << ',' << minor(st.st_rdev);
  }
  out << " mtime=" << time_text(st.st_mtim);
  return out.str();
}

// Bytes a write puts at `offset`: a pattern that says where it was written.
std::string pattern(uint64_t offset, size_t length) {
  std::string data(length, '\0');
  for (size_t i = 0; i < length; ++i) data[i] = static_cast<char>('a' + (offset + i) % 26);
  return data;
}

// FNV-1a of what a read returned: equal contents, equal text.
std::string digest(std::string_view data) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : data) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::ostringstream out;
  out << data.size() << ":" << std::hex << h;
  return out.str();
}

// The xattr names a listing shows, sorted; `security.selinux` and the like
// are a host's, not a filesystem's, and are left out.
std::vector<std::string> xattr_names(const std::string& path) {
  std::string buffer(65536, '\0');
  const ssize_t n = llistxattr(path.c_str(), buffer.data(), buffer.size());
  if (n < 0) return {errno_name(errno)};
  std::vector<std::string> names;
  for (const std::string& name : split(std::string_view(buffer.data(), n), '\0')) {
    if (!name.empty() && name != "security.selinux") names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) text += (text.empty() ? "" : ",") + w;
  return "[" + text + "]";
}

void list_state(const std::string& path, const std::string& shown,
                std::vector<std::string>& lines) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return;
  std::string line = shown + " " + describe(st);
  if (S_ISLNK(st.st_mode)) {
    std::string target(4096, '\0');
    const ssize_t n = readlink(path.c_str(), target.data(), target.size());
    if (n >= 0) line += " -> " + target.substr(0, n);
  }
  std::vector<std::string> values;
  for (const std::string& name : xattr_names(path)) {
    std::string value(65536, '\0');
    const ssize_t n = lgetxattr(path.c_str(), name.c_str(), value.data(), value.size());
    values.push_back(name + "=" + (n < 0 ? errno_name(errno) : value.substr(0, n)));
  }
  if (!values.empty()) line += " xattrs=" + join(values);
  lines.push_back(line);
  if (!S_ISDIR(st.st_mode)) return;
  DIR* dir = opendir(path.c_str());
  if (!dir) return;
  std::vector<std::string> names;
  while (const dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.emplace_back(e->d_name);
    }
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    list_state(path + "/" + name, (shown == "." ? "" : shown + "/") + name, lines);
  }
}

// Runs the statements in the current directory, in the child: every result
// goes to `out` as it comes.
class Interpreter {
 public:
  explicit Interpreter(int out) : out_(out) {}

  void run(const std::vector<Statement>& statements) {
    for (const Statement& s : statements) {
      become(s.as);
      std::string result;
      try {
        result = execute(s.words);
      } catch (const ScriptError& e) {
        // A mistake in the script, not a result: the script fails.
        become({});
        emit(std::string(kScriptError) + s.text + ": " + e.what());
        break;
      }
      become({});
      emit(s.text + " -> " + result);
    }
    for (auto& [slot, fd] : fds_) close(fd);
    std::vector<std::string> lines;
    list_state(".", ".", lines);
    for (const std::string& line : lines) emit("= " + line);
  }

 private:
  void emit(const std::string& line) {
    const std::string text = line + "\n";
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(out_, text.data() + done, text.size() - done);
      if (n <= 0) _exit(3);
      done += n;
    }
  }

  // Root is uid, gid and saved ids 0; a user keeps saved uid 0 to come back.
  static void become(const Credentials& c) {
    if (setresuid(0, 0, 0) != 0 || setresgid(0, 0, 0) != 0) _exit(4);
    if (setgroups(c.groups.size(), c.groups.data()) != 0) _exit(4);
    if (c.uid == 0 && c.gid == 0) return;
    if (setresgid(c.gid, c.gid, 0) != 0 || setresuid(c.uid, c.uid, 0) != 0) _exit(4);
  }

  static std::string failed() { return errno_name(errno); }
  static std::string status(int rc) { return rc < 0 ? failed() : "ok"; }
  static std::string count(ssize_t n) { return n < 0 ? failed() : "ok " + std::to_string(n); }

  // The descriptor an earlier open kept as `slot`; -1 (so the call fails
  // with EBADF on both sides) where that open failed or none was made.
  int fd(const std::string& slot) {
    auto it = fds_.find(slot);
    return it == fds_.end() ? -1 : it->second;
  }

  static void need(const std::vector<std::string>& w, size_t low, size_t high) {
    if (w.size() < low + 1 || w.size() > high + 1) {
      throw ScriptError(w[0] + ": wrong number of arguments");
    }
  }

  std::string xattr_statement(const std::vector<std::string>& w, bool follow) {
    const std::string& op = w[0];
    const std::string path = path_arg(w[1]);
    if (op.ends_with("setxattr")) {
      need(w, 3, 4);
      int flags = 0;
      if (w.size() == 5) flags = w[4] == "create" ? XATTR_CREATE : w[4] == "replace" ? XATTR_REPLACE : -1;
      if (flags < 0) throw ScriptError("setxattr flag: " + w[4]);
      const std::string& v = w[3] == "''" ? std::string() : w[3];
      return status(follow ? setxattr(path.c_str(), w[2].c_str(), v.data(), v.size(), flags)
                           : lsetxattr(path.c_str(), w[2].c_str(), v.data(), v.size(), flags));
    }
    if (op.ends_with("getxattr")) {
      need(w, 2, 2);
      std::string value(65536, '\0');
      const ssize_t n = follow ? getxattr(path.c_str(), w[2].c_str(), value.data(), value.size())
                               : lgetxattr(path.c_str(), w[2].c_str(), value.data(), value.size());
      return n < 0 ? failed() : "ok " + value.substr(0, n);
    }
    if (op.ends_with("listxattr")) {
      need(w, 1, 1);
      std::string buffer(65536, '\0');
      const ssize_t n = follow ? listxattr(path.c_str(), buffer.data(), buffer.size())
                               : llistxattr(path.c_str(), buffer.data(), buffer.size());
      if (n < 0) return failed();
      std::vector<std::string> names;
      for (const std::string& name : split(std::string_view(buffer.data(), n), '\0')) {
        if (!name.empty() && name != "security.selinux") names.push_back(name);
      }
      std::sort(names.begin(), names.end());
      return "ok " + join(names);
    }
    need(w, 2, 2);
    return status(follow ? removexattr(path.c_str(), w[2].c_str())
                         : lremovexattr(path.c_str(), w[2].c_str()));
  }

  std::string execute(const std::vector<std::string>& w) {
    const std::string& op = w[0];
    auto p = [&](size_t i) { return path_arg(w.at(i)); };
    auto mode = [&](size_t i) { return static_cast<mode_t>(std::stoul(w.at(i), nullptr, 8)); };
    if (op == "creat") {
      need(w, 2, 2);
      // O_NONBLOCK: on a fifo with no reader, ENXIO rather than a wait.
      const int f = open(p(1).c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_NONBLOCK, mode(2));
      if (f < 0) return failed();
      return status(close(f));
    }
    if (op == "open") {
      need(w, 3, 4);
      if (fds_.contains(w[1])) throw ScriptError("descriptor " + w[1] + " is open");
      const int f = open(p(2).c_str(), open_flags(w[3]), w.size() == 5 ? mode(4) : 0);
      if (f < 0) return failed();
      fds_[w[1]] = f;
      return "ok";
    }
    if (op == "close") {
      need(w, 1, 1);
      const int f = fd(w[1]);
      fds_.erase(w[1]);
      return f < 0 ? "EBADF" : status(close(f));
    }
    if (op == "fsync") return need(w, 1, 1), status(fsync(fd(w[1])));
    if (op == "fdatasync") return need(w, 1, 1), status(fdatasync(fd(w[1])));
    if (op == "write" || op == "pwrite") {
      const bool positioned = op == "pwrite";
      need(w, positioned ? 3 : 2, positioned ? 3 : 2);
      const int f = fd(w[1]);
      const uint64_t offset = positioned ? number(w[2]) : 0;
      const std::string data = pattern(offset, number(w[positioned ? 3 : 2]));
      return count(positioned ? pwrite(f, data.data(), data.size(), offset)
                              : ::write(f, data.data(), data.size()));
    }
    if (op == "read" || op == "pread") {
      const bool positioned = op == "pread";
      need(w, positioned ? 3 : 2, positioned ? 3 : 2);
      std::string data(number(w[positioned ? 3 : 2]), '\0');
      const ssize_t n = positioned ? pread(fd(w[1]), data.data(), data.size(), number(w[2]))
                                   : ::read(fd(w[1]), data.data(), data.size());
      return n < 0 ? failed() : "ok " + digest(std::string_view(data.data(), n));
    }
    if (op == "ftruncate") return need(w, 2, 2), status(ftruncate(fd(w[1]), number(w[2])));
    if (op == "truncate") return need(w, 2, 2), status(truncate(p(1).c_str(), number(w[2])));
    if (op == "fallocate") {
      need(w, 4, 4);
      return status(fallocate(fd(w[1]), fallocate_mode(w[2]), number(w[3]), number(w[4])));
    }
    if (op == "copy") {
      need(w, 3, 3);
      return count(copy_file_range(fd(w[1]), nullptr, fd(w[2]), nullptr, number(w[3]), 0));
    }
    if (op == "fchmod") return need(w, 2, 2), status(fchmod(fd(w[1]), mode(2)));
    if (op == "fchown") return need(w, 3, 3), status(fchown(fd(w[1]), owner_id(w[2]), owner_id(w[3])));
    if (op == "chmod") return need(w, 2, 2), status(chmod(p(1).c_str(), mode(2)));
    if (op == "chown") return need(w, 3, 3), status(chown(p(1).c_str(), owner_id(w[2]), owner_id(w[3])));
    if (op == "lchown") return need(w, 3, 3), status(lchown(p(1).c_str(), owner_id(w[2]), owner_id(w[3])));
    if (op == "mkdir") return need(w, 2, 2), status(mkdir(p(1).c_str(), mode(2)));
    if (op == "rmdir") return need(w, 1, 1), status(rmdir(p(1).c_str()));
    if (op == "unlink") return need(w, 1, 1), status(unlink(p(1).c_str()));
    if (op == "mknod") {
      need(w, 3, 3);
      static const std::map<std::string, std::pair<mode_t, dev_t>> types = {
          {"fifo", {S_IFIFO, 0}}, {"sock", {S_IFSOCK, 0}}, {"reg", {S_IFREG, 0}},
          {"chr", {S_IFCHR, makedev(1, 3)}}, {"blk", {S_IFBLK, makedev(7, 200)}}};
      auto type = types.find(w[2]);
      if (type == types.end()) throw ScriptError("mknod type: " + w[2]);
      return status(mknod(p(1).c_str(), type->second.first | mode(3), type->second.second));
    }
    if (op == "symlink") return need(w, 2, 2), status(symlink(p(1).c_str(), p(2).c_str()));
    if (op == "link") return need(w, 2, 2), status(link(p(1).c_str(), p(2).c_str()));
    if (op == "linkfd") {
      need(w, 2, 2);
      if (fd(w[1]) < 0) return "EBADF";
      const std::string proc = "/proc/self/fd/" + std::to_string(fd(w[1]));
      return status(linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, p(2).c_str(), AT_SYMLINK_FOLLOW));
    }
    if (op == "readlink") {
      need(w, 1, 1);
      std::string target(4096, '\0');
      const ssize_t n = readlink(p(1).c_str(), target.data(), target.size());
      return n < 0 ? failed() : "ok " + target.substr(0, n);
    }
    if (op == "rename") {
      need(w, 2, 3);
      unsigned flags = 0;
      if (w.size() == 4) {
        if (w[3] == "noreplace") flags = RENAME_NOREPLACE;
        else if (w[3] == "exchange") flags = RENAME_EXCHANGE;
        else throw ScriptError("rename flag: " + w[3]);
      }
      return status(renameat2(AT_FDCWD, p(1).c_str(), AT_FDCWD, p(2).c_str(), flags));
    }
    if (op == "utimens" || op == "futimens") {
      const bool by_fd = op == "futimens";
      need(w, 3, by_fd ? 3 : 4);
      const timespec times[2] = {time_arg(w[2]), time_arg(w[3])};
      if (by_fd) return status(futimens(fd(w[1]), times));
      if (w.size() == 5 && w[4] != "nofollow") throw ScriptError("utimens flag: " + w[4]);
      return status(utimensat(AT_FDCWD, p(1).c_str(), times,
                              w.size() == 5 ? AT_SYMLINK_NOFOLLOW : 0));
    }
    static const std::map<std::string, bool> kXattrCalls = {
        {"setxattr", true},   {"getxattr", true},   {"listxattr", true},   {"removexattr", true},
        {"lsetxattr", false}, {"lgetxattr", false}, {"llistxattr", false}, {"lremovexattr", false}};
    if (auto call = kXattrCalls.find(op); call != kXattrCalls.end()) {
      if (w.size() < 2) throw ScriptError(op + ": no path");
      return xattr_statement(w, call->second);
    }
    if (op == "stat" || op == "lstat") {
      need(w, 1, 1);
      struct stat st {};
      const int rc = op == "stat" ? stat(p(1).c_str(), &st) : lstat(p(1).c_str(), &st);
      return rc < 0 ? failed() : "ok " + describe(st);
    }
    if (op == "times") {
      need(w, 1, 1);
      struct stat st {};
      if (lstat(p(1).c_str(), &st) < 0) return failed();
      return "ok atime=" + time_text(st.st_atim) + " mtime=" + time_text(st.st_mtim);
    }
    if (op == "access") {
      need(w, 2, 2);
      int how = 0;
      for (const char c : w[2]) {
        how |= c == 'r' ? R_OK : c == 'w' ? W_OK : c == 'x' ? X_OK : c == 'f' ? F_OK : -1;
      }
      if (how < 0) throw ScriptError("access mode: " + w[2]);
      return status(access(p(1).c_str(), how));
    }
    if (op == "readdir") {
      need(w, 1, 1);
      DIR* dir = opendir(p(1).c_str());
      if (!dir) return failed();
      std::vector<std::string> names;
      while (const dirent* e = readdir(dir)) names.emplace_back(e->d_name);
      closedir(dir);
      std::sort(names.begin(), names.end());
      return "ok " + join(names);
    }
    if (op == "umask") return need(w, 1, 1), (umask(mode(1)), "ok");
    throw ScriptError("unknown operation: " + op);
  }

  const int out_;
  std::map<std::string, int> fds_;
};

}  // namespace

Transcript run(const Script& script, const std::string& dir) {
  Transcript transcript;
  std::vector<Statement> statements;
  try {
    statements = parse(script.text);
  } catch (const ScriptError& e) {
    transcript.error = e.what();
    return transcript;
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    close(pipe_fds[0]);
    umask(0);
    if (chdir(dir.c_str()) != 0) _exit(5);
    Interpreter(pipe_fds[1]).run(statements);
    _exit(0);
  }
  close(pipe_fds[1]);
  // A call that never returns (a hung mount) fails the script, not the suite.
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{pipe_fds[0], POLLIN, 0};
    const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      kill(child, SIGKILL);
      transcript.error = "timed out after 20 s";
      break;
    }
    char buffer[4096];
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buffer, n);
  }
  close(pipe_fds[0]);
  // A killed child still closes its files, which on a hung mount may wait on
  // a request no signal ends: it is reaped for 10 s at most, then left.
  // The first waits are short: a script that ended is reaped within
  // microseconds, and a fixed 10 ms wait cost the suite a minute.
  int wait_status = 0;
  bool reaped = false;
  const auto reap_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (useconds_t pause = 20; !reaped && std::chrono::steady_clock::now() < reap_deadline;
       pause = std::min<useconds_t>(pause * 2, 10'000)) {
    const pid_t done = waitpid(child, &wait_status, WNOHANG);
    reaped = done == child || (done < 0 && errno != EINTR);
    if (!reaped) usleep(pause);
  }
  if (!reaped) {
    transcript.error += " (the script's process could not be reaped: the mount hangs)";
  } else if (transcript.error.empty() &&
             !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)) {
    transcript.error = "the script's process ended with status " + std::to_string(wait_status);
  }
  for (const std::string& line : split(output, '\n')) {
    if (line.empty()) continue;
    if (line.starts_with(kScriptError)) {
      transcript.error = line;
      continue;
    }
    (line.starts_with("= ") ? transcript.state : transcript.steps).push_back(line);
  }
  return transcript;
}

}  // namespace mimicfs::conformance
