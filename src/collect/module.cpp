#include "collect/module.hpp"

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "collect/amd.hpp"
#include "collect/collectors.hpp"
#include "collect/host.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {

std::vector<LoadedModule> parse_proc_modules(std::string_view text) {
    std::vector<LoadedModule> out;
    for (auto line : split_lines(text)) {
        auto f = split_ws(line);
        if (f.size() < 5) continue;
        auto size = parse_uint(f[1]);
        if (!size) continue;
        LoadedModule m;
        m.name = sanitize_utf8(f[0]);
        m.size = *size;
        m.state = sanitize_utf8(f[4]);
        // The taint flags, when any, are the last field in parentheses after the load address.
        if (f.size() >= 7 && f.back().starts_with("(") && f.back().ends_with(")")) m.taint = sanitize_utf8(f.back());
        out.push_back(std::move(m));
    }
    return out;
}

bool is_gpu_related_module(std::string_view name) {
    static constexpr std::string_view exact[] = {"amdgpu",   "amdxcp",         "nouveau",       "radeon",
                                                 "drm",      "drm_kms_helper", "drm_ttm_helper", "ttm",
                                                 "gpu_sched", "vfio_pci",      "vfio_pci_core", "gdrdrv",
                                                 "nv_peer_mem", "mlx5_core"};
    if (name.starts_with("nvidia")) return true;
    return std::find(std::begin(exact), std::end(exact), name) != std::end(exact);
}

std::optional<std::string> parse_nvidia_version(std::string_view text) {
    for (auto line : split_lines(text)) {
        if (!line.starts_with("NVRM version:")) continue;
        // The version is the first word of digits and dots (with a dot) after the module description.
        for (auto w : split_ws(line.substr(13))) {
            if (w.empty() || !std::isdigit(static_cast<unsigned char>(w.front()))) continue;
            if (w.find('.') == std::string_view::npos) continue;
            if (w.find_first_not_of("0123456789.") != std::string_view::npos) continue;
            return std::string(w);
        }
    }
    return std::nullopt;
}

NvidiaProcGpu parse_nvidia_gpu_information(std::string_view text, std::string_view dir_name) {
    NvidiaProcGpu g;
    for (auto& [k, v] : parse_key_values(text)) g.fields[sanitize_utf8(k)] = sanitize_utf8(v);
    auto get = [&](const char* key) -> std::string {
        auto it = g.fields.find(key);
        return it == g.fields.end() ? std::string() : it->second;
    };
    if (auto a = PciAddress::parse(dir_name)) g.address = a->str();
    else if (auto b = PciAddress::parse(get("Bus Location"))) g.address = b->str();
    g.model = get("Model");
    g.uuid = get("GPU UUID");
    g.vbios = get("Video BIOS");
    g.bus_type = get("Bus Type");
    g.firmware = get("GPU Firmware");
    if (auto m = parse_uint(get("Device Minor")); m && *m <= 0xffffffffu) g.minor = static_cast<uint32_t>(*m);
    auto ex = to_lower(get("GPU Excluded"));
    if (ex == "yes") g.excluded = true;
    else if (ex == "no") g.excluded = false;
    return g;
}

ModuleFile module_file_from_modinfo(std::string name, std::string path, const ModinfoFields& fields) {
    ModuleFile f;
    f.name = std::move(name);
    f.path = std::move(path);
    for (auto& [k, v] : fields) {
        // First value wins: a module has one of each, a second would be a malformed file.
        auto set = [&](std::string& dst) { if (dst.empty()) dst = sanitize_utf8(trim(v)); };
        if (k == "version") set(f.version);
        else if (k == "vermagic") set(f.vermagic);
        else if (k == "srcversion") set(f.srcversion);
        else if (k == "signer") set(f.signer);
    }
    return f;
}

std::string vermagic_release(std::string_view vermagic) {
    auto w = split_ws(vermagic);
    return w.empty() ? std::string() : std::string(w[0]);
}

bool is_module_file_for(std::string_view file_name, std::string_view module_name) {
    static constexpr std::string_view suffixes[] = {".ko", ".ko.xz", ".ko.zst", ".ko.gz"};
    for (auto suf : suffixes) {
        if (!file_name.ends_with(suf)) continue;
        auto stem = file_name.substr(0, file_name.size() - suf.size());
        if (stem.size() != module_name.size()) return false;
        for (size_t i = 0; i < stem.size(); ++i) {
            char a = stem[i] == '-' ? '_' : stem[i], b = module_name[i] == '-' ? '_' : module_name[i];
            if (a != b) return false;
        }
        return true;
    }
    return false;
}

