#include "core/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace gpudx {

namespace {

namespace fs = std::filesystem;

std::unexpected<Error> cannot_write(const std::string& path, int err) {
    return fail("cannot write " + path + ": " + std::strerror(err), path, err);
}

Result<void> write_all(int fd, std::string_view text, const std::string& path) {
    size_t off = 0;
    while (off < text.size()) {
        ssize_t n = ::write(fd, text.data() + off, text.size() - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return cannot_write(path, errno);
        }
        off += static_cast<size_t>(n);
    }
    return {};
}

// The kernel's fs.protected_symlinks rule, which gpudx must apply itself: it resolves a link by reading it and
// then renames a new file over what the link names, and a rename never passes through the link, so the kernel's
// own check never runs. In a sticky, world-writable directory (/tmp, /var/tmp, /dev/shm) a link is followed only
// when it is the caller's own or the directory owner's; otherwise anyone could plant /tmp/gpudx.prom ->
// /etc/shadow for root's `-o /tmp/gpudx.prom`, and the shell's own `>` is refused there for that reason.
Result<void> check_link_may_be_followed(const std::string& requested, const std::string& link,
                                        const struct stat& link_stat) {
    fs::path dir = fs::path(link).parent_path();
    if (dir.empty()) dir = ".";
    struct stat dir_stat;
    if (::stat(dir.c_str(), &dir_stat) != 0) return cannot_write(requested, errno);
    bool sticky_world_writable = (dir_stat.st_mode & S_ISVTX) && (dir_stat.st_mode & S_IWOTH);
    if (!sticky_world_writable || link_stat.st_uid == ::geteuid() || link_stat.st_uid == dir_stat.st_uid) return {};
    return fail(fmt::format("cannot write {}: {} is a symbolic link of uid {} in the sticky, world-writable directory "
                            "{}, neither yours nor the directory owner's: not followed (another user may have planted "
                            "it; the kernel's fs.protected_symlinks rule)",
                            requested, link, static_cast<unsigned>(link_stat.st_uid), dir.string()),
                requested, EACCES);
}

// One hop at a time rather than realpath: the last name may not exist yet, and a link to it is still
// honoured (the file is created where the link points).
Result<std::string> follow_links(const std::string& path) {
    std::string p = path;
    for (int hop = 0; hop < 40; ++hop) {
        struct stat st;
        if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
        if (auto allowed = check_link_may_be_followed(path, p, st); !allowed) return std::unexpected(allowed.error());
        std::error_code ec;
        fs::path target = fs::read_symlink(p, ec);
        if (ec) return cannot_write(path, ec.value());
        p = target.is_absolute() ? target.string() : (fs::path(p).parent_path() / target).string();
    }
    return cannot_write(path, ELOOP);
}

Result<void> write_in_place(const std::string& path, std::string_view text, int extra_flags) {
    int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | extra_flags);
    if (fd < 0) return cannot_write(path, errno);
    auto written = write_all(fd, text, path);
    if (::close(fd) != 0 && written) return cannot_write(path, errno);
    return written;
}

// `replaced`: the regular file now under the name, whose mode, owner and group the new one keeps.
Result<void> replace_atomically(const std::string& path, std::string_view text, const struct stat* replaced) {
    fs::path target(path);
    auto dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    // Hidden and not ending in .prom: node_exporter's textfile collector never picks up a half-written file.
    std::string tmp = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
    int fd = ::mkstemp(tmp.data());
    if (fd < 0) return cannot_write(path, errno);
    if (auto written = write_all(fd, text, path); !written) {
        ::close(fd);
        ::unlink(tmp.c_str());
        return written;
    }
    // Whoever could read the file before still can, and nobody more: a 0600 file stays 0600 (set-id bits are
    // not carried to new content). A new file is 0644 rather than mkstemp's 0600: node_exporter and health
    // checkers often run as another user. The owner and group are kept where the caller may set them (root).
    if (replaced) {
        if (replaced->st_uid != ::geteuid() || replaced->st_gid != ::getegid())
            (void)::fchown(fd, replaced->st_uid, replaced->st_gid);
        ::fchmod(fd, replaced->st_mode & 0777);
    } else {
        ::fchmod(fd, 0644);
    }
    // The data must be on disk before the rename makes it visible, or a crash could leave an empty file
    // under the final name.
    int err = ::fsync(fd) == 0 ? 0 : errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
    if (err != 0) {
        ::unlink(tmp.c_str());
        return cannot_write(path, err);
    }
    // And the rename itself survives a crash only once the directory is synced.
    if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
    return {};
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

}  // namespace

std::optional<int> own_descriptor_path(std::string_view path) {
    if (path == "/dev/stdout") return STDOUT_FILENO;
    if (path == "/dev/stderr") return STDERR_FILENO;
    for (std::string_view prefix : {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"}) {
        if (!path.starts_with(prefix)) continue;
        auto digits = path.substr(prefix.size());
        int fd = -1;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
        if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && fd >= 0) return fd;
    }
    return std::nullopt;
}

Result<void> write_output_file(const std::string& path, std::string_view text) {
    if (auto fd = own_descriptor_path(path); fd && ::fcntl(*fd, F_GETFD) != -1) {
        std::fflush(nullptr);  // what stdio holds for the same descriptor goes first
        return write_all(*fd, text, path);
    }
    auto final_path = follow_links(path);
    if (!final_path) return std::unexpected(final_path.error());
    struct stat seen, named;
    bool exists = ::lstat(final_path->c_str(), &named) == 0;
    if (!exists && errno != ENOENT) return cannot_write(path, errno);
    // A link of /proc (/proc/PID/fd/N) reads as "pipe:[…]" or a stale name, yet the kernel still opens what it
    // stands for: whatever that is, it is written in place, never replaced under a name it does not have.
    if (::stat(path.c_str(), &seen) == 0 && (!exists || !same_file(seen, named)))
        return write_in_place(path, text, S_ISREG(seen.st_mode) ? O_TRUNC : 0);
    if (!exists || S_ISREG(named.st_mode)) return replace_atomically(*final_path, text, exists ? &named : nullptr);
    if (S_ISDIR(named.st_mode)) return cannot_write(path, EISDIR);
    return write_in_place(*final_path, text, 0);
}

Result<void> write_whole_file(const std::string& path, std::string_view text) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0644);
    if (fd < 0) return cannot_write(path, errno);
    auto written = write_all(fd, text, path);
    // Some filesystems (NFS, a quota checked late) report a full disk only when the file is closed.
    if (::close(fd) != 0 && written) return cannot_write(path, errno);
    return written;
}

bool is_write_failure(int sys_errno) {
    switch (sys_errno) {
        case ENOSPC: case EDQUOT: case EIO: case EFBIG: case EPIPE: case EBADF: return true;
        default: return false;
    }
}

}  // namespace gpudx
