#include "tools/parallel_launch.h"

#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/logging.h"
#include "inflight/engine.h"
#include "parallel/world.h"

namespace inflight::tools {
namespace {

std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}

pid_t g_mpirun = 0;  // the job's mpirun, while it runs
volatile sig_atomic_t g_signals = 0;

// SIGINT/SIGTERM to the launcher: the first asks the job to drain (SIGUSR1, which mpirun
// forwards to every rank: rank 0 drains and then stops the others), a second ends it at once.
void forward_signal(int) {
  if (g_mpirun > 0) ::kill(g_mpirun, ++g_signals == 1 ? SIGUSR1 : SIGTERM);
}

// Runs `mpirun -np ranks <command line>` on this node and returns its exit code.
int run_under_mpirun(int ranks) {
  const char* mpirun_env = std::getenv("INFLIGHT_MPIRUN");
  const std::string mpirun = mpirun_env != nullptr && *mpirun_env ? mpirun_env : "mpirun";
  std::vector<std::string> args = {mpirun, "-np", std::to_string(ranks),
                                   // More ranks than cores is allowed (CPU ranks, tests); a rank
                                   // is not pinned to a core (its threads use several).
                                   "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) args.emplace_back("--allow-run-as-root");
  for (const std::string& a : command_line()) args.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  INFLIGHT_LOG_INFO("starting {} ranks: {} -np {} ...", ranks, mpirun, ranks);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  INFLIGHT_CHECK_CODE(child >= 0, ErrorCode::kInternal, "fork: {}", std::strerror(errno));
  if (child == 0) {
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr,
                 "error: cannot run '%s' to start %d ranks (%s): install Open MPI (openmpi-bin) "
                 "or set INFLIGHT_MPIRUN\n",
                 mpirun.c_str(), ranks, std::strerror(errno));
    std::_Exit(127);
  }
  g_mpirun = child;
  std::signal(SIGINT, forward_signal);
  std::signal(SIGTERM, forward_signal);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_mpirun = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void add_parallel_options(CLI::App& app, int32_t& tensor_parallel_size,
                          int32_t& pipeline_parallel_size, int32_t& max_num_micro_batches) {
  app.add_option("--tensor-parallel-size", tensor_parallel_size,
                 "Split the model over this many GPUs (or CPU processes), one process each "
                 "(started with mpirun, docs/deploy.md)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--pipeline-parallel-size", pipeline_parallel_size,
                 "Split the layers into this many pipeline stages, each of "
                 "--tensor-parallel-size GPUs")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--max-num-micro-batches", max_num_micro_batches,
                 "Steps in flight at once through the pipeline stages, each over its own "
                 "sequences (0: one per stage; 1: one step at a time)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
}

void set_command_line(int argc, char** argv) {
  command_line().assign(argv, argv + argc);
}

std::optional<int> launch_ranks(int ranks) {
  if (ranks <= 1 || World::launched_by_mpi()) return std::nullopt;
  return run_under_mpirun(ranks);
}

int exit_code(int rc) {
  if (rc == 0 || !World::launched_by_mpi() || World::environment_size() == 1) return rc;
  if (World::get().ended()) return rc;  // no rank waits for this one any more
  std::fprintf(stderr, "error: rank %d of %d failed (exit code %d): stopping every rank\n",
               World::environment_rank(), World::environment_size(), rc);
  World::get().abort(rc);
}

std::optional<int> start_parallel_job(const ModelSource& source) {
  const int ranks = source.tensor_parallel_size * source.pipeline_parallel_size;
  if (ranks <= 1) return std::nullopt;
  if (const std::optional<int> rc = launch_ranks(ranks)) return rc;
  const int rank = Engine::join_parallel_job();
  if (rank == 0) return std::nullopt;
  // Rank 0 stops this rank once it has drained; a signal here would cut a step short.
  for (const int sig : {SIGINT, SIGTERM, SIGUSR1}) std::signal(sig, SIG_IGN);
  const Status s = Engine::run_worker(source);
  if (s.ok()) return 0;
  std::fprintf(stderr, "error: rank %d: %s\n", rank, s.message().c_str());
  return 1;
}

}  // namespace inflight::tools