std::string find_in_modules_dep(std::string_view text, std::string_view module_name) {
    for (auto line : split_lines(text)) {
        auto colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        auto path = trim(line.substr(0, colon));
        auto slash = path.rfind('/');
        auto base = slash == std::string_view::npos ? path : path.substr(slash + 1);
        if (is_module_file_for(base, module_name)) return std::string(path);
    }
    return {};
}

std::pair<std::string, std::string> parse_dkms_make_log_header(std::string_view text) {
    auto lines = split_lines(text.substr(0, std::min<size_t>(text.size(), 1024)));
    if (lines.empty()) return {};
    auto line = lines[0];
    auto at = line.find(" for kernel ");
    if (at == std::string_view::npos) return {};
    auto w = split_ws(line.substr(at + 12));
    if (w.empty()) return {};
    std::string arch;
    if (w.size() >= 2 && w[1].starts_with("(") && w[1].ends_with(")")) arch = std::string(w[1].substr(1, w[1].size() - 2));
    return {std::string(w[0]), arch};
}

namespace {

bool has_module_files(const Root& root, const std::string& dir) {
    auto names = root.list_dir(dir);
    if (!names) return false;
    return std::any_of(names->begin(), names->end(), [](auto& n) { return n.find(".ko") != std::string::npos; });
}

}  // namespace

std::vector<DkmsEntry> read_dkms_tree(const Root& root, std::vector<ReadProblem>& problems) {
    constexpr std::string_view kTree = "/var/lib/dkms";
    std::vector<DkmsEntry> out;
    auto modules = root.list_dir(kTree);
    if (!modules) return out;  // no DKMS on this node: normal
    for (auto& module : *modules) {
        std::string mdir = std::string(kTree) + "/" + module;
        auto entries = root.list_dir(mdir);
        if (!entries) continue;  // a file such as dkms_dbversion
        for (auto& version : *entries) {
            if (version.starts_with("kernel-")) continue;  // install links, read below
            std::string vdir = mdir + "/" + version;
            auto kernels = root.list_dir(vdir);
            if (!kernels) continue;
            std::vector<DkmsEntry> built_or_failed;
            for (auto& kernel : *kernels) {
                if (kernel == "source" || kernel == "build" || kernel == "tarball") continue;
                auto arches = root.list_dir(vdir + "/" + kernel);
                if (!arches) continue;
                for (auto& arch : *arches) {
                    std::string adir = vdir + "/" + kernel + "/" + arch;
                    DkmsEntry e{sanitize_utf8(module), sanitize_utf8(version), sanitize_utf8(kernel),
                                sanitize_utf8(arch), {}, {}};
                    if (root.exists(adir + "/log/make.log")) e.log = sanitize_utf8(adir + "/log/make.log");
                    if (has_module_files(root, adir + "/module")) {
                        e.state = root.exists(mdir + "/kernel-" + kernel + "-" + arch) ? "installed" : "built";
                    } else if (!e.log.empty()) {
                        e.state = "failed";  // a log was kept but no module came out of it
                    } else {
                        continue;
                    }
                    built_or_failed.push_back(std::move(e));
                }
            }
            // A build that failed leaves build/make.log behind (DKMS removes the build dir on success);
            // its header names the kernel it was for.
            std::string build_log = vdir + "/build/make.log";
            if (auto text = root.read_file(build_log, 16 * 1024 * 1024)) {
                auto [kernel, arch] = parse_dkms_make_log_header(*text);
                bool superseded = std::any_of(built_or_failed.begin(), built_or_failed.end(), [&](auto& e) {
                    return e.kernel == kernel && e.state != "failed" && (arch.empty() || e.arch == arch);
                });
                if (!superseded)
                    built_or_failed.push_back({sanitize_utf8(module), sanitize_utf8(version), sanitize_utf8(kernel),
                                               sanitize_utf8(arch), "failed", sanitize_utf8(build_log)});
            } else if (text.error().sys_errno != ENOENT) {
                problems.push_back({build_log, text.error().message});
            }
            for (auto& e : built_or_failed) out.push_back(std::move(e));
        }
    }
    return out;
}

