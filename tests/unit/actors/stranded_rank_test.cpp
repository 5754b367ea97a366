// end_stranded_rank (the leader's end of a job past a lost drafter rank): a stopped process that
// the places name for the rank, on this host, whose parent is the given launcher, is killed and
// gone; one with another parent, on another host, or not named is left alone.
#include "actors/roles/stranded_rank.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace ssd {
namespace {

std::string this_host() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

// A child that stops itself at once; returns once it is stopped.
pid_t stopped_child() {
  const pid_t pid = fork();
  if (pid == 0) {
    raise(SIGSTOP);
    _exit(0);
  }
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, WUNTRACED), pid);
  EXPECT_TRUE(WIFSTOPPED(status));
  return pid;
}

nlohmann::json places(pid_t pid, const std::string& host) {
  return nlohmann::json::array({{{"rank", 0}, {"host", this_host()}, {"pid", getpid()}},
                                {{"rank", 2}, {"host", host}, {"pid", pid}}});
}

TEST(StrandedRank, EndsTheLostRanksStoppedProcess) {
  const pid_t child = stopped_child();
  // This process launched the child: it stands for the launcher both ranks descend from.
  EXPECT_TRUE(end_stranded_rank(places(child, this_host()), 2, getpid()));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
}

TEST(StrandedRank, LeavesOtherProcessesAlone) {
  const pid_t child = stopped_child();
  EXPECT_FALSE(end_stranded_rank(places(child, this_host()), 2, getppid())) << "another parent";
  EXPECT_FALSE(end_stranded_rank(places(child, "elsewhere"), 2, getpid())) << "another host";
  EXPECT_FALSE(end_stranded_rank(places(child, this_host()), 1, getpid())) << "not named";
  EXPECT_FALSE(end_stranded_rank(places(child, this_host()), 0, getpid())) << "this process";
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, WNOHANG), 0) << "the child was ended";
  kill(child, SIGKILL);
  ASSERT_EQ(waitpid(child, &status, 0), child);
}

TEST(StrandedRank, AGoneProcessIsNotSignalled) {
  const pid_t child = stopped_child();
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // reaped: its pid names nothing now
  EXPECT_FALSE(end_stranded_rank(places(child, this_host()), 2, getpid()));
}

}  // namespace
}  // namespace ssd
