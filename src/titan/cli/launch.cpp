// titan launch --nproc-per-node N [--hostfile F] [--local-ranks-filter R[,R..]] [--tee DIR]
//              [--mpirun PATH] -- train ...
// The torchrun-like face of MPI: starts N ranks per node of this same binary through mpirun
// (OpenMPI), each running the command after "--". What it adds to a plain mpirun:
//   - OMP_NUM_THREADS = cores / N per rank (unless set), ranks unbound (OpenMP places threads);
//   - --oversubscribe when N exceeds this machine's cores, --allow-run-as-root as root;
//   - the console shows the ranks of --local-ranks-filter only (others: warnings and errors),
//     every line tagged [rank r]; --tee DIR writes each rank's whole log to DIR/rank<r>.log.
// A rank that dies takes the job down (mpirun's default); the exit code is the job's. A rank that
// fails with an error leaves its line in a scratch folder (TITAN_LAUNCH_ERRORS): launch repeats
// the first rank's as its last line, below mpirun's report, and exits with that rank's code (2 for
// a config or mesh error).
// Signals: mpirun runs in a process group of its own, so a terminal's Ctrl-C reaches launch only
// (mpirun would kill the job on SIGINT / SIGTERM rather than let it finish its step). Launch relays
// the first SIGINT / SIGTERM as SIGUSR1 / SIGUSR2, which mpirun forwards to every rank on every host,
// and the ranks (TITAN_LAUNCH_SIGNALS) take them for SIGINT / SIGTERM: they stop together after the
// step in progress; launch waits for mpirun and exits 130 / 143. A second signal is passed to mpirun
// as SIGTERM: it kills the job at once. If launch dies (even by SIGKILL), the kernel sends mpirun
// SIGTERM (PR_SET_PDEATHSIG), and mpirun takes its ranks down: no job trains on headless.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/core/error.h"
#include "titan/parallel/comm.h"

namespace titan::cli {
namespace {

volatile sig_atomic_t g_mpirun = 0;
volatile sig_atomic_t g_signal = 0;  // the first SIGINT / SIGTERM launch received, else 0
extern "C" void relay_to_job(int signal) {
  if (g_signal == 0) {
    g_signal = signal;
    ::kill(static_cast<pid_t>(g_mpirun), signal == SIGINT ? SIGUSR1 : SIGUSR2);
  } else {
    ::kill(static_cast<pid_t>(g_mpirun), SIGTERM);  // the second one: mpirun ends the job now
  }
}

// Runs mpirun as a child: in a process group of its own, stdin from /dev/null (a background
// group reading the terminal would be stopped), SIGTERM when launch dies, and the signals the
// parent `blocked` unblocked again (exec keeps the mask). Returns its pid.
pid_t start_mpirun(std::vector<char*>& argv, const sigset_t& blocked) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  TITAN_CHECK(pid >= 0, "[launch] fork failed: ", std::strerror(errno));
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(143);  // launch died before the line above took effect
  const int null = ::open("/dev/null", O_RDONLY);
  if (null > STDIN_FILENO) {
    ::dup2(null, STDIN_FILENO);
    ::close(null);
  }
  ::sigprocmask(SIG_UNBLOCK, &blocked, nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "titan: error: [launch] cannot run %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

struct RankError {
  int code = 1;
  std::string line;
};

// A scratch folder the ranks write their error lines into (main's fail()); removed with the object.
struct ErrorFolder {
  std::string path;
  ErrorFolder() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "titan-launch-XXXXXX").string();
    TITAN_CHECK(::mkdtemp(tmpl.data()) != nullptr, "[launch] cannot create a scratch folder in ",
                std::filesystem::temp_directory_path().string(), ": ", std::strerror(errno));
    path = tmpl;
  }
  ~ErrorFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ErrorFolder(const ErrorFolder&) = delete;
  ErrorFolder& operator=(const ErrorFolder&) = delete;

  // The lowest rank's error, if any rank wrote one.
  std::optional<RankError> first() const {
    std::optional<RankError> best;
    int best_rank = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      const std::string name = entry.path().filename().string();  // rank<r>.error
      if (name.rfind("rank", 0) != 0) continue;
      const int rank = std::atoi(name.c_str() + 4);
      if (best && rank >= best_rank) continue;
      std::ifstream in(entry.path());
      RankError e;
      if (!(in >> e.code)) continue;
      in.ignore(1);
      std::getline(in, e.line);
      best = e;
      best_rank = rank;
    }
    return best;
  }
};

