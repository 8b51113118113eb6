// User-space driver and runtime libraries against the kernel module.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "rules/engine/families.hpp"
#include "core/text.hpp"
#include "core/version.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"libs.version_mismatch", Layer::libraries, Severity::error, {C::libraries, C::module},
     "the libcuda or libnvidia-ml the loader picks is another version than the kernel module (a warning for "
     "the CUDA forward-compatibility package)"},
    {"libs.multiple_copies", Layer::libraries, Severity::warning, {C::libraries},
     "copies of one library with different versions on the loader's path (info when versions are unknown)"},
    {"libs.stray_libcuda", Layer::libraries, Severity::warning, {C::libraries},
     "a libcuda.so.1 outside the driver's directories"},
    {"libs.stub_picked", Layer::libraries, Severity::error, {C::libraries},
     "the loader picks the CUDA toolkit's link-time stub for libcuda or libnvidia-ml: there is no driver behind it"},
    {"libs.runtime_too_new", Layer::libraries, Severity::error, {C::libraries, C::module},
     "the CUDA runtime is newer than the driver branch supports (a warning within one major version)"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

// Highest CUDA version each driver branch supports (NVIDIA's CUDA toolkit release notes, table 3).
struct BranchSupport {
    unsigned branch;
    unsigned cuda_major, cuda_minor;
};
constexpr BranchSupport kBranchSupport[] = {
    {450, 11, 0}, {455, 11, 1}, {460, 11, 2}, {465, 11, 3}, {470, 11, 4}, {495, 11, 5}, {510, 11, 6},
    {515, 11, 7}, {520, 11, 8}, {525, 12, 0}, {530, 12, 1}, {535, 12, 2}, {545, 12, 3}, {550, 12, 4},
    {555, 12, 5}, {560, 12, 6}, {565, 12, 7}, {570, 12, 8}, {575, 12, 9}, {580, 13, 0},
};

std::optional<unsigned> branch_of(std::string_view version) {
    auto dot = version.find('.');
    auto b = parse_uint(version.substr(0, dot));
    if (!b || *b > 100000) return std::nullopt;
    return static_cast<unsigned>(*b);
}

// The newest CUDA a branch supports; nullopt for a branch newer than the table (it supports at least the last).
std::optional<BranchSupport> support_of(unsigned branch) {
    if (branch > kBranchSupport[std::size(kBranchSupport) - 1].branch) return std::nullopt;
    std::optional<BranchSupport> best;
    for (auto& s : kBranchSupport)
        if (s.branch <= branch) best = s;
    return best;
}

bool has_soname_prefix(const ResolvedLibrary& l, std::string_view stem) { return l.soname.starts_with(stem); }

bool is_standard_driver_dir(std::string_view dir) {
    static constexpr std::string_view kDirs[] = {
        "/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib",
        "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib64/nvidia", "/usr/lib/nvidia",
        "/usr/lib/x86_64-linux-gnu/nvidia/current", "/run/nvidia/driver/usr/lib/x86_64-linux-gnu"};
    for (auto d : kDirs)
        if (dir == d) return true;
    // The CUDA forward-compatibility package is a deliberate copy (judged by the version rule instead).
    return dir.starts_with("/usr/local/cuda") && dir.ends_with("/compat");
}

std::string dir_of(std::string_view path) {
    auto pos = path.rfind('/');
    return std::string(pos == std::string_view::npos || pos == 0 ? std::string_view("/") : path.substr(0, pos));
}

std::string copies_text(const ResolvedLibrary& lib) {
    std::string s;
    for (auto& c : lib.copies)
        s += fmt::format("{}{} ({}, {})", s.empty() ? "" : "; ", c.path, version_shown(c), c.found_by);
    return s;
}

void version_mismatch(const CheckContext& ctx, const ResolvedLibrary& lib, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.module.nvidia_driver_version || !lib.chosen || lib.chosen->version.empty()) return;
    const auto& kernel = *s.module.nvidia_driver_version;
    const auto& user = lib.chosen->version;
    if (user == kernel) return;
    bool compat = lib.chosen->found_by == "compat dir" || lib.chosen->real_path.find("/compat/") != std::string::npos;
    auto ub = branch_of(user), kb = branch_of(kernel);
    bool forward_compat = compat && lib.soname == "libcuda.so.1" && ub && kb && *ub > *kb;
    Finding f = rule("libs.version_mismatch").finding(forward_compat ? Severity::warning : Severity::error, {});
    f.message = forward_compat
                    ? fmt::format("{} {} comes from the CUDA forward-compatibility package on kernel module {}: supported "
                                  "only on data-center GPUs and only for the branches that package lists",
                                  lib.soname, user, kernel)
                    : fmt::format("the loader picks {} {} but the kernel module is {}: {}", lib.soname, user, kernel,
                                  lib.soname == "libnvidia-ml.so.1" ? "NVML fails with \"Driver/library version mismatch\""
                                                                    : "cuInit fails or the driver misbehaves");
    f.evidence.push_back({lib.chosen->path, fmt::format("resolves to {} (version {}); {}", lib.chosen->real_path,
                                                        version_shown(*lib.chosen), lib.reason)});
    f.evidence.push_back({"/proc/driver/nvidia/version", kernel});
    f.next_step = forward_compat
                      ? "Confirm this GPU and kernel branch are in the cuda-compat support matrix; otherwise remove the "
                        "compat directory from LD_LIBRARY_PATH / ld.so.conf."
                      : fmt::format("Make user space match the module: reinstall the {} driver user-space package (or, "
                                    "after a driver upgrade without reboot, reboot or reload the module); in a "
                                    "container, restart it so the toolkit injects the host's libraries. Then run "
                                    "`ldconfig` and check `ldconfig -p | grep {}`.",
                                    kernel, lib.soname);
    out.push_back(std::move(f));
}

