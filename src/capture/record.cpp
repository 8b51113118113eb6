#include "capture/record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "identity/visible_devices.hpp"

namespace gpudx {
namespace {

std::optional<std::string> env_value(const std::map<std::string, std::string>& env, std::initializer_list<const char*> names) {
    for (auto n : names)
        if (auto it = env.find(n); it != env.end() && !it->second.empty()) return it->second;
    return std::nullopt;
}

// "sha256:" and 64 hex digits inside text (an image reference "repo@sha256:...", or the digest alone).
std::string find_digest(std::string_view text) {
    for (size_t pos = text.find("sha256:"); pos != std::string_view::npos; pos = text.find("sha256:", pos + 1)) {
        auto hex = text.substr(pos + 7, 64);
        if (hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
            return "sha256:" + to_lower(hex);
    }
    return {};
}

ContainerImage image_from_text(std::string_view text, std::string source) {
    ContainerImage img;
    img.digest = find_digest(text);
    // A bare digest names no repository: keep only the digest then.
    if (!(text.starts_with("sha256:") && text.size() == 71)) img.reference = sanitize_utf8(text);
    img.source = std::move(source);
    return img;
}

// An OCI runtime bundle (Slurm's --container) carries the image in its config's annotations when the tool
// that built it recorded it; key names differ by tool, so any "*digest" / "*image*" annotation is taken.
std::optional<ContainerImage> image_from_bundle(const std::string& bundle, const FileReader& read_file) {
    if (!read_file) return std::nullopt;
    std::string path = bundle + "/config.json";
    auto text = read_file(path);
    if (!text) return std::nullopt;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("annotations") || !j["annotations"].is_object())
        return std::nullopt;
    ContainerImage img;
    img.source = path;
    for (auto& [k, v] : j["annotations"].items()) {
        if (!v.is_string()) continue;
        auto value = v.get<std::string>();
        auto key = to_lower(k);
        if (img.digest.empty() && key.ends_with("digest")) img.digest = find_digest(value);
        if (img.reference.empty() && (key == "org.opencontainers.image.ref.name" || key.ends_with("image-name") ||
                                      key.ends_with("image.name") || key.ends_with(".image")))
            img.reference = sanitize_utf8(value);
    }
    if (img.digest.empty() && !img.reference.empty()) img.digest = find_digest(img.reference);
    if (img.digest.empty() && img.reference.empty()) return std::nullopt;
    return img;
}

// podman writes image="..." into /run/.containerenv inside the container it runs.
std::optional<ContainerImage> image_from_containerenv(const FileReader& read_file) {
    if (!read_file) return std::nullopt;
    auto text = read_file("/run/.containerenv");
    if (!text) return std::nullopt;
    for (auto line : split_lines(*text)) {
        auto t = trim(line);
        if (!t.starts_with("image=")) continue;
        auto v = t.substr(6);
        if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
        if (v.empty()) return std::nullopt;
        return image_from_text(v, "/run/.containerenv");
    }
    return std::nullopt;
}

}  // namespace

std::optional<ContainerImage> container_image_from(const std::map<std::string, std::string>& env,
                                                   const FileReader& read_file) {
    // Set by the site (a prolog that knows the image) — wins over anything guessed.
    // Then pyxis (enroot under Slurm): its --container-image option, which SPANK exports to prolog and job.
    for (auto name : {"GPUDX_CONTAINER_IMAGE", "SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image"})
        if (auto v = env_value(env, {name})) return image_from_text(*v, name);
    if (auto bundle = env_value(env, {"SLURM_CONTAINER"})) {
        if (auto img = image_from_bundle(*bundle, read_file)) return img;
    }
    return image_from_containerenv(read_file);
}

Snapshot collect_gpu_inventory(const Root& root, const CollectOptions& options) {
    Snapshot s;
    s.gpudx_version = GPUDX_VERSION;
    s.root = root.base().string();
    CollectOptions o = options;
    o.probe_cuda = false;
    CollectContext ctx{root, o};
    // Each collector as in take_snapshot: one that throws loses only its own layer.
    for (Collector c : {Collector::host, Collector::pcie, Collector::module})
        s.collectors.push_back(run_host_collector(c, ctx, s));
    if (o.probe_driver) {
        // Fault-isolation boundary: the driver collectors.
        try {
            for (auto& st : collect_driver(ctx, s.nvml, s.cuda)) s.collectors.push_back(std::move(st));
        } catch (const std::exception& e) {
            s.collectors.push_back(status_error(Collector::nvml, Error{e.what(), {}, 0}));
        }
    }
    return s;
}

AllocationRecord build_allocation_record(const Snapshot& s, const std::map<std::string, std::string>& env,
                                         const std::string& node, const std::string& recorded_at,
                                         const FileReader& read_file) {
    AllocationRecord r;
    r.recorded_at = recorded_at;
    r.gpudx_version = GPUDX_VERSION;
    r.node = node;
    r.host = s.host.hostname;
    r.job_id = env_value(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
    r.step_id = env_value(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
    r.user = env_value(env, {"SLURM_JOB_USER", "USER"});
    r.context = env_value(env, {"SLURM_SCRIPT_CONTEXT"});
    r.image = container_image_from(env, read_file);

    auto gpus = node_gpus(s);
    if (gpus.empty()) {
        // No driver record (module not loaded): PCI addresses alone still say which slot a job was given.
        for (auto& addr : s.pcie.gpus) gpus.push_back({"", addr, 0, std::nullopt, {}});
        std::sort(gpus.begin(), gpus.end(), [](auto& a, auto& b) { return a.pci < b.pci; });
        for (size_t i = 0; i < gpus.size(); ++i) gpus[i].index = static_cast<unsigned>(i);
    }
    bool minors_known = !gpus.empty() && std::all_of(gpus.begin(), gpus.end(), [](auto& g) { return g.minor.has_value(); });

    // Slurm's own variables first: inside a job step CUDA_VISIBLE_DEVICES may already be renumbered 0..N-1
    // (ConstrainDevices), while SLURM_*_GPUS keep the node's indices, which follow gres.conf's /dev/nvidiaN.
    struct Source {
        const char* name;
        IndexMeaning meaning;
    };
    const Source sources[] = {{"SLURM_STEP_GPUS", IndexMeaning::device_minor},
                              {"SLURM_JOB_GPUS", IndexMeaning::device_minor},
                              {"CUDA_VISIBLE_DEVICES", IndexMeaning::pci_order},
                              {"NVIDIA_VISIBLE_DEVICES", IndexMeaning::pci_order}};
    VisibleDevices parsed;
    IndexMeaning meaning = IndexMeaning::pci_order;
    for (auto& src : sources) {
        auto it = env.find(src.name);
        if (it == env.end()) continue;
        r.variable = src.name;
        r.value = it->second;
        parsed = parse_visible_devices(it->second);
        meaning = src.meaning == IndexMeaning::device_minor && !minors_known ? IndexMeaning::pci_order : src.meaning;
        break;
    }
    auto add_whole = [&](const NodeGpu& g, unsigned ordinal, const std::string& entry) {
        r.gpus.push_back({ordinal, entry, g.uuid, g.pci, g.minor, {}});
    };
    if (r.variable.empty() || parsed.kind == VisibleDevicesKind::all || parsed.kind == VisibleDevicesKind::unset) {
        // Nothing restricts the job: it sees every GPU, in PCI order under CUDA_DEVICE_ORDER=PCI_BUS_ID.
        for (auto& g : gpus) add_whole(g, g.index, r.variable.empty() ? "" : "all");
        r.index_meaning = r.variable.empty() ? "" : "pci_order";
        return r;
    }
    if (parsed.kind != VisibleDevicesKind::list) return r;  // none, void, empty: no GPU for this job
    r.index_meaning = meaning == IndexMeaning::device_minor ? "device_minor" : "pci_order";
    unsigned ordinal = 0;
    for (auto& m : match_visible_devices(parsed, gpus, meaning)) {
        AllocatedGpu a;
        a.entry = m.entry.text;
        if (m.gpus.size() == 1) {
            auto& g = gpus[m.gpus[0]];
            a.local_ordinal = ordinal++;
            a.uuid = g.uuid;
            a.pci = g.pci;
            a.minor = g.minor;
            if (m.mig) {
                a.mig_uuid = m.entry.text;
                for (auto& mig : g.mig_uuids)
                    if (to_lower(mig).starts_with(to_lower(m.entry.text))) a.mig_uuid = mig;
            }
        }
        r.gpus.push_back(std::move(a));
    }
    // Entries CUDA ignores (after an invalid one) are kept so the record shows what the job was handed.
    for (size_t i = parsed.effective().size(); i < parsed.entries.size(); ++i) {
        AllocatedGpu a;
        a.entry = parsed.entries[i].text;
        r.gpus.push_back(std::move(a));
    }
    return r;
}

nlohmann::ordered_json allocation_record_to_json(const AllocationRecord& r) {
    auto opt = [](const std::optional<std::string>& v) -> nlohmann::ordered_json {
        return v ? nlohmann::ordered_json(sanitize_utf8(*v)) : nlohmann::ordered_json(nullptr);
    };
    auto str_or_null = [](const std::string& v) -> nlohmann::ordered_json {
        return v.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(sanitize_utf8(v));
    };
    nlohmann::ordered_json j;
    j["kind"] = kAllocationRecordKind;
    j["schema_version"] = kAllocationRecordSchemaVersion;
    j["recorded_at"] = r.recorded_at;
    j["gpudx_version"] = r.gpudx_version;
    j["node"] = str_or_null(r.node);
    j["host"] = str_or_null(r.host);
    j["job_id"] = opt(r.job_id);
    j["step_id"] = opt(r.step_id);
    j["user"] = opt(r.user);
    j["context"] = opt(r.context);
    nlohmann::ordered_json alloc;
    alloc["variable"] = str_or_null(r.variable);
    alloc["value"] = opt(r.value);
    alloc["indices"] = str_or_null(r.index_meaning);
    j["allocation"] = alloc;
    auto gpus = nlohmann::ordered_json::array();
    for (auto& g : r.gpus) {
        nlohmann::ordered_json e;
        e["local_ordinal"] = g.local_ordinal ? nlohmann::ordered_json(*g.local_ordinal) : nlohmann::ordered_json(nullptr);
        e["uuid"] = str_or_null(g.uuid);
        e["pci"] = str_or_null(g.pci);
        e["minor"] = g.minor ? nlohmann::ordered_json(*g.minor) : nlohmann::ordered_json(nullptr);
        e["mig_uuid"] = str_or_null(g.mig_uuid);
        e["entry"] = str_or_null(g.entry);
        gpus.push_back(std::move(e));
    }
    j["gpus"] = gpus;
    if (r.image) {
        nlohmann::ordered_json img;
        img["reference"] = str_or_null(r.image->reference);
        img["digest"] = str_or_null(r.image->digest);
        img["source"] = r.image->source;
        j["container_image"] = img;
    } else {
        j["container_image"] = nullptr;
    }
    return j;
}

Result<void> append_line(const std::string& path, std::string_view line, bool sync) {
    std::filesystem::path p(path);
    std::error_code ec;
    if (p.has_parent_path() && !std::filesystem::exists(p.parent_path(), ec)) {
        std::filesystem::create_directories(p.parent_path(), ec);
        if (ec) return fail("cannot create directory " + p.parent_path().string() + ": " + ec.message(), path);
    }
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return fail(std::strerror(errno), path, errno);
    std::string buf(line);
    buf += '\n';
    // One write: O_APPEND makes the seek-to-end and the write one step, so concurrent appenders never
    // interleave inside a line. A retry after a short write could, so a short write is an error.
    ssize_t n;
    do {
        n = ::write(fd, buf.data(), buf.size());
    } while (n < 0 && errno == EINTR);
    int err = errno;
    if (n < 0 || static_cast<size_t>(n) != buf.size()) {
        ::close(fd);
        if (n < 0) return fail(std::strerror(err), path, err);
        // A short write to a regular file is the filesystem running out of room.
        return fail(fmt::format("wrote only {} of {} bytes (disk full?)", n, buf.size()), path, ENOSPC);
    }
    if (sync && ::fsync(fd) != 0) {
        err = errno;
        ::close(fd);
        return fail(std::string("fsync: ") + std::strerror(err), path, err);
    }
    if (::close(fd) != 0) return fail(std::string("close: ") + std::strerror(errno), path, errno);
    return {};
}

}  // namespace gpudx