constexpr const char* kLaunchUsage =
    "usage: titan launch --nproc-per-node N [--hostfile F] [--local-ranks-filter R[,R..]] [--tee DIR]\n"
    "                    [--mpirun PATH] -- train [train flags...]\n"
    "Starts N ranks per node of this titan through mpirun; each runs the command after '--'.\n"
    "  --nproc-per-node N       ranks on each node (N x nodes in the hostfile in all)\n"
    "  --hostfile F             OpenMPI hostfile (one node per line); default: this machine only\n"
    "  --local-ranks-filter R   ranks whose info lines reach the console (default: all); e.g. 0\n"
    "  --tee DIR                also write each rank's log to DIR/rank<r>.log\n"
    "  --mpirun PATH            the MPI launcher (default: mpirun on PATH)\n"
    "SIGINT (Ctrl-C) / SIGTERM to launch: every rank stops after the same step; launch exits 130 / 143\n"
    "once they have ended (a second signal kills the job). If launch dies, its job dies with it.\n";

bool on_path(const std::string& exe) {
  if (exe.find('/') != std::string::npos) return ::access(exe.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  size_t b = 0;
  while (b <= dirs.size()) {
    const size_t e = dirs.find(':', b);
    const std::string dir = dirs.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (!dir.empty() && ::access((dir + "/" + exe).c_str(), X_OK) == 0) return true;
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return false;
}

std::string self_exe() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  TITAN_CHECK(!ec, "[launch] cannot find this binary (/proc/self/exe): ", ec.message());
  return p.string();
}

}  // namespace