namespace {

// Directories a GPU module package installs into (DKMS: updates/dkms; distro kmods: extra, kernel/nvidia-*).
void search_module_files(const Root& root, const std::string& dir, std::string_view module_name, int depth,
                         std::string& found) {
    if (depth < 0 || !found.empty()) return;
    auto names = root.list_dir(dir);
    if (!names) return;
    for (auto& n : *names) {
        if (is_module_file_for(n, module_name)) {
            found = dir + "/" + n;
            return;
        }
    }
    for (auto& n : *names)
        if (n.find('.') == std::string::npos) search_module_files(root, dir + "/" + n, module_name, depth - 1, found);
}

std::string in_root_path(const Root& root, const std::string& host) {
    std::string base = root.base().string();
    if (base == "/" || !host.starts_with(base + "/")) return sanitize_utf8(host);
    return sanitize_utf8(host.substr(base.size()));
}

// Reading a module file's modinfo costs a read of the whole file, decompressed when it is compressed (tens
// of milliseconds for a zstd nvidia.ko), so only the modules the rules compare are examined.
std::vector<std::string> modules_to_examine(const ModuleLayer& layer) {
    std::vector<std::string> names = {"nvidia"};
    for (auto& m : layer.loaded)
        if (m.name == "amdgpu") names.push_back(m.name);
    return names;
}

void examine_module_files(const Root& root, ModuleLayer& layer, std::vector<ReadProblem>& problems) {
    if (layer.kernel_release.empty()) {
        layer.files_unavailable = "kernel release unknown";
        return;
    }
    layer.module_dir = "/lib/modules/" + layer.kernel_release;
    auto st = root.stat(layer.module_dir);
    if (!st || st->type != FileType::directory) {
        layer.files_unavailable = fmt::format("no {} in this root: module files not examined", layer.module_dir);
        return;
    }
    auto host_dir = root.host_path(layer.module_dir);
    if (!host_dir) {
        layer.files_unavailable = host_dir.error().message;
        return;
    }
    std::string why;
    if (!kmod_available(&why)) {
        layer.files_unavailable = why + ": module files not examined";
        return;
    }
    auto ctx = KmodContext::open(*host_dir);
    if (!ctx) {
        layer.files_unavailable = ctx.error().message;
        return;
    }
    // libkmod reads these behind the root's back: stat() them so that a recording root (gpudx gather) keeps them.
    root.exists(layer.module_dir + "/modules.dep.bin");
    std::optional<std::string> modules_dep;  // read once, only when the binary index does not know a name
    for (auto& name : modules_to_examine(layer)) {
        std::string host = ctx->indexed_path(name), found_by = "modules.dep.bin";
        if (host.empty()) {
            if (!modules_dep) {
                auto t = root.read_file(layer.module_dir + "/modules.dep", 64 * 1024 * 1024);
                modules_dep = t ? std::move(*t) : std::string();
            }
            if (auto rel = find_in_modules_dep(*modules_dep, name); !rel.empty()) {
                if (auto h = root.host_path(layer.module_dir + "/" + rel); h && std::filesystem::exists(*h)) {
                    host = h->string();
                    found_by = "modules.dep";
                }
            }
        }
        if (host.empty()) {
            std::string in_root;
            for (const char* sub : {"updates", "extra", "kernel/drivers/video", "kernel/drivers/gpu/drm/amd/amdgpu",
                                    "kernel/drivers/gpu/drm/nouveau", "kernel/nvidia"}) {
                search_module_files(root, layer.module_dir + "/" + sub, name, 4, in_root);
                if (!in_root.empty()) break;
            }
            if (in_root.empty()) {
                // Ubuntu's prebuilt packages install into kernel/nvidia-<branch>/.
                if (auto top = root.list_dir(layer.module_dir + "/kernel"))
                    for (auto& d : *top)
                        if (d.starts_with("nvidia")) search_module_files(root, layer.module_dir + "/kernel/" + d, name, 2, in_root);
            }
            if (in_root.empty()) continue;
            auto h = root.host_path(in_root);
            if (!h) continue;
            host = h->string();
            found_by = "search";
        }
        root.exists(in_root_path(root, host));
        auto info = ctx->file_info(host);
        if (!info) {
            ModuleFile f;
            f.name = name;
            f.path = in_root_path(root, host);
            f.found_by = found_by;
            f.error = info.error().message;
            problems.push_back({f.path, f.error});
            layer.files.push_back(std::move(f));
            continue;
        }
        auto f = module_file_from_modinfo(name, in_root_path(root, host), *info);
        f.found_by = found_by;
        layer.files.push_back(std::move(f));
    }
}

void read_amdgpu(const Root& root, ModuleLayer& layer, std::vector<ReadProblem>& problems) {
    if (auto v = root.read_file("/sys/module/amdgpu/version", 4096)) layer.amdgpu_version = sanitize_utf8(trim(*v));
    // Firmware versions of each bound card: /sys/bus/pci/drivers/amdgpu/<addr>/fw_version/*_fw_version.
    auto bound = root.list_dir("/sys/bus/pci/drivers/amdgpu");
    if (!bound) return;
    for (auto& entry : *bound) {
        auto addr = PciAddress::parse(entry);
        if (!addr) continue;
        std::string dir = "/sys/bus/pci/drivers/amdgpu/" + entry + "/fw_version";
        auto files = root.list_dir(dir);
        if (!files) continue;
        for (auto& f : *files) {
            auto v = root.read_file(dir + "/" + f, 4096);
            if (!v) {
                problems.push_back({dir + "/" + f, v.error().message});
                continue;
            }
            layer.amdgpu_firmware[addr->str() + "/" + sanitize_utf8(f)] = sanitize_utf8(trim(*v));
        }
    }
}

}  // namespace

