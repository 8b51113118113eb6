// GPU device nodes (NVIDIA and AMD), whether the caller can open them, and which processes hold them.
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "collect/devices.hpp"
#include "collect/proc_cgroup.hpp"
#include "core/text.hpp"

namespace gpudx {

std::map<uint32_t, std::string> parse_etc_group(std::string_view text) {
    std::map<uint32_t, std::string> out;
    for (auto line : split_lines(text)) {
        if (line.empty() || line.front() == '#') continue;
        auto f = split(line, ':');
        if (f.size() < 3 || f[0].empty()) continue;
        auto gid = parse_uint(trim(f[2]));
        if (!gid || *gid > 0xffffffffu) continue;
        out.emplace(static_cast<uint32_t>(*gid), sanitize_utf8(f[0]));
    }
    return out;
}

namespace {

constexpr unsigned kMaxFdsPerProcess = 65536;

bool is_gpu_node_name(std::string_view n) {
    if (n == "nvidiactl" || n == "nvidia-uvm" || n == "nvidia-uvm-tools" || n == "nvidia-modeset" || n == "kfd")
        return true;
    if (n.starts_with("nvidia") && n.size() > 6 && parse_uint(n.substr(6))) return true;
    return false;
}

bool is_gpu_device_path(std::string_view target) {
    return target.starts_with("/dev/nvidia") || target == "/dev/kfd" || target.starts_with("/dev/dri/render");
}

std::string type_name(FileType t) {
    switch (t) {
        case FileType::char_device: return "char";
        case FileType::block_device: return "block";
        case FileType::directory: return "directory";
        default: return "other";
    }
}

DeviceNode describe_node(const Root& root, const std::string& path, const std::map<uint32_t, std::string>& groups) {
    DeviceNode n;
    n.path = path;
    auto st = root.stat(path);
    if (!st) {
        // Only a node that is not there is missing; one that cannot be examined is unknown (collect_nodes says why).
        n.type = st.error().sys_errno == ENOENT || st.error().sys_errno == ENOTDIR ? "missing" : "unknown";
        return n;
    }
    n.type = type_name(st->type);
    n.major = st->major;
    n.minor = st->minor;
    n.mode = st->mode & 07777;
    // The group matters for /dev/kfd and /dev/dri/renderD* (video / render): ROCm users must be in it.
    n.gid = st->gid;
    if (n.gid)
        if (auto it = groups.find(*n.gid); it != groups.end()) n.group = it->second;
    if (root.is_live() && (st->type == FileType::char_device || st->type == FileType::block_device))
        n.caller_can_open = ::access(path.c_str(), R_OK | W_OK) == 0;
    return n;
}

void collect_nodes_in(const Root& root, DevicesLayer& layer, CollectorStatus& status) {
    auto dev = root.list_dir("/dev");
    if (!dev) {
        status.problems.push_back({"/dev", dev.error().message});
        return;
    }
    std::map<uint32_t, std::string> groups;
    if (auto text = root.read_file("/etc/group", 1 << 20)) groups = parse_etc_group(*text);
    std::vector<std::string> names;
    for (auto& n : *dev)
        if (is_gpu_node_name(n)) names.push_back(n);
    // nvidia10 after nvidia9: natural order keeps the report readable.
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
        if (a.size() != b.size() && a.starts_with("nvidia") && b.starts_with("nvidia") && parse_uint(a.substr(6)) &&
            parse_uint(b.substr(6)))
            return a.size() < b.size();
        return a < b;
    });
    for (auto& n : names) layer.nodes.push_back(describe_node(root, "/dev/" + n, groups));
    if (std::find(dev->begin(), dev->end(), "nvidia-caps") != dev->end()) {
        auto caps = describe_node(root, "/dev/nvidia-caps", groups);
        layer.nodes.push_back(caps);
        if (auto list = root.list_dir("/dev/nvidia-caps"))
            for (auto& c : *list) layer.nodes.push_back(describe_node(root, "/dev/nvidia-caps/" + c, groups));
    }
    if (std::find(dev->begin(), dev->end(), "dri") != dev->end()) {
        if (auto list = root.list_dir("/dev/dri"))
            for (auto& c : *list)
                if (c.starts_with("renderD")) layer.nodes.push_back(describe_node(root, "/dev/dri/" + c, groups));
    }
}

// Nodes that exist but could not be examined (EACCES on a directory of /dev, an unreadable record): a
// problem each, with the reason.
void record_unknown_nodes(const Root& root, const DevicesLayer& layer, CollectorStatus& status) {
    for (auto& n : layer.nodes)
        if (n.type == "unknown")
            if (auto st = root.stat(n.path); !st) status.problems.push_back({n.path, st.error().message});
}