int run_launch(int argc, char** argv) {
  std::vector<std::string> args(argv + 2, argv + argc);
  int64_t nproc = 0;
  std::string hostfile, filter, tee, mpirun = "mpirun";
  std::vector<std::string> command;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(kLaunchUsage, stdout);
      return 0;
    }
    const auto value = [&]() -> std::string {
      if (i + 1 == args.size()) throw UsageError(str("titan launch: ", a, " needs a value\n", kLaunchUsage));
      return args[++i];
    };
    if (a == "--nproc-per-node" || a == "--nproc_per_node") {
      const std::string v = value();
      char* end = nullptr;
      nproc = std::strtoll(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || nproc < 1) {
        throw UsageError(str("titan launch: --nproc-per-node '", v, "' is not a positive rank count"));
      }
    } else if (a == "--hostfile") {
      hostfile = value();
    } else if (a == "--local-ranks-filter" || a == "--local_ranks_filter") {
      filter = value();
    } else if (a == "--tee") {
      tee = value();
    } else if (a == "--mpirun") {
      mpirun = value();
    } else {
      throw UsageError(str("titan launch: unknown option '", a, "'. HINT: put the titan command after '--'\n",
                           kLaunchUsage));
    }
  }
  if (nproc == 0) throw UsageError(str("titan launch: --nproc-per-node is required\n", kLaunchUsage));
  // Each rank is a process with its own memory: a count far past the CPUs is a typo, and mpirun
  // would start processes until the OOM killer ends it. 64 per CPU still allows oversubscribed tests.
  const int64_t cpus = std::max<int64_t>(1, std::thread::hardware_concurrency());
  if (nproc > 64 * cpus) {
    throw UsageError(str("titan launch: --nproc-per-node ", nproc, " is more than 64 ranks per CPU of this node (",
                         cpus, " CPUs, at most ", 64 * cpus, "). HINT: one rank per CPU or per GPU is usual"));
  }
  if (command.empty() || command[0] != "train") {
    throw UsageError(str("titan launch: expected '-- train ...' after the options. HINT: titan launch "
                         "--nproc-per-node 2 -- train --config qwen3_debug"));
  }
  TITAN_CHECK(parallel::mpi_available(), "[launch] this titan was built without MPI. HINT: apt-get install "
              "libopenmpi-dev openmpi-bin and rebuild");
  TITAN_CHECK(on_path(mpirun), "[launch] ", mpirun, " not found. HINT: apt-get install openmpi-bin, or pass --mpirun PATH");
  TITAN_CHECK(hostfile.empty() || std::filesystem::is_regular_file(hostfile), "[launch] --hostfile ", hostfile,
              " is not a file");
  for (const char c : filter) {
    TITAN_CHECK((c >= '0' && c <= '9') || c == ',', "[launch] --local-ranks-filter '", filter,
                "' is not a comma-separated list of ranks, e.g. 0 or 0,1");
  }
  if (!tee.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(tee, ec);
    TITAN_CHECK(!ec && std::filesystem::is_directory(tee), "[launch] cannot create --tee folder ", tee);
    tee = std::filesystem::absolute(tee).string();
  }

  if (!hostfile.empty()) {
    // A host that drops off the network sends no TCP reset: with OpenMPI's keepalive defaults
    // (300 s idle, then 9 probes 20 s apart) mpirun would notice its daemon gone after 8 minutes,
    // waiting that long in its abort too. Probing an idle daemon link after 5 s, every 2 s, ends
    // such a job in about 15 s, with mpirun's report naming the host. The user's values win.
    ::setenv("OMPI_MCA_oob_tcp_keepalive_time", "5", 0);
    ::setenv("OMPI_MCA_oob_tcp_keepalive_intvl", "2", 0);
    ::setenv("OMPI_MCA_oob_tcp_keepalive_probes", "4", 0);
  }
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::vector<std::string> cmd = {mpirun};
  if (hostfile.empty()) {
    cmd.insert(cmd.end(), {"-np", std::to_string(nproc)});
    if (nproc > cores) cmd.push_back("--oversubscribe");
  } else {
    cmd.insert(cmd.end(), {"--hostfile", hostfile, "--npernode", std::to_string(nproc)});
  }
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.insert(cmd.end(), {"--bind-to", "none"});
  const char* omp = std::getenv("OMP_NUM_THREADS");
  cmd.insert(cmd.end(), {"-x", str("OMP_NUM_THREADS=", omp != nullptr ? std::string(omp)
                                                                       : std::to_string(std::max<int64_t>(1, cores / nproc)))});
  if (nproc > cores) cmd.insert(cmd.end(), {"-x", "OMP_WAIT_POLICY=PASSIVE"});
  if (!filter.empty()) cmd.insert(cmd.end(), {"-x", "TITAN_LOCAL_RANKS_FILTER=" + filter});
  if (!tee.empty()) cmd.insert(cmd.end(), {"-x", "TITAN_TEE_DIR=" + tee});
  const ErrorFolder errors;
  cmd.insert(cmd.end(), {"-x", "TITAN_LAUNCH_ERRORS=" + errors.path, "-x", "TITAN_LAUNCH_SIGNALS=1"});
  cmd.push_back(self_exe());
  cmd.insert(cmd.end(), command.begin(), command.end());

  std::string line;
  for (const std::string& s : cmd) line += (line.empty() ? "" : " ") + s;
  std::fprintf(stderr, "[titan] launch: %s\n", line.c_str());
  std::fflush(stderr);
  std::vector<char*> cargv;
  for (std::string& s : cmd) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  // SIGINT / SIGTERM wait (blocked) until the handler knows mpirun's pid.
  sigset_t stop_signals, previous;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &stop_signals, &previous);
  const pid_t pid = start_mpirun(cargv, stop_signals);
  g_mpirun = pid;
  struct sigaction relay {};
  relay.sa_handler = relay_to_job;
  sigemptyset(&relay.sa_mask);
  ::sigaction(SIGINT, &relay, nullptr);
  ::sigaction(SIGTERM, &relay, nullptr);
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  // mpirun's end is seen before it is reaped, and the relay stops then: a late signal must not
  // reach whatever process gets its pid next.
  siginfo_t ended{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &ended, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  ::sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (const std::optional<RankError> e = errors.first()) {
    std::fprintf(stderr, "%s\n", e->line.c_str());
    return e->code;
  }
  if (g_signal != 0) {  // rank 0's own line above says after which step the ranks stopped
    if (code != 128 + g_signal) {
      std::fprintf(stderr, "titan: [launch] %s: the job ended with exit code %d, not at a step its ranks agreed "
                   "on\n", g_signal == SIGINT ? "SIGINT" : "SIGTERM", code);
    }
    return 128 + g_signal;
  }
  if (code != 0) {
    std::fprintf(stderr, "titan: error: [launch] the job failed (exit code %d); mpirun's lines above name the "
                 "rank or host that failed%s\n", code, tee.empty() ? "" : str(", and ", tee, "/rank<r>.log hold each rank's log").c_str());
  }
  return code;
}

}  // namespace titan::cli
