#include "parallel/world.h"

#include <mpi.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/logging.h"
#include "parallel/mpi_communicator.h"

namespace inflight {
namespace {

constexpr int kControlTag = 7001;

// The job's communicator: MPI_COMM_WORLD under mpirun; for a job that World::spawn_workers
// started, the spawning process (rank 0) and its workers merged into one.
MPI_Comm g_job = MPI_COMM_WORLD;
MPI_Comm g_roll_call = MPI_COMM_NULL;  // a copy of g_job for the roll calls alone
bool g_spawned_job = false;            // g_job joins a spawner and its workers
constexpr int kAsk = 1;                // a roll call: int id
constexpr int kHere = 2;               // its answer: the id back

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  INFLIGHT_THROW(ErrorCode::kInternal, "{} failed: {}", call, mpi_error(rc));
}

// Calls `done` until it returns true: busily for a moment (steps come back to back), then with
// short sleeps, so that a rank waiting long does not hold a core.
template <typename F>
void poll_until(F&& done) {
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
  while (!done()) {
    if (std::chrono::steady_clock::now() > spin_until) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// World::spawn_workers' request, read once by the World it constructs.
struct SpawnRequest {
  int ranks = 1;
  std::vector<std::string> command;
};
std::optional<SpawnRequest>& pending_spawn() {
  static std::optional<SpawnRequest> request;
  return request;
}

// Starts request.ranks - 1 processes running `command` and makes them, with this process as
// rank 0, the job. A failure is an error here, not the end of this process.
void spawn(const SpawnRequest& request) {
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  std::vector<std::string> args(request.command.begin() + 1, request.command.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  MPI_Info info;
  MPI_Info_create(&info);
  // As `inflight serve` runs mpirun: more ranks than cores allowed, no pinning to one core.
  MPI_Info_set(info, "map_by", "slot:OVERSUBSCRIBE");
  MPI_Info_set(info, "bind_to", "none");
  const int workers = request.ranks - 1;
  std::vector<int> codes(static_cast<size_t>(workers), MPI_SUCCESS);
  MPI_Comm inter;
  const int rc = MPI_Comm_spawn(request.command[0].c_str(), argv.data(), workers, info, 0,
                                MPI_COMM_SELF, &inter, codes.data());
  MPI_Info_free(&info);
  int failed = rc;
  for (int code : codes) {
    if (failed == MPI_SUCCESS) failed = code;
  }
  INFLIGHT_CHECK_CODE(failed == MPI_SUCCESS, ErrorCode::kUnsupported,
                      "could not start {} worker processes ({}): {}; Open MPI's orted must be on "
                      "PATH (openmpi-bin)",
                      workers, request.command[0], mpi_error(failed));
  check_mpi(MPI_Intercomm_merge(inter, /*high=*/0, &g_job), "MPI_Intercomm_merge");
  MPI_Comm_free(&inter);
  g_spawned_job = true;
}

// Receives every message of `tag` (one int each) already waiting on the roll-call
// communicator, calling f(source, value) for each.
template <typename F>
void take_roll_call_messages(int tag, F&& f) {
  int pending = 0;
  MPI_Status status;
  while (MPI_Iprobe(MPI_ANY_SOURCE, tag, g_roll_call, &pending, &status) == MPI_SUCCESS &&
         pending != 0) {
    int value = 0;
    MPI_Recv(&value, 1, MPI_INT, status.MPI_SOURCE, tag, g_roll_call, MPI_STATUS_IGNORE);
    f(status.MPI_SOURCE, value);
  }
}

// This machine and the process ids this process sees: the host name and the pid namespace
// ("vm pid:[4026531836]"); empty when either is unknown. Two ranks that give the same string can
// tell whether the other's process still runs.
std::string machine() {
  char host[256] = {};
  char ns[64] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (n <= 0) return {};
  return fmt::format("{} {}", host, std::string(ns, static_cast<size_t>(n)));
}

// Whether MPI still runs (the job may have ended while a watchdog thread wakes).
bool mpi_running() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized == 0;
}

}  // namespace

bool World::launched_by_mpi() {
  return env("OMPI_COMM_WORLD_SIZE") != nullptr || env("PMIX_RANK") != nullptr ||
         env("PMI_RANK") != nullptr;
}

int World::environment_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = env(name)) return std::atoi(v);
  }
  return 0;
}

int World::environment_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    if (const char* v = env(name)) return std::atoi(v);
  }
  return 1;
}

World& World::get() {
  static World world(launched_by_mpi() || pending_spawn().has_value());
  return world;
}

