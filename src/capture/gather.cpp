#include "capture/gather.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "collect/collectors.hpp"
#include "collect/services.hpp"
#include "core/output_file.hpp"
#include "core/staging_dir.hpp"
#include "core/text.hpp"
#include "gpu_api/queries.hpp"

extern char** environ;

namespace gpudx {
namespace fs = std::filesystem;

namespace {

// Reads the live machine like Root("/") and remembers every path it was asked about.
class RecordingRoot : public Root {
public:
    // `base`: "/" for the node; a process's /proc/PID/root for the files read inside its own root.
    explicit RecordingRoot(const std::string& base = "/") : Root(base) {}
    // A process's root is recorded too, by a recorder of its own: its paths are the process's, not the node's.
    std::shared_ptr<const Root> subroot(std::string_view p) const override {
        auto child = std::make_shared<RecordingRoot>(is_live() ? std::string(p) : base().string() + std::string(p));
        std::lock_guard lock(mu_);
        subroots_.emplace_back(std::string(p), child);
        return child;
    }
    // Each root read through subroot(), under the in-root path it was made for.
    std::vector<std::pair<std::string, std::shared_ptr<RecordingRoot>>> subroots() const {
        std::lock_guard lock(mu_);
        return subroots_;
    }
    Result<std::string> read_file(std::string_view p, size_t max) const override {
        note(p, Kind::file);
        {
            std::lock_guard lock(mu_);
            size_t& limit = read_limits_[std::string(p)];
            limit = std::max(limit, max);
        }
        return Root::read_file(p, max);
    }
    // Both readings of a counter file are kept as read: the capture would otherwise hold the file as it was when
    // written out, after both, and a replay would see neither the first value nor the growth.
    Result<std::string> read_sample(std::string_view p, Sample which, size_t max) const override {
        if (which == Sample::first) note(p, Kind::file);
        auto text = Root::read_sample(p, which, max);
        if (text) {
            std::lock_guard lock(mu_);
            samples_[{std::string(p), which}] = *text;
        }
        return text;
    }
    // What each reading of a counter file saw, by in-root path and reading.
    std::map<std::pair<std::string, Sample>, std::string> samples() const {
        std::lock_guard lock(mu_);
        return samples_;
    }
    void note_excerpt(std::string_view p, std::string_view excerpt) const override {
        std::lock_guard lock(mu_);
        excerpts_[std::string(p)] = std::string(excerpt);
    }
    // The bytes a reader used of each large file it read outside the Root API (Root::note_excerpt), by in-root path.
    std::map<std::string, std::string> excerpts() const {
        std::lock_guard lock(mu_);
        return excerpts_;
    }
    Result<std::vector<std::string>> list_dir(std::string_view p) const override {
        note(p, Kind::dir);
        return Root::list_dir(p);
    }
    Result<std::string> read_link(std::string_view p) const override {
        note(p, Kind::link);
        return Root::read_link(p);
    }
    Result<FileInfo> stat(std::string_view p) const override {
        note(p, Kind::stat);
        return Root::stat(p);
    }
    enum class Kind { file, dir, link, stat };
    std::set<std::pair<std::string, Kind>> seen() const {
        std::lock_guard lock(mu_);
        return seen_;
    }
    // The most bytes any collector asked to read of `p` (0 when it was never read as a file).
    size_t read_limit(const std::string& p) const {
        std::lock_guard lock(mu_);
        auto it = read_limits_.find(p);
        return it == read_limits_.end() ? 0 : it->second;
    }

private:
    void note(std::string_view p, Kind k) const {
        std::lock_guard lock(mu_);
        seen_.emplace(std::string(p), k);
    }
    mutable std::mutex mu_;
    mutable std::set<std::pair<std::string, Kind>> seen_;
    mutable std::map<std::string, size_t> read_limits_;
    mutable std::map<std::string, std::string> excerpts_;
    mutable std::map<std::pair<std::string, Sample>, std::string> samples_;
    mutable std::vector<std::pair<std::string, std::shared_ptr<RecordingRoot>>> subroots_;
};

constexpr size_t kMaxCapturedFile = 64 * 1024 * 1024;

// "libcuda.so.1", "libnvidia-ml.so.580.159.04", "libamdhip64.so".
bool is_shared_library_name(std::string_view name) {
    auto so = name.find(".so");
    return name.starts_with("lib") && so != std::string_view::npos &&
           (so + 3 == name.size() || name[so + 3] == '.');
}

// Writes the capture tree: links become files holding their target (the h200x2 format),
// device nodes become NAME.devnode holding "0oMODE MAJOR:MINOR uid=UID gid=GID".
// Every write is checked: the first that fails (a full disk, above all) is kept, naming the file, and nothing
// more is written, since a capture missing files replays as a node missing them (a GPU gone, a module not
// loaded), which is worse than no capture.
class CaptureWriter {
public:
    CaptureWriter(fs::path dir, GatherSummary& summary) : dir_(std::move(dir)), summary_(summary) {}

