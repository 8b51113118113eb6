#include "core/root.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "core/text.hpp"

namespace gpudx {
namespace {

constexpr int kMaxLinks = 40;
constexpr size_t kMaxRecordedLinkBytes = 1024;

Error os_error(std::string_view what, const std::string& path, int err) {
    return Error{std::string(what) + ": " + std::strerror(err), path, err};
}

std::vector<std::string> split_path(std::string_view p) {
    std::vector<std::string> parts;
    for (auto& s : split(p, '/'))
        if (!s.empty() && s != ".") parts.emplace_back(s);
    return parts;
}

std::string join_path(const std::vector<std::string>& parts) {
    if (parts.empty()) return "/";
    std::string out;
    for (auto& p : parts) out += "/" + p;
    return out;
}

// A capture records some links as small files holding the target text. `open_errno`, when given, gets the
// reason the file could not be opened (0 when it opened but holds no link target).
std::optional<std::string> recorded_link_target(const std::string& host, int* open_errno = nullptr) {
    if (open_errno) *open_errno = 0;
    int fd = ::open(host.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (open_errno) *open_errno = errno;
        return std::nullopt;
    }
    char buf[kMaxRecordedLinkBytes + 1];
    ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n <= 0 || static_cast<size_t>(n) > kMaxRecordedLinkBytes) return std::nullopt;
    std::string s(buf, static_cast<size_t>(n));
    if (!s.empty() && s.back() == '\n') s.pop_back();
    if (s.find_first_of(std::string_view("\n\0", 2)) != std::string::npos) return std::nullopt;
    if (!(s.starts_with("../") || s.starts_with("/") || s.starts_with("./"))) return std::nullopt;
    return s;
}

FileType type_of(mode_t m) {
    if (S_ISREG(m)) return FileType::regular;
    if (S_ISDIR(m)) return FileType::directory;
    if (S_ISLNK(m)) return FileType::symlink;
    if (S_ISCHR(m)) return FileType::char_device;
    if (S_ISBLK(m)) return FileType::block_device;
    if (S_ISFIFO(m)) return FileType::fifo;
    if (S_ISSOCK(m)) return FileType::socket;
    return FileType::other;
}

}  // namespace

Root::Root(std::filesystem::path base) : base_(std::move(base)) {
    std::error_code ec;
    auto abs = std::filesystem::absolute(base_, ec);
    if (!ec) base_ = abs.lexically_normal();
    std::string s = base_.string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    base_ = s;
    live_ = (s == "/");
}

// Walks the path one component at a time inside the root, following real links and recorded
// links, so that a capture's absolute and relative link targets never escape it.
Result<std::string> Root::resolve(std::string_view path, bool follow_last, bool follow_recorded_last) const {
    if (live_) return std::string(path);
    std::deque<std::string> todo;
    for (auto& p : split_path(path)) todo.push_back(p);
    std::vector<std::string> done;
    int links = 0;
    while (!todo.empty()) {
        std::string c = todo.front();
        todo.pop_front();
        if (c == "..") {
            if (!done.empty()) done.pop_back();
            continue;
        }
        done.push_back(c);
        bool last = todo.empty();
        std::string host = base_.string() + join_path(done);
        struct stat st;
        if (::lstat(host.c_str(), &st) != 0) {
            if (errno == ENOENT && last) return join_path(done);  // callers report the missing file
            return std::unexpected(os_error("cannot read", std::string(path), errno));
        }
        std::optional<std::string> target;
        if (S_ISLNK(st.st_mode) && (!last || follow_last)) {
            char buf[4096];
            ssize_t n = ::readlink(host.c_str(), buf, sizeof buf - 1);
            if (n < 0) return std::unexpected(os_error("cannot read link", std::string(path), errno));
            target = std::string(buf, static_cast<size_t>(n));
        } else if (S_ISREG(st.st_mode) && !last) {
            int err = 0;
            target = recorded_link_target(host, &err);
            // An unreadable recorded link is reported as what it is (EACCES, EIO), not as "not a directory".
            if (!target) return std::unexpected(os_error("cannot read", std::string(path), err ? err : ENOTDIR));
        } else if (S_ISREG(st.st_mode) && last && follow_last && follow_recorded_last) {
            // Only a target that exists in the capture: a regular file may hold path-like text.
            target = recorded_link_target(host);
            if (target) {
                std::vector<std::string> probe(done.begin(), done.end() - 1);
                if (target->starts_with("/")) probe.clear();
                std::string joined = join_path(probe) + "/" + *target;
                auto again = resolve(joined, true, false);
                struct stat st2;
                if (!again || ::lstat((base_.string() + *again).c_str(), &st2) != 0) target.reset();
            }
        }
        if (!target) continue;
        if (++links > kMaxLinks) return std::unexpected(os_error("cannot read", std::string(path), ELOOP));
        done.pop_back();
        if (target->starts_with("/")) done.clear();
        auto parts = split_path(*target);
        todo.insert(todo.begin(), parts.begin(), parts.end());
    }
    return join_path(done);
}

