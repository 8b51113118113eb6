// One process as it sees the GPU stack. Every file is read from the host: /proc/PID/{status,comm,cgroup,environ,
// maps,fd} through the node's root, and the process's own files through /proc/PID/root (its mount namespace's
// root, which the kernel resolves for a reader on the host), so nothing enters its namespaces and nothing runs in
// it. The loader view and the device nodes come from the node's own collectors run on that root.
#include "collect/process.hpp"

#include <cerrno>
#include <optional>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "collect/devices.hpp"
#include "collect/ld_so_cache.hpp"
#include "collect/library_version.hpp"
#include "collect/proc_cgroup.hpp"
#include "core/proc_maps.hpp"
#include "core/text.hpp"

namespace gpudx {
namespace {

// Libraries whose soname is fixed, and families whose soname carries their major version.
constexpr std::string_view kMappedFixedSonames[] = {"libcuda.so.1", "libnvidia-ml.so.1"};
constexpr std::string_view kMappedVersionedStems[] = {"libcudart.so", "libnccl.so",      "libcudnn.so",
                                                "libcublas.so", "libamdhip64.so", "libhsa-runtime64.so"};

// "libcuda.so.580.95.05" -> "libcuda.so.1"; "libcudart.so.12.4.127" -> "libcudart.so.12"; nullopt for others.
std::optional<std::string> gpu_library_soname(std::string_view name) {
    for (auto so : kMappedFixedSonames) {
        auto stem = so.substr(0, so.rfind('.'));  // libcuda.so
        if (name == stem || name.starts_with(std::string(stem) + ".")) return std::string(so);
    }
    for (auto stem : kMappedVersionedStems)
        if (auto so = versioned_soname(name, stem)) return so;
    return std::nullopt;
}

bool is_gone(const Error& e) { return e.sys_errno == ENOENT || e.sys_errno == ESRCH; }
bool is_denied(const Error& e) { return e.sys_errno == EACCES || e.sys_errno == EPERM; }

class ProcessReader {
public:
    ProcessReader(const Root& root, int pid, const NodeView& node)
        : root_(root), node_(node), dir_("/proc/" + std::to_string(pid)) {
        view_.pid = pid;
        view_.state = ProcessViewState::read;
    }

    ProcessView run() {
        if (!read_identity()) return std::move(view_);
        if (!read_environment() || !read_maps() || !read_open_devices()) return std::move(view_);
        read_own_root();
        // Files read through a root whose process has exited read as missing: gone counts for the whole view.
        if (!root_.exists(dir_ + "/status")) mark_gone(dir_, "it exited while gpudx read it");
        return std::move(view_);
    }

private:
    void mark_gone(const std::string& path, std::string why) {
        view_.state = ProcessViewState::gone;
        view_.problem = fmt::format("{}: {}", path, why);
    }

    // False when the view ends here (gone or denied); a file that fails otherwise is a problem and the rest counts.
    bool failed(const Error& e, const std::string& path) {
        if (is_gone(e)) {
            mark_gone(path, view_.command.empty() ? "no such process (it exited, or never ran)"
                                                  : "it exited while gpudx read it");
            return false;
        }
        if (is_denied(e)) {
            view_.state = ProcessViewState::denied;
            std::string owner = view_.user.empty() ? (view_.uid ? fmt::format("uid {}", *view_.uid) : "its owner")
                                                   : view_.user;
            view_.problem = fmt::format("{}: {}: run as its owner ({}) or root", path, e.message, owner);
            return false;
        }
        view_.problems.push_back({path, e.message});
        return true;
    }

    bool read_identity() {
        std::string path = dir_ + "/status";
        auto text = root_.read_file(path, 1 << 16);
        if (!text) return failed(text.error(), path);
        auto st = parse_proc_status(*text);
        if (st.state == "Z" || st.state == "X") {
            mark_gone(path, "it has exited (a zombie its parent has not reaped)");
            view_.command = sanitize_utf8(st.name);
            return false;
        }
        view_.uid = st.uid;
        if (auto comm = root_.read_file(dir_ + "/comm", 4096)) view_.command = sanitize_utf8(trim(*comm));
        if (view_.command.empty()) view_.command = sanitize_utf8(st.name);
        if (st.uid)
            if (auto passwd = root_.read_file("/etc/passwd", 4 << 20)) {
                // /etc/passwd has /etc/group's layout in the fields read (NAME:x:ID:...).
                auto names = parse_etc_group(*passwd);
                if (auto it = names.find(*st.uid); it != names.end()) view_.user = it->second;
            }
        // Its cgroup first: the container the host sees it in names the runtime and id best.
        add_container_from_cgroup(root_, dir_ + "/cgroup", view_.environment.container);
        if (auto text = root_.read_file(dir_ + "/cgroup", 1 << 16))
            view_.slurm_job_id = cgroup_owner(primary_cgroup_path(parse_proc_cgroup(*text))).slurm_job_id;
        auto mine = root_.read_link("/proc/self/ns/mnt");
        auto theirs = root_.read_link(dir_ + "/ns/mnt");
        if (mine && theirs) view_.own_mount_namespace = *mine != *theirs;
        // Same mount namespace and same root (not chrooted elsewhere): its files are gpudx's own, read directly
        // rather than through /proc/PID/root (a third of the time: no per-component resolution).
        auto my_root = root_.read_link("/proc/self/root");
        auto their_root = root_.read_link(dir_ + "/root");
        shares_root_ = view_.own_mount_namespace == false && my_root && their_root && *my_root == *their_root;
        return true;
    }