CollectorStatus collect_module(const CollectContext& ctx, ModuleLayer& layer) {
    const Root& root = ctx.root;
    CollectorStatus st = status_ok(Collector::module);
    auto& problems = st.problems;

    if (auto r = root.read_file("/proc/sys/kernel/osrelease", 4096)) {
        layer.kernel_release = sanitize_utf8(trim(*r));
    } else if (auto v = root.read_file("/proc/version", 64 * 1024)) {
        layer.kernel_release = parse_kernel_release_from_proc_version(*v);
    }
    if (layer.kernel_release.empty()) problems.push_back({"/proc/sys/kernel/osrelease", "running kernel release unknown"});

    auto modules = root.read_file("/proc/modules", 16 * 1024 * 1024);
    if (!modules) {
        if (layer.kernel_release.empty())
            return status_no_data(Collector::module, "no procfs in this root: " + modules.error().message, "/proc/modules");
        problems.push_back({"/proc/modules", modules.error().message});
    } else {
        for (auto& m : parse_proc_modules(*modules)) {
            if (!is_gpu_related_module(m.name)) continue;
            std::string vpath = "/sys/module/" + m.name + "/version";
            if (auto v = root.read_file(vpath, 4096)) m.version = sanitize_utf8(trim(*v));
            else if (v.error().sys_errno != ENOENT) problems.push_back({vpath, v.error().message});
            layer.loaded.push_back(std::move(m));
        }
    }

    if (auto v = root.read_file("/proc/driver/nvidia/version", 64 * 1024)) {
        auto lines = split_lines(*v);
        if (!lines.empty()) layer.nvidia_proc_version = sanitize_utf8(trim(lines[0]));
        layer.nvidia_driver_version = parse_nvidia_version(*v);
        if (!layer.nvidia_driver_version)
            problems.push_back({"/proc/driver/nvidia/version", "no version in the NVRM line: " + layer.nvidia_proc_version});
    } else if (v.error().sys_errno != ENOENT) {
        problems.push_back({"/proc/driver/nvidia/version", v.error().message});
    }

    if (auto dirs = root.list_dir("/proc/driver/nvidia/gpus")) {
        layer.nvidia_gpus_listed = true;
        for (auto& d : *dirs) {
            std::string path = "/proc/driver/nvidia/gpus/" + d + "/information";
            auto text = root.read_file(path, 64 * 1024);
            if (!text) {
                problems.push_back({path, text.error().message});
                // The directory alone says the driver has this GPU: keep it, what it could not read unknown.
                if (auto a = PciAddress::parse(d)) {
                    NvidiaProcGpu g;
                    g.address = a->str();
                    layer.nvidia_gpus.push_back(std::move(g));
                }
                continue;
            }
            auto g = parse_nvidia_gpu_information(*text, d);
            if (g.address.empty()) problems.push_back({path, "no PCI address in the directory name or Bus Location"});
            layer.nvidia_gpus.push_back(std::move(g));
        }
    }

    examine_module_files(root, layer, problems);
    layer.dkms = read_dkms_tree(root, problems);
    read_amdgpu(root, layer, problems);
    read_amd_gpus(root, layer, problems);

    // The file part's absence is not a fault of the node (captures, containers): said here, not as a finding.
    if (!layer.files_unavailable.empty()) st.message = layer.files_unavailable;
    return st;
}

}  // namespace gpudx