World& World::spawn_workers(int ranks, std::vector<std::string> command) {
  INFLIGHT_CHECK_CODE(!pending_spawn(), ErrorCode::kInvalidArgument,
                      "this process has already started a parallel job (one per process): run "
                      "another in a new process");
  INFLIGHT_CHECK_CODE(!launched_by_mpi(), ErrorCode::kInvalidArgument,
                      "this process is a rank of an mpirun job: its ranks are already started");
  INFLIGHT_CHECK_CODE(ranks >= 2 && !command.empty(), ErrorCode::kInvalidArgument,
                      "spawning workers needs at least 2 ranks and a command");
  if (::geteuid() == 0) {  // Open MPI refuses root unless told (inflight serve passes the flag)
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  pending_spawn() = SpawnRequest{ranks, std::move(command)};
  World& world = get();
  INFLIGHT_CHECK_CODE(world.size() == ranks, ErrorCode::kInvalidArgument,
                      "this process already runs a parallel job of {} ranks; one per process",
                      world.size());
  return world;
}

World& World::single() {
  static World world(false);
  return world;
}

World::World(bool use_mpi) {
  if (!use_mpi) return;
  // The engine thread of rank 0 sends and reduces while other threads run: every MPI call may
  // come from any thread.
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  std::atexit(finalize_mpi);
  INFLIGHT_CHECK_CODE(provided >= MPI_THREAD_MULTIPLE, ErrorCode::kUnsupported,
                      "this MPI library does not support MPI_THREAD_MULTIPLE (level {})", provided);
  if (pending_spawn()) {
    spawn(*pending_spawn());
  } else {
    MPI_Comm parent;  // a worker of World::spawn_workers: join its spawner's job
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
      check_mpi(MPI_Intercomm_merge(parent, /*high=*/1, &g_job), "MPI_Intercomm_merge");
      g_spawned_job = true;
    }
  }
  mpi_ = true;
  MPI_Comm_rank(g_job, &rank_);
  MPI_Comm_size(g_job, &size_);
  MPI_Comm node;
  MPI_Comm_split_type(g_job, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
  // A failed call ends the job with MPI's message instead of returning an error code nobody
  // could act on with the other ranks waiting.
  MPI_Comm_set_errhandler(g_job, MPI_ERRORS_ARE_FATAL);
  check_mpi(MPI_Comm_dup(g_job, &g_roll_call), "MPI_Comm_dup");
  const std::string here = machine();
  const std::vector<std::string> all = all_gather(fmt::format("{} {}", ::getpid(), here));
  for (const std::string& peer : all) {
    const size_t space = peer.find(' ');
    const bool local = !here.empty() && peer.substr(space + 1) == here;
    local_pids_.push_back(local ? std::stoi(peer.substr(0, space)) : 0);
  }
}

std::vector<int> World::gone_ranks() const {
  std::vector<int> gone;
  for (int r = 0; r < static_cast<int>(local_pids_.size()); ++r) {
    const int pid = local_pids_[static_cast<size_t>(r)];
    if (r != rank_ && pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) gone.push_back(r);
  }
  return gone;
}

void World::answer_roll_calls() {
  if (!mpi_ || !mpi_running()) return;
  take_roll_call_messages(kAsk, [](int source, int id) {
    MPI_Send(&id, 1, MPI_INT, source, kHere, g_roll_call);  // small: sent eagerly
  });
}

std::vector<int> World::silent_ranks(std::chrono::milliseconds grace) {
  if (!mpi_ || !mpi_running()) return {};
  static std::atomic<int> calls{0};
  const int id = ++calls;
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) MPI_Send(&id, 1, MPI_INT, q, kAsk, g_roll_call);
  }
  std::vector<bool> heard(static_cast<size_t>(size_), false);
  heard[static_cast<size_t>(rank_)] = true;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline &&
         std::find(heard.begin(), heard.end(), false) != heard.end()) {
    answer_roll_calls();  // the others may be calling the roll too
    take_roll_call_messages(kHere, [&](int source, int answer) {
      if (answer == id) heard[static_cast<size_t>(source)] = true;  // not an earlier call's
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<int> silent;
  for (int q = 0; q < size_; ++q) {
    if (!heard[static_cast<size_t>(q)]) silent.push_back(q);
  }
  return silent;
}

// Rank 0's control messages on their way: one send per other rank each, completed oldest first
// by a thread of their own (the courier), so that they move while the thread that posted them
// waits on its device. MPI reads a message's bytes until its requests complete.
struct World::Courier {
  struct Posted {
    std::vector<uint8_t> bytes;
    std::vector<MPI_Request> requests;  // [size - 1]
  };
  std::mutex mutex;
  std::condition_variable changed;  // a message posted or taken, or the courier told to stop
  std::deque<std::unique_ptr<Posted>> posted;  // oldest first; the front is being completed
  bool stop = false;
  std::thread thread;

  Courier() : thread([this] { run(); }) {}
  ~Courier() {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    changed.notify_all();
    thread.join();
  }

  void run() {
    std::unique_lock lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return stop || !posted.empty(); });
      if (stop) return;  // messages still on their way at exit: the ranks are gone
      std::vector<MPI_Request>& requests = posted.front()->requests;
      lock.unlock();
      int done = 0;
      poll_until([&] {
        check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                              MPI_STATUSES_IGNORE),
                  "MPI_Testall");
        return done != 0 || stopping();
      });
      lock.lock();
      if (done) posted.pop_front();
      changed.notify_all();
    }
  }

  bool stopping() {
    std::lock_guard lock(mutex);
    return stop;
  }
};

World::~World() = default;