    bool read_environment() {
        std::string path = dir_ + "/environ";
        auto text = root_.read_file(path, 4 << 20);
        if (!text) return failed(text.error(), path);
        environment_ = parse_proc_environ(*text);
        if (auto it = environment_.find("SLURM_JOB_ID"); it != environment_.end() && !it->second.empty())
            view_.slurm_job_id = sanitize_utf8(it->second);
        return true;
    }

    bool read_maps() {
        std::string path = dir_ + "/maps";
        auto text = root_.read_file(path, 64 << 20);
        if (!text) return failed(text.error(), path);
        view_.mapped = parse_proc_maps(*text);
        return true;
    }

    bool read_open_devices() {
        auto devices = open_gpu_devices(root_, view_.pid);
        if (!devices) return failed(devices.error(), dir_ + "/fd");
        view_.open_devices = std::move(*devices);
        return true;
    }

    bool same_loader_path(const std::map<std::string, std::string>& node_environment) const {
        auto value = [](const std::map<std::string, std::string>& env) -> std::optional<std::string> {
            auto it = env.find("LD_LIBRARY_PATH");
            return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
        };
        return value(environment_) == value(node_environment);
    }

    // A mapped driver library whose name carries no version (a `cp -L` of libcuda.so.1 in its application folder
    // or image) is read inside its root for the version its bytes carry. A deleted one is no longer there.
    void read_mapped_versions(const Root& own) {
        for (auto& m : view_.mapped) {
            if (!m.version.empty() || m.deleted || !is_driver_library(m.soname)) continue;
            m.version = driver_version_in_file(own, m.path);
            if (!m.version.empty()) m.version_from = kVersionFromContents;
        }
    }

    // Its loader's next pick, its container files and its /dev, read inside its own root by the node's collectors.
    void read_own_root() {
        std::shared_ptr<const Root> subroot;
        if (!shares_root_) subroot = root_.subroot(dir_ + "/root");
        const Root& own = subroot ? *subroot : root_;
        read_mapped_versions(own);
        CollectOptions options;
        options.environment = environment_;
        CollectContext ctx{own, options};
        auto keep = [&](const CollectorStatus& st) {
            for (auto& p : st.problems) view_.problems.push_back({(subroot ? dir_ + "/root" : "") + p.path, p.message});
        };
        if (shares_root_ && node_.libraries && node_.environment && same_loader_path(*node_.environment))
            view_.libraries = *node_.libraries;
        else
            keep(collect_libraries(ctx, view_.libraries));
        keep(collect_environment(ctx, view_.environment));
        if (shares_root_ && node_.device_nodes) {
            view_.device_nodes = *node_.device_nodes;
        } else {
            DevicesLayer devices;
            CollectorStatus st;
            collect_device_nodes(own, devices, st);
            keep(st);
            view_.device_nodes = std::move(devices.nodes);
        }
    }

    const Root& root_;
    const NodeView& node_;
    std::string dir_;
    ProcessView view_;
    std::map<std::string, std::string> environment_;
    bool shares_root_ = false;
};

}  // namespace

std::vector<MappedLibrary> parse_proc_maps(std::string_view text) {
    std::vector<MappedLibrary> out;
    for (const auto& mapping : parse_proc_mappings(text)) {
        if (!mapping.path.starts_with("/")) continue;
        std::string file(mapping.file_name());
        auto soname = gpu_library_soname(file);
        if (!soname) continue;
        std::string p = sanitize_utf8(mapping.path);
        bool seen = false;
        for (auto& m : out) seen = seen || m.path == p;
        if (seen) continue;
        MappedLibrary m;
        m.soname = *soname;
        m.path = p;
        bool versioned_family = !is_driver_library(*soname);
        m.version = library_version_from_name(file, *soname, versioned_family);
        if (!m.version.empty()) m.version_from = kVersionFromName;
        m.deleted = mapping.deleted;
        out.push_back(std::move(m));
    }
    return out;
}

std::map<std::string, std::string> parse_proc_environ(std::string_view text) {
    std::map<std::string, std::string> env;
    for (auto entry : split(text, '\0')) {
        auto eq = entry.find('=');
        if (eq == std::string_view::npos || eq == 0) continue;
        env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
    return env;
}

ProcessView collect_process(const Root& root, int pid, const NodeView& node) {
    // Fault-isolation boundary: a collector (one process's view); what it throws is the view's problem.
    try {
        return ProcessReader(root, pid, node).run();
    } catch (const std::exception& e) {
        ProcessView v;
        v.pid = pid;
        v.state = ProcessViewState::read;
        v.problems.push_back({"/proc/" + std::to_string(pid), std::string("collector failed: ") + e.what()});
        return v;
    }
}

}  // namespace gpudx