    // The first write that failed, if one did.
    const std::optional<Error>& failure() const { return failure_; }

    // Follows the path on the live machine component by component, recording every link on the way.
    // `read_limit`: the most bytes gpudx reads of the file, 0 when it only looked at it (a library is only
    // opened to tell a link recorded as a file from an ELF object), so a larger file is kept as an empty
    // placeholder: it exists, as in the live tree, and replays the same.
    // `prefix`: where the root the path was read in lies on this machine and in the capture alike ("" for the
    // node, "/proc/PID/root" for a process's own root); links are followed inside it.
    void capture(const std::string& path, RecordingRoot::Kind kind, size_t read_limit = kMaxCapturedFile,
                 const std::string& prefix = {}) {
        std::vector<std::string> todo;
        for (auto c : split(path, '/'))
            if (!c.empty() && c != ".") todo.emplace_back(c);
        std::reverse(todo.begin(), todo.end());
        std::string cur;
        int links = 0;
        while (!todo.empty()) {
            std::string c = todo.back();
            todo.pop_back();
            if (c == "..") {
                cur = cur.substr(0, cur.rfind('/'));
                continue;
            }
            std::string next = cur + "/" + c;
            bool last = todo.empty();
            struct stat st;
            if (::lstat((prefix + next).c_str(), &st) != 0) return;
            if (S_ISLNK(st.st_mode) && (!last || kind != RecordingRoot::Kind::link || true)) {
                char buf[4096];
                ssize_t n = ::readlink((prefix + next).c_str(), buf, sizeof buf - 1);
                if (n < 0 || ++links > 40) return;
                std::string target(buf, static_cast<size_t>(n));
                write_link(prefix + next, target);
                if (last && kind == RecordingRoot::Kind::link) return;
                if (target.starts_with("/")) cur.clear();
                std::vector<std::string> parts;
                for (auto t : split(target, '/'))
                    if (!t.empty() && t != ".") parts.emplace_back(t);
                for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
                continue;
            }
            cur = next;
            if (S_ISDIR(st.st_mode)) {
                ensure_dir(prefix + cur);
                if (last && kind == RecordingRoot::Kind::dir) capture_listing(prefix + cur);
            } else if (last) {
                capture_object(prefix + cur, st, read_limit);
            }
        }
    }

    void write_text(const std::string& inroot, const std::string& text) {
        fs::path p = dir_ / inroot.substr(1);
        if (failure_ || !make_parent(p)) return;
        if (auto written = write_whole_file(p.string(), text); !written) failure_ = written.error();
    }

private:
    bool make_parent(const fs::path& p) {
        std::error_code ec;
        fs::create_directories(p.parent_path(), ec);
        if (ec) failed(p.parent_path(), ec);
        return !failure_;
    }

    void failed(const fs::path& p, std::error_code ec) {
        if (!failure_)
            failure_ = Error{fmt::format("cannot write {}: {}", p.string(), ec.message()), p.string(), ec.value()};
    }

    void ensure_dir(const std::string& inroot) {
        fs::path p = dir_ / inroot.substr(1);
        std::error_code ec;
        if (failure_ || fs::is_directory(p, ec)) return;
        fs::remove(p, ec);  // a placeholder file from a listing
        if (fs::create_directories(p, ec)) ++summary_.directories;
        if (ec) failed(p, ec);
    }

    void write_link(const std::string& inroot, const std::string& target) {
        fs::path p = dir_ / inroot.substr(1);
        std::error_code ec;
        if (failure_) return;
        if (fs::exists(fs::symlink_status(p, ec))) {
            if (fs::is_directory(p, ec)) return;
        }
        if (!make_parent(p)) return;
        // A real link: Root follows it inside the capture, also as the last component of a file read
        // (/etc/os-release -> ../usr/lib/os-release). Links recorded as files are read too (h200x2).
        fs::remove(p, ec);
        fs::create_symlink(target, p, ec);
        if (ec == std::errc::no_space_on_device || ec == std::errc::io_error) return failed(p, ec);
        // A filesystem without links (some network and FAT mounts) keeps the target as the file's text.
        if (ec)
            if (auto written = write_whole_file(p.string(), target); !written) failure_ = written.error();
        ++summary_.links;
    }

