// The kernel log: a file the user names (--kernel-log), a capture's _commands/dmesg.txt, or /dev/kmsg on
// the live machine. Parsing and the fast scan live in kernel_log_parse.cpp; this file only moves bytes.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/input_file.hpp"

namespace gpudx {
namespace {

constexpr Collector kName = Collector::kernel_log;
// A capture's dmesg.txt is read whole through Root, which wants a bound.
constexpr size_t kMaxCapturedLog = 512u << 20;
// /dev/kmsg returns one record per read; a record is at most about 8 KiB (LOG_LINE_MAX plus dictionary).
constexpr size_t kKmsgRecord = 16 * 1024;

// The earlier generations' lines first, as the log held them before what is read now.
void feed_earlier_lines(const CollectContext& ctx, KernelLogScanner& scanner) {
    if (!ctx.options.kernel_log_earlier_lines) return;
    ctx.options.kernel_log_earlier_lines([&](std::string_view line) {
        scanner.feed(line);
        scanner.feed("\n");
    });
}

KernelLogScanOptions scan_options(const CollectContext& ctx) {
    KernelLogScanOptions o;
    o.since = ctx.options.since;
    o.extra_words = ctx.options.kernel_log_words;
    return o;
}

// Which source an empty read came from decides what it means. A file the user named was read: it holds nothing
// to judge. A running kernel's log (or a capture of one) always holds its boot messages, so an empty one means
// the real log was not what was read (a container's /dev/kmsg bound to /dev/null, a failed capture).
enum class EmptyLog { read, unreadable };

CollectorStatus finish(KernelLogScanner& scanner, std::string source, KernelLog& out, EmptyLog empty) {
    auto log = scanner.finish(source);
    if (!log) return status_error(kName, log.error());
    out = std::move(*log);
    CollectorStatus st = status_ok(kName);
    if (out.lines_read == 0 && empty == EmptyLog::unreadable) {
        st = status_no_data(kName, "the kernel log is empty", out.source);
    } else if (out.lines_read == 0) {
        st.message = "the kernel log is empty";
        st.path = out.source;
    }
    for (auto& note : scanner.notes()) st.problems.push_back({out.source, note});
    return st;
}

// A file named on the command line is the user's own, outside any --root: read from the real path, and read
// as it comes, since it may be a pipe (`--kernel-log <(journalctl -k)`, `--kernel-log -`).
CollectorStatus read_user_file(const CollectContext& ctx, const std::string& path, KernelLog& out) {
    KernelLogScanner scanner(scan_options(ctx));
    feed_earlier_lines(ctx, scanner);
    auto read = read_user_input(path, [&](std::string_view chunk) { scanner.feed(chunk); });
    if (!read) return status_error(kName, read.error());
    return finish(scanner, path == "-" ? "standard input" : path, out, EmptyLog::read);
}

CollectorStatus read_captured(const CollectContext& ctx, KernelLog& out) {
    constexpr const char* path = "/_commands/dmesg.txt";
    auto text = ctx.root.read_file(path, kMaxCapturedLog);
    if (!text) {
        if (text.error().sys_errno == ENOENT)
            return status_no_data(kName, "the capture has no kernel log (_commands/dmesg.txt)", path);
        return status_error(kName, text.error());
    }
    KernelLogScanner scanner(scan_options(ctx));
    feed_earlier_lines(ctx, scanner);
    scanner.feed(*text);
    return finish(scanner, path, out, EmptyLog::unreadable);
}

CollectorStatus read_kmsg(const CollectContext& ctx, KernelLog& out) {
    constexpr const char* path = "/dev/kmsg";
    auto real = ctx.root.host_path(path);
    if (!real) return status_no_data(kName, "no /dev/kmsg: " + real.error().message, path);
    int fd = ::open(real->c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        std::string why = fmt::format("cannot read /dev/kmsg: {}", std::strerror(err));
        if (err == EPERM || err == EACCES)
            why += " (kernel.dmesg_restrict is set: run as root, or save the log with `journalctl -k` and pass "
                   "--kernel-log FILE)";
        return status_no_data(kName, why, path);
    }
    KernelLogScanner scanner(scan_options(ctx));
    scanner.set_format(KernelLogFormat::kmsg);
    // Records the caller read before (the agent) that the ring has overwritten since: those numbered before the
    // oldest record still in it, judged first, as the ring once held them.
    bool earlier_fed = false;
    auto feed_overwritten = [&](std::optional<uint64_t> oldest_in_ring) {
        if (std::exchange(earlier_fed, true) || !ctx.options.kernel_log_earlier_lines) return;
        ctx.options.kernel_log_earlier_lines([&](std::string_view line) {
            auto seq = kmsg_sequence(line);
            if (!seq || (oldest_in_ring && *seq >= *oldest_in_ring)) return;
            scanner.feed(line);
            scanner.feed("\n");
        });
    };
    std::vector<char> record(kKmsgRecord);
    for (;;) {
        ssize_t n = ::read(fd, record.data(), record.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EPIPE) continue;  // the ring overwrote records we had not read yet: read on
            if (errno == EAGAIN) break;    // every record read
            int err = errno;
            ::close(fd);
            if (err == EPERM || err == EACCES)
                return status_no_data(kName, fmt::format("cannot read /dev/kmsg: {}", std::strerror(err)), path);
            return status_error(kName, Error{fmt::format("cannot read /dev/kmsg: {}", std::strerror(err)), path, err});
        }
        if (n == 0) break;
        std::string_view rec(record.data(), static_cast<size_t>(n));
        feed_overwritten(kmsg_sequence(rec));
        scanner.feed(rec);
        if (rec.back() != '\n') scanner.feed("\n");
    }
    ::close(fd);
    feed_overwritten(std::nullopt);  // an empty ring: every record read before is gone from it
    return finish(scanner, path, out, EmptyLog::unreadable);
}

}  // namespace

CollectorStatus collect_kernel_log(const CollectContext& ctx, KernelLog& out) {
    if (ctx.options.kernel_log_file) return read_user_file(ctx, *ctx.options.kernel_log_file, out);
    if (!ctx.root.is_live()) {
        // A live host mounted under --root (a DaemonSet's /host) has no capture's dmesg.txt, but its real
        // /dev/kmsg; a capture records device nodes as .devnode files, never as real ones.
        if (!ctx.root.exists("/_commands/dmesg.txt")) {
            auto kmsg = ctx.root.stat("/dev/kmsg");
            if (kmsg && kmsg->type == FileType::char_device && !kmsg->recorded_devnode) return read_kmsg(ctx, out);
        }
        return read_captured(ctx, out);
    }
    return read_kmsg(ctx, out);
}

}  // namespace gpudx
