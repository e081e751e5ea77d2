// World: the processes of one parallel job, one per device (GPU, or a CPU process), launched
// by mpirun: `mpirun -np N inflight serve --tensor-parallel-size N ...`, or by `inflight serve`
// itself, which runs mpirun for the ranks of one node (tools/parallel_launch.h).
//
// MPI gives each process its rank and host, carries the control messages (rank 0 tells the
// other ranks what to do next: runner_messages.h) and bootstraps the device collectives (NCCL's
// id goes from rank 0 to the others); the collectives of a step then run over NCCL between
// GPUs, or over MPI itself between CPU processes (mpi_communicator.h). Outside mpirun the world
// is this one process and MPI is never initialised, unless the process starts its own workers
// (spawn_workers: the Python LLM with tensor_parallel_size > 1).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/communicator.h"

namespace inflight {

class World {
 public:
  // The job of this process. The first call initialises MPI when the process was launched by
  // mpirun (finalised at exit).
  static World& get();
  // Whether this process was started by mpirun (its environment says so), without touching MPI.
  static bool launched_by_mpi();
  // This process's rank, and the number of processes, as its environment gives them (0 and 1
  // outside mpirun), without touching MPI.
  static int environment_rank();
  static int environment_size();
  // A world of this one process, whatever launched it (MPI untouched).
  static World& single();
  // Outside mpirun: starts `ranks` - 1 processes running `command` (program and arguments; each
  // must join the job, World::get(), as a rank > 0 does under mpirun) with MPI_Comm_spawn, and
  // returns the job they form with this process as rank 0. Call it before get(), once.
  static World& spawn_workers(int ranks, std::vector<std::string> command);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The rank among the processes of this node (the GPU it takes).
  int local_rank() const { return local_rank_; }

  // ---- control plane: small host messages, rank 0 to the others ---------------------------
  // Rank 0: `bytes` to every other rank, without waiting for them to take it: with steps in
  // flight a rank may still be in an earlier step, waiting for rank 0's part of it (a blocking
  // send would then wait for that rank and that rank for rank 0). Every rank receives the
  // messages in the order they were posted. A thread of rank 0 (the courier) sees each message
  // through: MPI moves a large message only while its sender calls into MPI, and rank 0's
  // caller may meanwhile block on its device, for a step whose other stages need this message
  // (or an earlier one) to start.
  void post_to_all(std::vector<uint8_t> bytes);
  // Rank 0: waits until every rank has taken every message posted so far.
  void wait_posted();
  // Rank 0: post_to_all, then wait_posted.
  void send_to_all(std::vector<uint8_t> bytes);
  // Other ranks: the next message from rank 0 (waits; sleeps while idle).
  std::vector<uint8_t> receive_from_root();
  // The least of every rank's `value` (every rank calls it).
  int64_t min_over_ranks(int64_t value);
  // Every rank's `text`, in rank order (every rank calls it).
  std::vector<std::string> all_gather(const std::string& text);
  // ---- roll call: which ranks still answer (for the step watchdog, from a thread of its own) --
  // Answers the roll calls other ranks have sent this one; call it every so often.
  void answer_roll_calls();
  // Calls the roll: the ranks that did not answer within `grace` (this rank answers the others'
  // calls meanwhile). A stopped or gone process does not answer; one whose threads run does,
  // even while its step waits in a collective or on its device.
  std::vector<int> silent_ranks(std::chrono::milliseconds grace);
  // The other ranks whose process ran on this machine and has ended (killed, crashed): noticed at
  // once, where MPI may notice only when a message to it fails, or never (a worker of
  // spawn_workers that dies leaves its spawner waiting). Ranks on other machines: the roll call.
  std::vector<int> gone_ranks() const;
  // Ends every process of the job with `code` (MPI_Abort); a job of one process just exits.
  [[noreturn]] void abort(int code);
  // Once the job is over for every rank (rank 0 has told the others to stop, or every rank
  // knows that one failed to load): no rank waits for another any more, and this process cannot
  // run another engine (one parallel job per process).
  void end() { ended_ = true; }
  bool ended() const { return ended_.load(); }
  // Every process of a job that spawn_workers started calls this once the job has ended (rank
  // 0 after telling the others to stop, the others once stopped): they meet in a barrier and
  // finalize MPI together, as MPI_Finalize makes the ranks of an mpirun job do. Spawned workers
  // are an MPI job of their own, whose MPI_Finalize would not wait for the spawner's; workers
  // that finalize (closing their connections) while the spawner's MPI runs on can leave the
  // spawner's own MPI_Finalize spinning at exit (Open MPI). No MPI call may follow, from any
  // thread. A no-op for other jobs; gives up the barrier (MPI left to exit) when a rank's
  // process has ended or after 30 s.
  void leave();

  // This rank's groups in a job of tensor_parallel_size x (size() / tensor_parallel_size)
  // pipeline stages: rank g is tensor-parallel rank g % T of stage P - 1 - g / T (so rank 0,
  // which samples, is on the last stage). Every rank calls it, in the same order. Collectives go
  // through the backend's own communicator (NCCL on CUDA) or MPI's over host memory (the CPU).
  struct Groups {
    std::shared_ptr<Communicator> tp;  // the ranks of this stage (a single rank when T = 1)
    std::shared_ptr<Communicator> pp;  // this tensor-parallel rank of every stage, rank s =
                                       // stage s (null when there is one stage)
  };
  Groups make_groups(Backend& backend, int tensor_parallel_size);

 private:
  explicit World(bool use_mpi);
  // The ranks of MPI_Comm_split(world, color, key), over `backend`'s tensors.
  std::shared_ptr<Communicator> make_group(Backend& backend, int color, int key);
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  bool mpi_ = false;
  std::atomic<bool> ended_ = false;  // read by the step watchdog's thread
  // Per rank: its process id, when it runs on this machine (in this process's view of process
  // ids), else 0.
  std::vector<int> local_pids_;
  // Rank 0: the messages posted and not yet taken by every rank, and the thread that sees them
  // through (world.cc: this header keeps MPI's types out of its includers).
  struct Courier;
  std::unique_ptr<Courier> courier_;
};

}  // namespace inflight
