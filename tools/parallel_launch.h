// Tensor parallelism in the model-loading subcommands: the options, and what each process of a
// parallel job does first.
//
//   inflight serve --tensor-parallel-size 4 ...         starts the 4 ranks of this node itself:
//                                                       it runs `mpirun -np 4 <the same command>`
//   mpirun -np 16 --hostfile hosts inflight serve -tp 16 ranks across nodes: MPI gives the ranks
//
// Under mpirun, rank 0 goes on (it serves) and every other rank loads its shard and runs the
// steps rank 0 sends (Engine::run_worker); those ranks ignore SIGINT, SIGTERM and SIGUSR1. Rank
// 0 drains on SIGUSR1 as on SIGTERM, then stops them: SIGUSR1 is what mpirun forwards to its
// ranks (SIGTERM to mpirun kills the job), and what the launching process sends mpirun when it
// gets SIGINT or SIGTERM itself.
#pragma once

#include <cstdint>
#include <optional>

#include "inflight/config.h"

namespace CLI {
class App;
}

namespace inflight::tools {

// --tensor-parallel-size and --pipeline-parallel-size (ModelSource's fields of those names; main()
// also takes vLLM's -tp and -pp for them), and --max-num-micro-batches (EngineConfig's).
void add_parallel_options(CLI::App& app, int32_t& tensor_parallel_size,
                          int32_t& pipeline_parallel_size, int32_t& max_num_micro_batches);

// The command line main() was given (mpirun reruns it).
void set_command_line(int argc, char** argv);

// Outside mpirun, for more than one rank: runs this command line under mpirun on `ranks` local
// ranks and returns the job's exit code. Otherwise nullopt: this process is a rank (or the only
// one) and goes on.
std::optional<int> launch_ranks(int ranks);

// For a source of more than one rank: outside mpirun, runs this command line under mpirun on
// tensor_parallel_size x pipeline_parallel_size local ranks and returns the job's exit code;
// under mpirun, initialises MPI and, on ranks other than 0, runs Engine::run_worker and returns
// its exit code. nullopt: this process goes on as rank 0 or as the only one.
std::optional<int> start_parallel_job(const ModelSource& source);

// The exit code of this process: a rank of a parallel job that fails (`rc` != 0) ends the whole
// job instead (MPI_Abort, mpirun then exits non-zero): the other ranks may be waiting for it in
// a collective, and MPI_Finalize waits for every rank. Not once the job is over for every rank
// (World::ended: a rank failed to load, and every rank knows it): each exits with its code.
int exit_code(int rc);

}  // namespace inflight::tools