void World::post_to_all(std::vector<uint8_t> bytes) {
  INFLIGHT_CHECK(rank_ == 0, "only rank 0 sends control messages");
  if (size_ == 1) return;
  if (courier_ == nullptr) courier_ = std::make_unique<Courier>();
  auto p = std::make_unique<Courier::Posted>();
  p->bytes = std::move(bytes);
  p->requests.resize(static_cast<size_t>(size_ - 1));
  for (int r = 1; r < size_; ++r) {
    check_mpi(MPI_Isend(p->bytes.data(), static_cast<int>(p->bytes.size()), MPI_BYTE, r,
                        kControlTag, g_job, &p->requests[static_cast<size_t>(r - 1)]),
              "MPI_Isend");
  }
  {
    std::lock_guard lock(courier_->mutex);
    courier_->posted.push_back(std::move(p));
  }
  courier_->changed.notify_all();
}

void World::wait_posted() {
  if (courier_ == nullptr) return;
  std::unique_lock lock(courier_->mutex);
  courier_->changed.wait(lock, [&] { return courier_->posted.empty(); });
}

void World::send_to_all(std::vector<uint8_t> bytes) {
  post_to_all(std::move(bytes));
  wait_posted();
}

std::vector<uint8_t> World::receive_from_root() {
  INFLIGHT_CHECK(rank_ != 0 && mpi_, "rank 0 does not receive control messages");
  MPI_Status status;
  int ready = 0;
  poll_until([&] {
    check_mpi(MPI_Iprobe(0, kControlTag, g_job, &ready, &status), "MPI_Iprobe");
    return ready != 0;
  });
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  std::vector<uint8_t> bytes(static_cast<size_t>(count));
  check_mpi(MPI_Recv(bytes.data(), count, MPI_BYTE, 0, kControlTag, g_job, MPI_STATUS_IGNORE),
            "MPI_Recv");
  return bytes;
}

int64_t World::min_over_ranks(int64_t value) {
  if (!mpi_) return value;
  int64_t out = value;
  check_mpi(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MIN, g_job), "MPI_Allreduce");
  return out;
}

std::vector<std::string> World::all_gather(const std::string& text) {
  if (!mpi_) return {text};
  const int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
  check_mpi(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, g_job), "MPI_Allgather");
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[static_cast<size_t>(r)] = total;
    total += lengths[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  check_mpi(MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(),
                           offsets.data(), MPI_CHAR, g_job),
            "MPI_Allgatherv");
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) {
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                             static_cast<size_t>(lengths[static_cast<size_t>(r)])));
  }
  return out;
}

void World::leave() {
  if (!mpi_ || !g_spawned_job || !mpi_running()) return;
  MPI_Request barrier;
  check_mpi(MPI_Ibarrier(g_job, &barrier), "MPI_Ibarrier");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int done = 0;
  while (MPI_Test(&barrier, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done == 0) {
    if (!gone_ranks().empty() || std::chrono::steady_clock::now() > deadline) {
      INFLIGHT_LOG_WARN(
          "rank {} of {}: not every rank reached the end of the job; leaving MPI "
          "to the exit",
          rank_, size_);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  finalize_mpi();
}

void World::abort(int code) {
  if (mpi_ && mpi_running()) MPI_Abort(g_job, code);
  std::_Exit(code);
}

World::Groups World::make_groups(Backend& backend, int tensor_parallel_size) {
  const int t = tensor_parallel_size;
  INFLIGHT_CHECK_CODE(t >= 1 && size_ % t == 0, ErrorCode::kInvalidArgument,
                      "tensor parallel size {} does not divide the job's {} ranks", t, size_);
  const int stages = size_ / t, stage = stages - 1 - rank_ / t, tp_rank = rank_ % t;
  Groups g;
  g.tp = make_group(backend, stage, tp_rank);
  g.pp = stages > 1 ? make_group(backend, tp_rank, stage) : nullptr;
  return g;
}

std::shared_ptr<Communicator> World::make_group(Backend& backend, int color, int key) {
  if (size_ == 1) return std::make_shared<SingleRankCommunicator>(backend);
  MPI_Comm group;
  check_mpi(MPI_Comm_split(g_job, color, key, &group), "MPI_Comm_split");
  int rank = 0, size = 1;
  MPI_Comm_rank(group, &rank);
  MPI_Comm_size(group, &size);
  std::vector<uint8_t> id;
  if (size > 1 && rank == 0) id = backend.communicator_id();
  auto n = static_cast<int>(id.size());
  check_mpi(MPI_Bcast(&n, 1, MPI_INT, 0, group), "MPI_Bcast");
  std::shared_ptr<Communicator> comm;
  if (size == 1) {
    comm = std::make_shared<SingleRankCommunicator>(backend);
  } else if (n == 0) {  // no device collectives: host memory
    comm = make_mpi_communicator(backend, group);
  } else {
    id.resize(static_cast<size_t>(n));
    check_mpi(MPI_Bcast(id.data(), n, MPI_BYTE, 0, group), "MPI_Bcast");
    comm = backend.make_communicator(rank, size, id);
  }
  MPI_Comm_free(&group);
  return comm;
}

}  // namespace inflight
