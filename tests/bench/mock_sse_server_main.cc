// inflight_mock_sse_server: a fast synthetic OpenAI-style SSE server for measuring the benchmark
// client (bench/client_load.sh) and for the Python tests. Prints "port N" on stdout once it
// listens on 127.0.0.1, then serves until SIGINT or SIGTERM.
//
//   inflight_mock_sse_server [--chunks 16] [--tokens-per-chunk 1] [--interval-us 10000]
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "scripted_sse_server.h"

int main(int argc, char** argv) {
  inflight::bench::testing::SyntheticStreams streams;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--chunks") {
      streams.num_chunks = static_cast<int32_t>(value);
    } else if (flag == "--tokens-per-chunk") {
      streams.tokens_per_chunk = static_cast<int32_t>(value);
    } else if (flag == "--interval-us") {
      streams.interval = std::chrono::microseconds(value);
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // the server thread inherits the mask
  inflight::bench::testing::ScriptedSseServer server(streams);
  std::printf("port %u\n", server.port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}