    void capture_object(const std::string& inroot, const struct stat& st, size_t read_limit = kMaxCapturedFile) {
        if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
            // The owner too: whether a user in the video/render group may open /dev/kfd depends on it.
            write_text(inroot + ".devnode", fmt::format("0o{:o} {}:{} uid={} gid={}", static_cast<unsigned>(st.st_mode),
                                                        ::major(st.st_rdev), ::minor(st.st_rdev),
                                                        static_cast<unsigned>(st.st_uid), static_cast<unsigned>(st.st_gid)));
            ++summary_.device_nodes;
            return;
        }
        if (!S_ISREG(st.st_mode)) return;
        Root live("/");
        auto placeholder = [&] {
            fs::path p = dir_ / inroot.substr(1);
            std::error_code ec;
            if (fs::exists(p, ec)) return;  // already captured whole through another path
            write_text(inroot, {});
            if (st.st_size > 0) ++summary_.placeholders;
        };
        if (read_limit == 0) {  // only looked at (stat, exists), never read
            placeholder();
            return;
        }
        auto text = live.read_file(inroot, std::min(read_limit, kMaxCapturedFile));
        if (!text && text.error().sys_errno == EFBIG && read_limit < kMaxCapturedFile) {
            placeholder();
            return;
        }
        if (!text) {
            summary_.problems.push_back(fmt::format("{}: {}", inroot, text.error().message));
            return;
        }
        write_text(inroot, *text);
        ++summary_.files;
    }

    // Every entry of a listed directory must exist in the capture so the listing replays the same.
    void capture_listing(const std::string& inroot) {
        Root live("/");
        auto names = live.list_dir(inroot);
        if (!names) return;
        for (auto& n : *names) {
            std::string child = inroot + "/" + n;
            fs::path p = dir_ / child.substr(1);
            std::error_code ec;
            if (failure_) return;
            if (fs::exists(fs::symlink_status(p, ec)) || fs::exists(fs::path(p.string() + ".devnode"), ec)) continue;
            struct stat st;
            if (::lstat(child.c_str(), &st) != 0) continue;
            if (S_ISDIR(st.st_mode)) {
                fs::create_directories(p, ec);
                if (ec) failed(p, ec);
            } else if (S_ISLNK(st.st_mode)) {
                char buf[4096];
                ssize_t k = ::readlink(child.c_str(), buf, sizeof buf - 1);
                if (k >= 0) write_link(child, std::string(buf, static_cast<size_t>(k)));
            } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
                capture_object(child, st);
            } else if (make_parent(p)) {
                // A placeholder: listed, never read.
                if (auto written = write_whole_file(p.string(), {}); !written) failure_ = written.error();
            }
        }
    }

    fs::path dir_;
    GatherSummary& summary_;
    std::optional<Error> failure_;
};

