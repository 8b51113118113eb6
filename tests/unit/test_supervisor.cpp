// The subprocess supervisor (core/supervisor.hpp) and what the probe protocol makes of a child's output that
// cannot be read: every such line is a read problem with an excerpt, never dropped.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <stdexcept>

#include "core/child_probe.hpp"
#include "core/supervisor.hpp"
#include "test_support.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
using namespace std::chrono_literals;

namespace {

// A child keeps only its channel, so the one pipe or socket above stderr is it: how a driver library (or a
// test body) that writes where it should not reaches the channel.
int channel_of_this_child() {
    for (int fd = 3; fd < 1024; ++fd) {
        struct stat st{};
        if (::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return fd;
    }
    return -1;
}

void write_raw(std::string_view bytes) {
    int fd = channel_of_this_child();
    if (fd >= 0) write_all(fd, bytes);
}

bool any_contains(const std::vector<std::string>& lines, std::string_view what) {
    for (auto& l : lines)
        if (l.find(what) != std::string::npos) return true;
    return false;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string all;
    for (auto& l : lines) all += l + "\n";
    return all;
}

}  // namespace

TEST(Supervisor, SplitLinesKeepsTheFrameStillBeingWritten) {
    std::string buffer = "one\ntwo\nthr";
    std::vector<std::string> seen;
    split_lines(buffer, [&](std::string_view line) { seen.emplace_back(line); });
    EXPECT_EQ(seen, (std::vector<std::string>{"one", "two"}));
    EXPECT_EQ(buffer, "thr");
}

TEST(Supervisor, JsonLineIsOneLineWhateverTheText) {
    auto line = json_line({{"text", "a\nb\x01"}, {"bad", std::string("\xff")}});
    EXPECT_EQ(line.find('\n'), line.size() - 1);
    EXPECT_NE(line.find("\\n"), std::string::npos);
}

TEST(Supervisor, ExcerptIsShortAndPrintable) {
    auto e = excerpt(std::string("R {\x1b[2J") + std::string(500, 'x'));
    EXPECT_EQ(e.find('\x1b'), std::string::npos);
    EXPECT_LT(e.size(), 100u);
}

TEST(Supervisor, TheBodysReturnIsTheExitStatus) {
    auto child = Child::start([](int) { return 3; });
    ASSERT_TRUE(child) << child.error().message;
    EXPECT_EQ(child->read_until(std::chrono::steady_clock::now() + 5s), Child::Read::closed);
    auto ended = child->finish(5s);
    ASSERT_TRUE(ended.reaped());
    EXPECT_FALSE(ended.signaled());
    EXPECT_EQ(ended.exit_code(), 3);
    EXPECT_FALSE(child->running());
}

TEST(Supervisor, AThrowingBodyEndsTheChildWithItsOwnStatus) {
    auto child = Child::start([](int) -> int { throw std::runtime_error("bug"); });
    ASSERT_TRUE(child);
    auto ended = child->finish(5s);
    ASSERT_TRUE(ended.reaped());
    EXPECT_EQ(ended.exit_code(), kChildBodyThrew);
}

TEST(Supervisor, ACrashIsReportedByItsSignal) {
    auto child = Child::start([](int) {
        ::raise(SIGSEGV);
        return 0;
    });
    ASSERT_TRUE(child);
    auto ended = child->finish(5s);
    ASSERT_TRUE(ended.signaled());
    EXPECT_EQ(ended.signal(), SIGSEGV);
}

TEST(Supervisor, AChildKeepsOnlyItsChannel) {
    int other[2];
    ASSERT_EQ(::pipe(other), 0);  // without O_CLOEXEC: a descriptor the child would otherwise inherit
    auto child = Child::start([&](int fd) {
        bool other_open = ::fcntl(other[1], F_GETFD) != -1;
        write_all(fd, other_open ? "inherited\n" : "isolated\n");
        return 0;
    });
    ::close(other[0]);
    ::close(other[1]);
    ASSERT_TRUE(child);
    while (child->received().find('\n') == std::string::npos)
        ASSERT_EQ(child->read_until(std::chrono::steady_clock::now() + 5s), Child::Read::data);
    EXPECT_EQ(child->received(), "isolated\n");
    child->finish(5s);
}

TEST(Supervisor, ASocketChannelCarriesRequestsAndAnswers) {
    auto child = Child::start(
        [](int fd) {
            char buf[64];
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n <= 0) return 1;
            std::string answer = "got " + std::string(buf, static_cast<size_t>(n));
            return write_all(fd, answer) ? 0 : 2;
        },
        ChannelKind::socket);
    ASSERT_TRUE(child);
    ASSERT_TRUE(child->send("ping\n"));
    while (child->received().find('\n') == std::string::npos)
        ASSERT_EQ(child->read_until(std::chrono::steady_clock::now() + 5s), Child::Read::data);
    EXPECT_EQ(child->received(), "got ping\n");
    EXPECT_EQ(child->finish(5s).exit_code(), 0);
}

TEST(Supervisor, AHungChildIsKilledAndTheReadEndsAtItsDeadline) {
    auto child = Child::start([](int) {
        for (;;) ::pause();
        return 0;
    });
    ASSERT_TRUE(child);
    EXPECT_EQ(child->read_until(std::chrono::steady_clock::now() + 50ms), Child::Read::nothing);
    auto ended = child->kill();
    ASSERT_TRUE(ended.signaled());
    EXPECT_EQ(ended.signal(), SIGKILL);
}