std::shared_ptr<const Root> Root::subroot(std::string_view path) const {
    std::string inner(path);
    if (!inner.starts_with("/")) inner.insert(0, "/");
    return std::make_shared<Root>(live_ ? inner : base_.string() + inner);
}

Result<std::filesystem::path> Root::host_path(std::string_view path) const {
    auto r = resolve(path, true, true);
    if (!r) return std::unexpected(r.error());
    if (live_) return std::filesystem::path(*r);
    return std::filesystem::path(base_.string() + *r);
}

Result<std::string> Root::canonical(std::string_view path) const {
    if (live_) {
        char buf[PATH_MAX];
        if (!::realpath(std::string(path).c_str(), buf))
            return std::unexpected(os_error("cannot resolve", std::string(path), errno));
        return std::string(buf);
    }
    return resolve(path, true, true);
}

Result<std::string> Root::read_file(std::string_view path, size_t max_bytes) const {
    auto inroot = resolve(path, true, false);
    if (!inroot) return std::unexpected(inroot.error());
    auto host = live_ ? std::filesystem::path(*inroot) : std::filesystem::path(base_.string() + *inroot);
    int fd = ::open(host.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return std::unexpected(os_error("cannot open", std::string(path), errno));
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        ::close(fd);
        return std::unexpected(os_error("cannot read", std::string(path), EISDIR));
    }
    std::string out;
    // sysfs and procfs report a size of 4096 or 0 whatever they hold: read until end of file.
    size_t chunk = 4096;
    if (S_ISREG(st.st_mode) && st.st_size > 0) chunk = std::min<size_t>(static_cast<size_t>(st.st_size) + 1, max_bytes + 1);
    for (;;) {
        size_t old = out.size();
        out.resize(old + chunk);
        ssize_t n = ::read(fd, out.data() + old, chunk);
        if (n < 0) {
            if (errno == EINTR) { out.resize(old); continue; }
            int err = errno;
            ::close(fd);
            return std::unexpected(os_error("read failed", std::string(path), err));
        }
        out.resize(old + static_cast<size_t>(n));
        if (n == 0) break;
        if (out.size() > max_bytes) {
            ::close(fd);
            return std::unexpected(Error{"file larger than " + std::to_string(max_bytes) + " bytes", std::string(path), EFBIG});
        }
        chunk = std::min<size_t>(std::max<size_t>(chunk * 2, 4096), 1 << 20);
    }
    ::close(fd);
    return out;
}

Result<std::string> Root::read_sample(std::string_view path, Sample which, size_t max_bytes) const {
    if (which == Sample::first || live_) return read_file(path, max_bytes);
    return read_file(std::string(kLaterSampleDir) + std::string(path), max_bytes);
}