// Runs a command with a time limit and returns its standard output, or nullopt when absent or failed.
std::optional<std::string> run_command(const std::vector<std::string>& argv, int timeout_s) {
    std::vector<std::string> full = {"timeout", "-k", "1", std::to_string(timeout_s)};
    full.insert(full.end(), argv.begin(), argv.end());
    std::vector<char*> cargv;
    for (auto& a : full) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0) return std::nullopt;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = ::posix_spawnp(&pid, "timeout", &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(pipefd[1]);
    if (rc != 0) {
        ::close(pipefd[0]);
        return std::nullopt;
    }
    std::string out;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(pipefd[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    ::close(pipefd[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
    return out;
}

// Raw kmsg records, as the kernel hands them out; the replay parses them like /dev/kmsg.
std::optional<std::string> read_kmsg() {
    int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string out;
    char buf[8192];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EPIPE) continue;  // records overwritten while reading
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
        if (out.empty() || out.back() != '\n') out += '\n';
    }
    ::close(fd);
    return out;
}

// /proc/PID/root (or /proc/self/root): a process's root, read as a link to tell whether it is gpudx's own.
bool is_proc_root_link(std::string_view path) {
    if (!path.starts_with("/proc/") || !path.ends_with("/root")) return false;
    auto middle = path.substr(6, path.size() - 6 - 5);
    return !middle.empty() && middle.find('/') == std::string_view::npos;
}

// A process's root link is kept as a file holding its target text, never as a real link: a link to "/" in the
// capture would send the files later captured under it (a process's own root) to this machine's root. A root
// read through subroot() is a folder of the capture instead, and no link is written there.
void capture_proc_root_link(CaptureWriter& writer, const std::string& path,
                            const std::vector<std::pair<std::string, std::shared_ptr<RecordingRoot>>>& subroots) {
    std::string p = path;
    if (p == "/proc/self/root") {
        writer.capture("/proc/self", RecordingRoot::Kind::link);
        p = fmt::format("/proc/{}/root", ::getpid());
    }
    for (auto& [sub, recorder] : subroots)
        if (sub == p) return;
    char buf[4096];
    ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    if (n > 0) writer.write_text(p, std::string(buf, static_cast<size_t>(n)));
}

}  // namespace

bool is_recorded_variable(std::string_view name) {
    static constexpr std::string_view prefixes[] = {"CUDA_", "NVIDIA_", "ROCR_", "HIP_", "GPU_", "SLURM_", "KUBERNETES_",
                                                    "GPUDX_"};
    for (auto p : prefixes)
        if (name.starts_with(p)) return true;
    return name == "LD_LIBRARY_PATH" || name == "LD_PRELOAD" || name == "OMPI_COMM_WORLD_LOCAL_RANK";
}

namespace {

// Where the capture is written before it is whole (core/staging_dir.hpp says how it never outlives gpudx):
//  - an unpacked capture: inside the output folder (made here when missing), so its entries are renamed into
//    place on the same filesystem, a mount point included;
//  - an archive: beside the archive, on the filesystem that must hold it anyway;
//  - an archive on standard output: in $TMPDIR, else /tmp.
Result<StagingDirectory> make_staging(const GatherOptions& options) {
    std::error_code ec;
    if (options.as_directory) {
        const std::string& out = options.output;
        if (fs::exists(out, ec) && !fs::is_empty(out, ec))
            return fail(out + ": output directory exists and is not empty", out);
        bool made = !fs::exists(out, ec);
        fs::create_directories(out, ec);
        if (ec) return fail(fmt::format("cannot create directory {}: {}", out, ec.message()), out, ec.value());
        return StagingDirectory::create(out, ".gpudx-gather-", made);
    }
    if (options.output == "-") {
        const char* tmpdir = std::getenv("TMPDIR");
        return StagingDirectory::create(tmpdir && *tmpdir ? tmpdir : "/tmp", "gpudx-gather-", false);
    }
    fs::path dir = fs::path(options.output).parent_path();
    return StagingDirectory::create(dir.empty() ? "." : dir.string(), ".gpudx-gather-", false);
}

}  // namespace

Result<GatherSummary> gather(const GatherOptions& options) {
    GatherSummary summary;
    auto staged = make_staging(options);
    if (!staged) return std::unexpected(staged.error());
    const fs::path staging = staged->path();

    RecordingRoot root;
    CollectOptions copts = options.collect;
    // The recorded driver answers must list every GPU, whatever CUDA_VISIBLE_DEVICES the caller has: the
    // stand-in libcuda applies the capture's recorded environment itself on replay.
    copts.all_devices = copts.probe_driver && copts.probe_cuda;
    auto snapshot = take_snapshot(root, copts);
    CaptureWriter writer(staging, summary);
    // A shared library gpudx only looked at (its presence and name are what matter) is kept as an empty
    // placeholder. Any other file only looked at is copied whole: some are read outside the Root API
    // (pci.ids is mapped through host_path, module files are read by libkmod).
    auto subroots = root.subroots();
    auto capture_all = [&](const RecordingRoot& recorded, const std::string& prefix) {
        for (auto& [path, kind] : recorded.seen()) {
            // A process's environment may hold secrets: only the variables gpudx judges are written (below).
            if (prefix.empty() && path.starts_with("/proc/") && path.ends_with("/environ")) continue;
            if (prefix.empty() && kind == RecordingRoot::Kind::link && is_proc_root_link(path)) {
                capture_proc_root_link(writer, path, subroots);
                continue;
            }
            size_t limit = kMaxCapturedFile;
            if (kind == RecordingRoot::Kind::file) limit = recorded.read_limit(path);
            else if (is_shared_library_name(path.substr(path.rfind('/') + 1))) limit = 0;
            writer.capture(path, kind, limit, prefix);
        }
        // A driver library whose version came from its bytes is kept as those bytes alone (not its 100 MB), at
        // the path the links above lead to.
        for (auto& [path, excerpt] : recorded.excerpts()) {
            auto inroot = recorded.canonical(path);
            if (!inroot) continue;
            writer.capture(*inroot, RecordingRoot::Kind::stat, 0, prefix);
            writer.write_text(prefix + *inroot, excerpt);
        }
    };
    capture_all(root, {});
    // Counter files as each reading saw them: the first where the file lives, the later one under
    // Root::kLaterSampleDir at the path it was asked by (docs/capture-format.md).
    for (auto& [key, text] : root.samples()) {
        auto& [path, which] = key;
        if (which == Root::Sample::later) {
            writer.write_text(std::string(Root::kLaterSampleDir) + path, text);
        } else if (auto inroot = root.canonical(path)) {
            writer.write_text(*inroot, text);
        }
    }
    for (auto& [path, sub] : subroots) capture_all(*sub, path);
    for (auto& p : snapshot.processes) {
        std::string environ_text;
        for (auto& [k, v] : p.environment.variables) environ_text += k + "=" + v + '\0';
        if (p.state == ProcessViewState::read) writer.write_text(fmt::format("/proc/{}/environ", p.pid), environ_text);
    }

    // What systemd said of the fabric manager and IMEX units, so the replay judges the same answer.
    if (!snapshot.services.units.empty()) {
        writer.write_text(std::string(kSystemctlShowRecord), format_systemctl_show(snapshot.services.units));
        summary.commands.push_back("systemctl-show.txt (fabric manager and IMEX units)");
    }

    std::string env;
    for (auto& [k, v] : copts.environment)
        if (is_recorded_variable(k)) env += k + "=" + v + "\n";
    writer.write_text("/_commands/environment.txt", env);

    if (auto kmsg = read_kmsg()) {
        writer.write_text("/_commands/dmesg.txt", *kmsg);
        summary.commands.push_back("dmesg.txt (/dev/kmsg records)");
    } else if (auto dm = run_command({"dmesg"}, 10)) {
        writer.write_text("/_commands/dmesg.txt", *dm);
        summary.commands.push_back("dmesg.txt (dmesg)");
    }
    if (options.run_commands) {
        struct Cmd { std::vector<std::string> argv; const char* file; };
        for (auto& c : {Cmd{{"nvidia-smi", "-q", "-x"}, "nvidia-smi-q.xml"}, Cmd{{"nvidia-smi", "-q"}, "nvidia-smi-q.txt"},
                        Cmd{{"ldconfig", "-p"}, "ldconfig-p.txt"}, Cmd{{"uname", "-a"}, "uname.txt"}}) {
            if (auto out = run_command(c.argv, 20)) {
                writer.write_text(std::string("/_commands/") + c.file, *out);
                summary.commands.push_back(c.file);
            }
        }
    }
    writer.write_text("/_commands/gpudx-snapshot.json", snapshot_to_json(snapshot).dump(2) + "\n");
    // What NVML and the CUDA driver answered, in the stand-in libraries' scenario format, so that
    // `gpudx diagnose --root CAPTURE --driver-lib-dir <stand-ins>` replays the driver layers too.
    if (copts.probe_driver && (!snapshot.nvml.library_path.empty() || !snapshot.cuda.library_path.empty())) {
        writer.write_text("/_driver/answers.json", record_driver_answers(snapshot.nvml, snapshot.cuda, snapshot.rocm_smi).dump(1) + "\n");
        summary.commands.push_back("_driver/answers.json (NVML and CUDA answers)");
    }
    if (options.front_page) {
        writer.write_text("/report.html", options.front_page(snapshot));
        summary.commands.push_back("report.html (the node page: open it first)");
    }
    writer.write_text("/_commands/README", "Captured by gpudx " GPUDX_VERSION
                                           " gather at " + snapshot.collected_at +
                                               ". Open report.html beside _commands/ first (the node as gpudx saw it).\n"
                                               "Replay with: gpudx diagnose --root <this directory>\n"
                                               "Format: docs/capture-format.md in the gpudx repository.\n");

    if (auto failed = writer.failure()) return std::unexpected(*failed);

    if (options.as_directory) {
        if (auto published = staged->publish_into(options.output); !published)
            return std::unexpected(published.error());
        return summary;
    }
    // tar and gzip write into a pipe, not to the name given: gpudx writes the archive itself, so that a full disk
    // is an error naming the file, a regular file is replaced atomically and a link or device is handled as for
    // `-o` (core/output_file.hpp), and `-` is standard output.
    auto archive = run_command({"tar", "-C", staging.string(), "-czf", "-", "."}, 300);
    staged->remove();
    if (!archive) return fail("tar failed packing the capture (tar and gzip must be on PATH)", options.output);
    if (options.output == "-") {
        summary.archive = std::move(*archive);
        return summary;
    }
    if (auto written = write_output_file(options.output, *archive); !written) return std::unexpected(written.error());
    return summary;
}

}  // namespace gpudx