bool is_compat_copy(const LibraryCopy& c) {
    return c.found_by == "compat dir" || c.real_path.find("/compat/") != std::string::npos;
}

// The CUDA forward-compatibility folder (/usr/local/cuda/compat in NVIDIA's CUDA images) is found by looking
// there, but the loader opens it only when LD_LIBRARY_PATH or ld.so.conf names it: until then it is no copy
// the loader could pick, and no conflict.
bool loader_may_pick(const LibrariesLayer& layer, const ResolvedLibrary& lib, const LibraryCopy& c) {
    if (!is_compat_copy(c) || (lib.chosen && lib.chosen->path == c.path)) return true;
    std::string dir = dir_of(c.path);
    auto named = [&](const std::vector<std::string>& dirs) {
        return std::any_of(dirs.begin(), dirs.end(), [&](std::string d) {
            while (d.size() > 1 && d.back() == '/') d.pop_back();
            return d == dir;
        });
    };
    return named(layer.ld_library_path) || named(layer.ld_so_conf_dirs);
}

void multiple_copies(const LibrariesLayer& layer, const ResolvedLibrary& all, std::vector<Finding>& out) {
    ResolvedLibrary lib = all;
    std::erase_if(lib.copies, [&](const LibraryCopy& c) { return !loader_may_pick(layer, all, c); });
    if (lib.copies.size() < 2) return;
    std::set<std::string> versions;
    bool unknown = false;
    for (auto& c : lib.copies) {
        if (c.version.empty()) unknown = true;
        else versions.insert(c.version);
    }
    if (versions.size() < 2 && !unknown) return;  // identical copies do no harm
    // A version written with fewer components ("13", from a soname) may be the same release as a full one
    // ("13.1.80", from the file): they differ only when two of them contradict each other.
    bool differ = false;
    for (auto a = versions.begin(); a != versions.end(); ++a)
        for (auto b = std::next(a); b != versions.end(); ++b)
            if (!versions_compatible(*a, *b)) differ = true;
    if (!differ && !unknown) return;
    Finding f = rule("libs.multiple_copies").finding(differ ? Severity::warning : Severity::info, {});
    std::string winner =
        lib.chosen ? fmt::format("{} ({})", lib.chosen->path, version_shown(*lib.chosen)) : std::string("none of them");
    f.message = differ ? fmt::format("{} copies of {} with different versions; the loader picks {}: {}", lib.copies.size(),
                                     lib.soname, winner, lib.reason)
                       : fmt::format("{} copies of {}, versions not all known; the loader picks {}: {}",
                                     lib.copies.size(), lib.soname, winner, lib.reason);
    if (lib.chosen && is_compat_copy(*lib.chosen) && lib.soname == "libcuda.so.1")
        f.message += "; that is the CUDA forward-compatibility libcuda (cuda-compat), which works only on data-center "
                     "GPUs and only over the driver branches its package supports";
    f.evidence.push_back({"loader search (LD_LIBRARY_PATH, ld.so.cache, default dirs)", copies_text(lib)});
    f.next_step = differ ? fmt::format("Remove the stale copies (keep the one matching the kernel module), run "
                                       "`ldconfig`, and confirm with `ldconfig -p | grep {}`; a job that sets "
                                       "LD_LIBRARY_PATH may still load another copy.",
                                       lib.soname)
                         : fmt::format("Check that every copy resolves to the same version: `readlink -f` each path "
                                       "listed; remove any that is not the kernel module's version.");
    out.push_back(std::move(f));
}

// libs.stub_picked: the stubs folder on ld.so.conf or LD_LIBRARY_PATH (a build-time setting left in an image).
void stub_picked(const ResolvedLibrary& lib, std::vector<Finding>& out) {
    if (!is_driver_library(lib.soname)) return;
    if (!lib.chosen || !(is_toolkit_stub(lib.chosen->path) || is_toolkit_stub(lib.chosen->real_path))) return;
    Finding f = rule("libs.stub_picked").finding({});
    f.message = fmt::format("the loader picks {} for {}: the CUDA toolkit's link-time stub, with no driver behind it "
                            "({})",
                            lib.chosen->real_path, lib.soname,
                            lib.soname == "libcuda.so.1" ? "cuInit fails with CUDA_ERROR_STUB_LIBRARY, error 34"
                                                         : "NVML cannot initialise");
    f.evidence.push_back({lib.chosen->path, fmt::format("-> {} ({})", lib.chosen->real_path, lib.reason)});
    f.next_step = fmt::format("Take the stubs folder ({}) off LD_LIBRARY_PATH and out of /etc/ld.so.conf.d, delete "
                              "the {} link ldconfig made in it, and run `ldconfig`: stubs are for linking only.",
                              dir_of(lib.chosen->path), lib.soname);
    out.push_back(std::move(f));
}

