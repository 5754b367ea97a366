// MPI start-up, communicator ownership and job abort (see mpi_world.h).
#include "actors/transport/mpi_world.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <utility>

#include "actors/transport/mpi_check.h"
#include "runtime/core/error.h"

namespace ssd {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  fail(fmt::format("MPI error {} ({}) in {} at {}:{}", code, std::string(text, len), call, file,
                   line));
}

namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

}  // namespace

// ---- MpiSession ---------------------------------------------------------------------------------

namespace {

// Ends this process if MPI_Init has not returned `seconds` after construction (mpi_world.h).
class InitDeadline {
 public:
  explicit InitDeadline(double seconds) {
    if (seconds <= 0) return;
    watcher_ = std::thread([this, seconds] {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; }))
        return;
      fmt::print(stderr,
                 "ssd: rank {} of {}: MPI_Init has not returned after {:g} s (its "
                 "deadline): a rank of this job has not reached it (stopped, stuck in loading, "
                 "or not started); this rank exits with status 1 so that mpirun ends the job\n",
                 MpiSession::launcher_rank(), MpiSession::launcher_size(), seconds);
      std::fflush(stderr);
      std::_Exit(1);
    });
  }
  ~InitDeadline() {
    if (!watcher_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    watcher_.join();
  }
  InitDeadline(const InitDeadline&) = delete;
  InitDeadline& operator=(const InitDeadline&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread watcher_;
};

int env_int(std::initializer_list<const char*> vars) {
  for (const char* var : vars)
    if (const char* v = std::getenv(var)) {
      char* end = nullptr;
      const long x = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && x >= 0 && x < (1L << 30)) return static_cast<int>(x);
    }
  return -1;
}

}  // namespace

int MpiSession::launcher_rank() {
  return env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
}

int MpiSession::launcher_size() {
  return env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
}

MpiSession::MpiSession(int* argc, char*** argv, double init_deadline_s) {
  if (initialized()) {  // a test main or an embedding program already did it
    int level = 0;
    SSD_MPI_CHECK(MPI_Query_thread(&level));
    SSD_CHECK(level == MPI_THREAD_MULTIPLE,
              "MPI was initialised with {}; ssd needs MPI_THREAD_MULTIPLE",
              thread_level_name(level));
    return;
  }
  int provided = MPI_THREAD_SINGLE;
  {
    InitDeadline deadline(init_deadline_s);
    SSD_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  }
  owns_ = true;
  if (provided != MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    owns_ = false;
    fail(fmt::format("this MPI library provides only {}; ssd needs MPI_THREAD_MULTIPLE (the "
                     "actor loop and the compute thread both communicate). Use an MPI built "
                     "with thread support (Open MPI and MPICH from Debian have it)",
                     thread_level_name(provided)));
  }
}

MpiSession::~MpiSession() {
  if (owns_) MPI_Finalize();
}

bool MpiSession::launched_by_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(var)) return true;
  return false;
}

bool MpiSession::initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

// ---- MpiComm ------------------------------------------------------------------------------------

MpiComm::MpiComm(MpiComm&& o) noexcept : comm_(std::exchange(o.comm_, MPI_COMM_NULL)) {}

MpiComm& MpiComm::operator=(MpiComm&& o) noexcept {
  if (this != &o) {
    if (comm_ != MPI_COMM_NULL && MpiSession::initialized()) MPI_Comm_free(&comm_);
    comm_ = std::exchange(o.comm_, MPI_COMM_NULL);
  }
  return *this;
}

MpiComm::~MpiComm() {
  if (comm_ != MPI_COMM_NULL && MpiSession::initialized()) MPI_Comm_free(&comm_);
}

MpiComm MpiComm::dup(MPI_Comm comm) {
  MPI_Comm out = MPI_COMM_NULL;
  SSD_MPI_CHECK(MPI_Comm_dup(comm, &out));
  SSD_MPI_CHECK(MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN));
  return MpiComm(out);
}

MpiComm MpiComm::split(MPI_Comm comm, int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  SSD_MPI_CHECK(MPI_Comm_split(comm, color, key, &out));
  if (out != MPI_COMM_NULL) SSD_MPI_CHECK(MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN));
  return MpiComm(out);
}

int MpiComm::rank() const {
  SSD_CHECK(!null(), "rank() of a communicator this rank is not part of");
  int r = 0;
  SSD_MPI_CHECK(MPI_Comm_rank(comm_, &r));
  return r;
}

int MpiComm::size() const {
  SSD_CHECK(!null(), "size() of a communicator this rank is not part of");
  int n = 0;
  SSD_MPI_CHECK(MPI_Comm_size(comm_, &n));
  return n;
}

// ---- MpiWorld -----------------------------------------------------------------------------------

MpiWorld::MpiWorld(int tp) {
  SSD_CHECK(MpiSession::initialized(), "MpiWorld needs MPI to be initialised (an MpiSession)");
  world_ = MpiComm::dup(MPI_COMM_WORLD);
  layout_ = RankLayout::make(world_.size(), world_.rank(), tp);
  // Every rank takes part in both splits (MPI_Comm_split is collective); key = world rank keeps
  // the group ranks in world order, so TP rank r is world rank r.
  tp_ = MpiComm::split(world_.get(), layout_.is_target() ? 0 : MPI_UNDEFINED, layout_.rank);
  drafters_ = MpiComm::split(world_.get(), layout_.is_target() ? MPI_UNDEFINED : 0, layout_.rank);
}

const MpiComm& MpiWorld::tp() const {
  SSD_CHECK(!tp_.null(), "{} is not in the target's TP group", layout_.describe());
  return tp_;
}

const MpiComm& MpiWorld::drafters() const {
  SSD_CHECK(!drafters_.null(), "{} is not a drafter rank", layout_.describe());
  return drafters_;
}

// ---- abort --------------------------------------------------------------------------------------

namespace {

std::mutex g_abort_hook_mutex;
std::function<void(std::string_view)> g_abort_hook;

}  // namespace

void set_abort_hook(std::function<void(std::string_view)> hook) {
  std::lock_guard<std::mutex> lock(g_abort_hook_mutex);
  g_abort_hook = std::move(hook);
}

void abort_job(int code, std::string_view message) {
  if (code == 0) code = 1;
  std::function<void(std::string_view)> hook;
  {
    std::lock_guard<std::mutex> lock(g_abort_hook_mutex);
    hook.swap(g_abort_hook);  // once: a second abort (another thread) finds none
  }
  if (hook) {
    try {
      hook(message);
    } catch (...) {
    }
  }
  std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  if (MpiSession::initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace ssd
