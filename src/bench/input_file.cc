#include "bench/input_file.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"

extern char** environ;

namespace inflight::bench {
namespace {

std::string read_plain(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFLIGHT_CHECK_CODE(in.good(), ErrorCode::kNotFound, "cannot open '{}'", path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Runs `xz -dc path` and returns what it writes to stdout.
std::string read_xz(const std::string& path) {
  int fds[2];
  INFLIGHT_CHECK(pipe(fds) == 0, "pipe: {}", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::string arg0 = "xz", arg1 = "-dc", arg2 = path;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "xz", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    INFLIGHT_THROW(ErrorCode::kNotFound, "cannot run xz to read '{}': {} (install xz-utils)", path,
                   std::strerror(rc));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  INFLIGHT_CHECK_CODE(WIFEXITED(status) && WEXITSTATUS(status) == 0, ErrorCode::kInvalidFile,
                      "xz could not decompress '{}'", path);
  return out;
}

}  // namespace

std::string read_input_file(const std::string& path) {
  INFLIGHT_CHECK_CODE(std::filesystem::exists(path), ErrorCode::kNotFound,
                      "file '{}' does not exist", path);
  if (path.size() > 3 && path.ends_with(".xz")) return read_xz(path);
  return read_plain(path);
}

}  // namespace inflight::bench
