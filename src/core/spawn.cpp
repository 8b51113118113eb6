#include "core/spawn.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/reap.hpp"

extern char** environ;

namespace gpudx {

Result<SpawnedProgram> SpawnedProgram::start(const std::vector<std::string>& argv, const SpawnOptions& o) {
    if (argv.empty()) return fail("no program to run");
    reap_finished();
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    std::vector<char*> cenv;
    if (o.environment) {
        for (const auto& e : *o.environment) cenv.push_back(const_cast<char*>(e.c_str()));
        cenv.push_back(nullptr);
    }
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0) return fail(std::string("pipe: ") + std::strerror(errno), argv[0], errno);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    if (o.stderr_to == SpawnOptions::Stderr::pipe) posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
    if (o.stderr_to == SpawnOptions::Stderr::discard)
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGXFSZ);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (o.own_process_group) {
        flags |= POSIX_SPAWN_SETPGROUP;
        posix_spawnattr_setpgroup(&attr, 0);
    }
    posix_spawnattr_setflags(&attr, flags);
    pid_t pid = 0;
    char** envp = o.environment ? cenv.data() : environ;
    int rc = o.search_path ? ::posix_spawnp(&pid, cargv[0], &fa, &attr, cargv.data(), envp)
                           : ::posix_spawn(&pid, cargv[0], &fa, &attr, cargv.data(), envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(pipefd[1]);
    if (rc != 0) {
        ::close(pipefd[0]);
        return fail(std::strerror(rc), argv[0], rc);
    }
    SpawnedProgram p;
    p.pid_ = pid;
    p.fd_ = pipefd[0];
    p.group_ = o.own_process_group;
    return p;
}

SpawnedProgram::SpawnedProgram(SpawnedProgram&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), fd_(std::exchange(other.fd_, -1)), group_(other.group_) {}

SpawnedProgram& SpawnedProgram::operator=(SpawnedProgram&& other) noexcept {
    if (this != &other) {
        end();
        pid_ = std::exchange(other.pid_, -1);
        fd_ = std::exchange(other.fd_, -1);
        group_ = other.group_;
    }
    return *this;
}

SpawnedProgram::~SpawnedProgram() { end(); }

void SpawnedProgram::end() {
    if (running()) {
        kill();
        if (!wait(kKilledChildGrace) && still_ours(pid_)) reap_later(pid_);
        pid_ = -1;
    }
    close_output();
}

SpawnedProgram::Read SpawnedProgram::read_available(std::string& into) {
    if (fd_ < 0) return Read::closed;
    char buf[65536];
    for (;;) {
        ssize_t got = ::read(fd_, buf, sizeof buf);
        if (got > 0) {
            into.append(buf, static_cast<size_t>(got));
            return Read::data;
        }
        if (got == 0) return Read::closed;
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return Read::nothing;
        return Read::failed;
    }
}

SpawnedProgram::Read SpawnedProgram::read_until(std::string& into, std::chrono::steady_clock::time_point deadline) {
    if (fd_ < 0) return Read::closed;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return Read::nothing;
        pollfd p{fd_, POLLIN, 0};
        int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Read::failed;
        if (n == 0) return Read::nothing;
        return read_available(into);
    }
}

void SpawnedProgram::kill() {
    if (pid_ <= 0) return;
    if (group_) ::kill(-pid_, SIGKILL);
    else ::kill(pid_, SIGKILL);
}

std::optional<int> SpawnedProgram::wait(std::chrono::milliseconds within) {
    close_output();
    if (pid_ <= 0) return std::nullopt;
    auto status = wait_for_exit(pid_, within);
    if (status) pid_ = -1;
    return status;
}

void SpawnedProgram::close_output() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

std::string describe_exit_status(int status) {
    if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
    return fmt::format("exited {}", WEXITSTATUS(status));
}

}  // namespace gpudx