Result<std::vector<std::string>> Root::list_dir(std::string_view path) const {
    auto inroot = resolve(path, true, true);
    if (!inroot) return std::unexpected(inroot.error());
    std::string host = live_ ? *inroot : base_.string() + *inroot;
    // A directory link recorded as a file: follow it.
    if (!live_) {
        struct stat st;
        if (::lstat(host.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
            if (auto t = recorded_link_target(host)) {
                std::string parent = inroot->substr(0, inroot->rfind('/'));
                auto again = resolve(t->starts_with("/") ? *t : parent + "/" + *t, true, true);
                if (!again) return std::unexpected(again.error());
                host = base_.string() + *again;
            }
        }
    }
    DIR* d = ::opendir(host.c_str());
    if (!d) return std::unexpected(os_error("cannot list", std::string(path), errno));
    std::vector<std::string> names;
    while (auto* e = ::readdir(d)) {
        std::string_view n = e->d_name;
        if (n == "." || n == "..") continue;
        if (!live_ && n.ends_with(".devnode")) n.remove_suffix(8);
        names.emplace_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

Result<std::string> Root::read_link(std::string_view path) const {
    auto inroot = resolve(path, false, false);
    if (!inroot) return std::unexpected(inroot.error());
    std::string host = live_ ? *inroot : base_.string() + *inroot;
    char buf[4096];
    ssize_t n = ::readlink(host.c_str(), buf, sizeof buf - 1);
    if (n >= 0) return std::string(buf, static_cast<size_t>(n));
    int err = errno;
    if (err == EINVAL && !live_) {
        if (auto t = recorded_link_target(host)) return *t;
    }
    return std::unexpected(os_error("cannot read link", std::string(path), err));
}

Result<FileInfo> Root::stat(std::string_view path) const {
    auto host = host_path(path);
    if (!host) return std::unexpected(host.error());
    struct stat st;
    if (::stat(host->c_str(), &st) == 0) {
        FileInfo fi;
        fi.type = type_of(st.st_mode);
        fi.mode = st.st_mode;
        if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
            fi.major = ::major(st.st_rdev);
            fi.minor = ::minor(st.st_rdev);
        }
        if (live_) {
            fi.uid = st.st_uid;
            fi.gid = st.st_gid;
        }
        return fi;
    }
    int err = errno;
    if (err == ENOENT && !live_) {
        auto rec = read_file(std::string(path) + ".devnode", 256);
        if (rec) {
            // "0o20666", "0o20666 195:0", or with the owner "0o20660 226:128 uid=0 gid=109"
            auto words = split_ws(*rec);
            if (!words.empty()) {
                std::string_view m = words[0];
                if (m.starts_with("0o")) m.remove_prefix(2);
                auto mode = parse_uint(m, 8);
                if (mode) {
                    FileInfo fi;
                    fi.mode = static_cast<uint32_t>(*mode);
                    fi.type = type_of(static_cast<mode_t>(*mode));
                    fi.recorded_devnode = true;
                    if (words.size() > 1) {
                        auto mm = split(words[1], ':');
                        if (mm.size() == 2) {
                            auto ma = parse_uint(mm[0]), mi = parse_uint(mm[1]);
                            if (ma && mi) { fi.major = static_cast<uint32_t>(*ma); fi.minor = static_cast<uint32_t>(*mi); }
                        }
                    }
                    for (size_t w = 1; w < words.size(); ++w) {
                        auto id = [&](std::string_view key) -> std::optional<uint32_t> {
                            if (!words[w].starts_with(key)) return std::nullopt;
                            auto v = parse_uint(words[w].substr(key.size()));
                            if (!v || *v > 0xffffffffu) return std::nullopt;
                            return static_cast<uint32_t>(*v);
                        };
                        if (auto u = id("uid=")) fi.uid = u;
                        if (auto g = id("gid=")) fi.gid = g;
                    }
                    return fi;
                }
            }
        } else if (rec.error().sys_errno != ENOENT) {
            // The node is recorded but its record cannot be read: say why, never "no such file".
            return std::unexpected(rec.error());
        }
    }
    return std::unexpected(os_error("cannot stat", std::string(path), err));
}

std::string link_basename(std::string_view target) {
    while (target.size() > 1 && target.back() == '/') target.remove_suffix(1);
    auto pos = target.rfind('/');
    return std::string(pos == std::string_view::npos ? target : target.substr(pos + 1));
}

}  // namespace gpudx