void stray_libcuda(const ResolvedLibrary& lib, std::vector<Finding>& out) {
    if (lib.soname != "libcuda.so.1") return;
    for (auto& c : lib.copies) {
        auto dir = dir_of(c.path);
        // A stub is the toolkit's own file, judged when the loader picks it (libs.stub_picked).
        if (is_standard_driver_dir(dir) || is_toolkit_stub(c.path) || is_toolkit_stub(c.real_path)) continue;
        Finding f = rule("libs.stray_libcuda").finding({});
        f.message = fmt::format("a copy of libcuda.so.1 sits in {} ({}), outside the driver's directories: it outlives "
                                "driver upgrades and shadows the real driver for any job that finds it first",
                                dir, version_shown(c));
        f.evidence.push_back({c.path, fmt::format("-> {} (found by {})", c.real_path, c.found_by)});
        f.next_step = fmt::format("Delete {} (applications must not ship libcuda; it belongs to the driver), then run "
                                  "`ldconfig`.",
                                  c.path);
        out.push_back(std::move(f));
    }
}

void runtime_too_new(const CheckContext& ctx, const ResolvedLibrary& lib, std::string_view driver_version,
                     std::string_view driver_source, std::vector<Finding>& out) {
    if (!has_soname_prefix(lib, "libcudart.so") || !lib.chosen || lib.chosen->version.empty()) return;
    auto parts = split(lib.chosen->version, '.');
    auto major = parse_uint(parts[0]);
    auto minor = parts.size() > 1 ? parse_uint(parts[1]) : std::optional<uint64_t>{};
    auto branch = branch_of(driver_version);
    if (!major || !branch) return;
    auto support = support_of(*branch);
    if (!support) return;
    bool major_too_new = *major > support->cuda_major;
    bool minor_too_new = !major_too_new && *major == support->cuda_major && minor && *minor > support->cuda_minor;
    if (!major_too_new && !minor_too_new) return;
    (void)ctx;
    // Within one major version the runtime still starts (minor version compatibility) but loses PTX JIT and
    // newer features; across a major version cudaGetDeviceCount fails with "driver version is insufficient".
    Finding f = rule("libs.runtime_too_new").finding(major_too_new ? Severity::error : Severity::warning, {});
    f.message = major_too_new
                    ? fmt::format("CUDA runtime {} needs a newer driver: branch {} supports CUDA up to {}.{}; CUDA calls "
                                  "fail with \"CUDA driver version is insufficient for CUDA runtime version\"",
                                  lib.chosen->version, *branch, support->cuda_major, support->cuda_minor)
                    : fmt::format("CUDA runtime {} is newer than branch {} supports ({}.{}): it runs only through minor "
                                  "version compatibility (no JIT of newer PTX, newer APIs fail)",
                                  lib.chosen->version, *branch, support->cuda_major, support->cuda_minor);
    f.evidence.push_back({lib.chosen->path, fmt::format("{} -> {} ({})", lib.soname, lib.chosen->real_path, lib.reason)});
    f.evidence.push_back({std::string(driver_source), std::string(driver_version)});
    f.next_step = fmt::format("Install a driver of a branch that supports CUDA {} (or the cuda-compat package on "
                              "data-center GPUs), or use a runtime/container built for CUDA {}.{} or older.",
                              lib.chosen->version, support->cuda_major, support->cuda_minor);
    out.push_back(std::move(f));
}

}  // namespace

void check_libraries(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    auto* st = s.collector(Collector::libraries);
    if (!st || st->state != CollectorState::ok) return;

    // The user-space driver decides which CUDA versions work; the module's version stands in when libcuda's is unknown.
    std::string driver_version, driver_source;
    for (auto& lib : s.libraries.libraries)
        if (lib.soname == "libcuda.so.1" && lib.chosen && !lib.chosen->version.empty()) {
            driver_version = lib.chosen->version;
            driver_source = lib.chosen->path;
        }
    if (driver_version.empty() && s.module.nvidia_driver_version) {
        driver_version = *s.module.nvidia_driver_version;
        driver_source = "/proc/driver/nvidia/version";
    }

    for (auto& lib : s.libraries.libraries) {
        if (is_driver_library(lib.soname)) version_mismatch(ctx, lib, out);
        multiple_copies(s.libraries, lib, out);
        stray_libcuda(lib, out);
        stub_picked(lib, out);
        if (!driver_version.empty()) runtime_too_new(ctx, lib, driver_version, driver_source, out);
    }
}

constinit const RuleFamily kLibrariesFamily{"libraries", Layer::libraries, kRules, check_libraries};

}  // namespace gpudx