// The GPU device files among a process's open files (the entries of PROC_DIR/fd), sorted, each once.
std::vector<std::string> gpu_devices_among(const Root& root, const std::string& proc_dir, const std::vector<std::string>& fds) {
    std::vector<std::string> devices;
    unsigned n = 0;
    for (auto& fd : fds) {
        if (++n > kMaxFdsPerProcess) break;
        auto target = root.read_link(proc_dir + "/fd/" + fd);
        if (!target) continue;
        auto t = trim(*target);
        if (!is_gpu_device_path(t)) continue;
        std::string dev(t);
        if (std::find(devices.begin(), devices.end(), dev) == devices.end()) devices.push_back(dev);
    }
    std::sort(devices.begin(), devices.end());
    return devices;
}

void collect_holders(const Root& root, DevicesLayer& layer, CollectorStatus& status) {
    auto proc = root.list_dir("/proc");
    if (!proc) {
        status.problems.push_back({"/proc", proc.error().message});
        return;
    }
    // Hybrid hierarchies (systemd's default on older distributions) mount the unified tree one level down.
    std::string v2_mount = "/sys/fs/cgroup";
    if (!root.exists("/sys/fs/cgroup/cgroup.controllers") && root.exists("/sys/fs/cgroup/unified/cgroup.controllers"))
        v2_mount = "/sys/fs/cgroup/unified";
    const auto self = static_cast<uint64_t>(::getpid());
    for (auto& entry : *proc) {
        auto pid = parse_uint(entry);
        if (!pid || *pid == 0 || *pid > INT32_MAX) continue;
        std::string base = "/proc/" + entry;
        auto fds = root.list_dir(base + "/fd");
        if (!fds) {
            // A process that exited since /proc was listed is no finding; a table we may not read is counted.
            if (fds.error().sys_errno == EACCES || fds.error().sys_errno == EPERM) ++layer.processes_unreadable;
            continue;
        }
        ++layer.processes_scanned;
        DeviceHolder h;
        h.devices = gpu_devices_among(root, base, *fds);
        if (h.devices.empty()) continue;
        h.pid = static_cast<int>(*pid);
        auto status_text = root.read_file(base + "/status", 1 << 16);
        ProcStatus st;
        if (status_text) st = parse_proc_status(*status_text);
        // gpudx's own driver probes (children of this process) hold the GPUs while /proc is scanned: they
        // are not the node's holders.
        if (root.is_live() && (*pid == self || (st.ppid && *st.ppid == self))) continue;
        if (auto comm = root.read_file(base + "/comm", 4096)) h.name = sanitize_utf8(trim(*comm));
        if (status_text) {
            h.uid = st.uid;
            h.state = st.state;
            if (h.name.empty()) h.name = sanitize_utf8(st.name);
        }
        if (auto text = root.read_file(base + "/cgroup", 1 << 16)) {
            auto lines = parse_proc_cgroup(*text);
            h.cgroup = primary_cgroup_path(lines);
            auto owner = cgroup_owner(h.cgroup);
            h.container_id = owner.container_id;
            h.slurm_job_id = owner.slurm_job_id;
            // Judged only where the hierarchy itself is visible: a missing mount says nothing about the job.
            auto where = cgroup_directory(lines, v2_mount);
            if (!where.mount.empty() && root.exists(where.mount)) h.cgroup_exists = root.exists(where.directory);
        }
        layer.holders.push_back(std::move(h));
    }
    std::sort(layer.holders.begin(), layer.holders.end(), [](auto& a, auto& b) { return a.pid < b.pid; });
    if (layer.processes_unreadable)
        status.problems.push_back(
            {"/proc/*/fd", fmt::format("{} processes' open files could not be read (run as root to see every holder)",
                                       layer.processes_unreadable)});
}

}  // namespace

void collect_device_nodes(const Root& root, DevicesLayer& layer, CollectorStatus& status) {
    collect_nodes_in(root, layer, status);
    record_unknown_nodes(root, layer, status);
}

Result<std::vector<std::string>> open_gpu_devices(const Root& root, int pid) {
    std::string base = "/proc/" + std::to_string(pid);
    auto fds = root.list_dir(base + "/fd");
    if (!fds) return std::unexpected(fds.error());
    return gpu_devices_among(root, base, *fds);
}

CollectorStatus collect_devices(const CollectContext& ctx, DevicesLayer& layer) {
    auto st = status_ok(Collector::devices);
    collect_device_nodes(ctx.root, layer, st);
    collect_holders(ctx.root, layer, st);
    return st;
}

}  // namespace gpudx