TEST(Supervisor, SendingToAChildThatIsGoneIsAnErrorNotASignal) {
    auto child = Child::start([](int) { return 0; }, ChannelKind::socket);
    ASSERT_TRUE(child);
    EXPECT_EQ(child->read_until(std::chrono::steady_clock::now() + 5s), Child::Read::closed);
    // MSG_NOSIGNAL: without it this write would end the test binary by SIGPIPE.
    EXPECT_FALSE(child->send(std::string(1 << 20, 'x')));
    child->finish(5s);
}

// The threads of this process, as the kernel counts them.
int thread_count() {
    std::string status = test::read_all("/proc/self/status");
    auto at = status.find("Threads:");
    return at == std::string::npos ? -1 : std::atoi(status.c_str() + at + 8);
}

// A child left behind (it said it was done but had not exited yet, or the kernel holds it after SIGKILL) is
// reaped later, by no thread: a thread starting or ending while the next child is forked can hold the
// allocator's lock at the fork, and that child then blocks on its first allocation (AddressSanitizer's
// allocator did, with a reaper thread per probe).
TEST(Supervisor, AChildLeftBehindIsReapedLaterByNoThread) {
    int threads = thread_count();
    ASSERT_GT(threads, 0);
    auto child = Child::start([](int) {
        for (;;) ::pause();  // still running when the parent stops waiting for it
        return 0;
    });
    ASSERT_TRUE(child);
    pid_t pid = child->pid();
    auto ended = child->finish(0ms, Child::IfLate::leave);
    EXPECT_FALSE(ended.reaped());
    EXPECT_EQ(thread_count(), threads) << "a thread was started to reap the child";
    ::kill(pid, SIGKILL);
    siginfo_t info{};
    ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);  // ended, left unreaped
    EXPECT_TRUE(still_ours(pid)) << "nothing but reap_finished may reap it";
    reap_finished();
    EXPECT_FALSE(still_ours(pid));
}

// ---- what the probe protocol makes of a child that writes garbage ---------------------------------

TEST(ProbeReadProblems, EachUnreadableLineIsReportedWithAnExcerpt) {
    ProbeOutcome out;
    std::string buf = "R {\"a\":1}\nR {not json\nQ what\nPnoSpace\nL x garbled\nP cuInit(0)\n";
    consume_probe_lines(buf, out);
    ASSERT_EQ(out.read_problems.size(), 4u) << joined(out.read_problems);
    EXPECT_NE(out.read_problems[0].find("not JSON"), std::string::npos);
    EXPECT_NE(out.read_problems[0].find("{not json"), std::string::npos);
    EXPECT_NE(out.read_problems[1].find("Q what"), std::string::npos);
    EXPECT_NE(out.read_problems[2].find("PnoSpace"), std::string::npos);
    EXPECT_NE(out.read_problems[3].find("lane"), std::string::npos);
    // The readable lines around them still count.
    EXPECT_EQ((*out.result)["a"], 1);
    EXPECT_EQ(out.last_call, "cuInit(0)");
}

TEST(ProbeReadProblems, AFloodOfGarbageIsCappedNotListedWhole) {
    ProbeOutcome out;
    std::string buf;
    for (int i = 0; i < 1000; ++i) buf += "garbage\n";
    consume_probe_lines(buf, out);
    EXPECT_EQ(out.read_problems.size(), 11u);
    EXPECT_NE(out.read_problems.back().find("not listed"), std::string::npos);
}

TEST(ProbeReadProblems, GarbageFromAChildBodyIsReportedThroughTheSupervisor) {
    std::vector<ProbeSpec> specs;
    specs.push_back({"garbling", [](ProbeChannel& ch) {
                         ch.result({{"ok", true}});
                         write_raw("R {\"truncated\":\nX unknown tag\n");
                         ch.progress("nvmlShutdown");
                     },
                     5000ms});
    auto out = run_probes(specs);
    ASSERT_EQ(out[0].end, ProbeEnd::finished);
    EXPECT_EQ((*out[0].result)["ok"], true);  // the result before the garbage stands
    EXPECT_EQ(out[0].last_call, "nvmlShutdown");
    EXPECT_TRUE(any_contains(out[0].read_problems, "not JSON")) << joined(out[0].read_problems);
    EXPECT_TRUE(any_contains(out[0].read_problems, "X unknown tag")) << joined(out[0].read_problems);
}

TEST(ProbeReadProblems, ALastLineCutOffByADyingChildIsReported) {
    std::vector<ProbeSpec> specs;
    specs.push_back({"dying", [](ProbeChannel& ch) {
                         ch.progress("nvmlDeviceGetHandleByIndex_v2(0)");
                         write_raw("R {\"devices\":[");
                         ::raise(SIGKILL);
                     },
                     5000ms});
    auto out = run_probes(specs);
    ASSERT_EQ(out[0].end, ProbeEnd::died);
    EXPECT_NE(out[0].message.find("signal 9"), std::string::npos) << out[0].message;
    EXPECT_TRUE(any_contains(out[0].read_problems, "cut off after 14 bytes")) << joined(out[0].read_problems);
}

}  // namespace GPUDX_UNITY_ID
