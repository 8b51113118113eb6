// Which driver and runtime libraries the dynamic loader would pick, and every other copy lying around.
// The loader's order (glibc elf/dl-load.c): LD_LIBRARY_PATH, then /etc/ld.so.cache (first entry of the name that
// matches this machine's flags and whose file opens), then the default directories.
#include <fnmatch.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "collect/ld_so_cache.hpp"
#include "collect/library_version.hpp"
#include "core/text.hpp"

namespace gpudx {
namespace {

constexpr size_t kMaxCacheBytes = 64u << 20;
constexpr int kMaxConfDepth = 8;

// Libraries with one fixed soname, and families whose soname carries the runtime's major version.
constexpr std::string_view kFixedSonames[] = {"libcuda.so.1", "libnvidia-ml.so.1"};
constexpr std::string_view kVersionedStems[] = {"libcudart.so",        "libamdhip64.so",  "libhsa-runtime64.so",
                                                "librocm_smi64.so",    "libamd_smi.so"};

// glibc's built-in directories on x86-64 plus the Debian multiarch ones, in search order.
constexpr std::string_view kDefaultDirs[] = {"/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu",
                                             "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"};

struct SearchDir {
    std::string path;
    std::string label;
    std::vector<std::string> names;  // listing, sorted
};

std::string join(std::string_view dir, std::string_view name) {
    std::string p(dir);
    if (p.empty() || p.back() != '/') p += '/';
    p += name;
    return p;
}

std::string parent_dir(std::string_view path) {
    auto pos = path.rfind('/');
    if (pos == std::string_view::npos || pos == 0) return "/";
    return std::string(path.substr(0, pos));
}

class LibraryScan {
public:
    LibraryScan(const CollectContext& ctx, LibrariesLayer& layer, CollectorStatus& status)
        : ctx_(ctx), root_(ctx.root), layer_(layer), status_(status) {}

    void run() {
        read_ld_library_path();
        read_cache();
        read_conf("/etc/ld.so.conf", 0);
        read_rocm_installs();
        collect_dirs();
        if (auto t = root_.read_link("/usr/local/cuda")) layer_.cuda_symlink_target = *t;

        std::vector<std::pair<std::string, bool>> sonames;  // soname, carries its version
        for (auto s : kFixedSonames) sonames.emplace_back(s, false);
        std::set<std::string> versioned;
        for (auto stem : kVersionedStems) {
            for (auto& d : dirs_)
                for (auto& n : d.names)
                    if (auto so = versioned_soname(n, stem)) versioned.insert(*so);
            for (auto& e : cache_.entries)
                if (auto so = versioned_soname(e.name, stem)) versioned.insert(*so);
        }
        for (auto& so : versioned) sonames.emplace_back(so, true);
        for (auto& [so, keep] : sonames) {
            auto lib = resolve(so, keep);
            // The versioned families are listed only where a copy exists; libcuda and NVML always.
            if (keep && lib.copies.empty()) continue;
            layer_.libraries.push_back(std::move(lib));
        }
    }

private:
    void problem(std::string path, std::string message) { status_.problems.push_back({std::move(path), std::move(message)}); }

    void read_ld_library_path() {
        auto it = ctx_.options.environment.find("LD_LIBRARY_PATH");
        if (it == ctx_.options.environment.end()) return;
        // glibc splits on ':' and ';'; an empty element means the current directory, which we cannot know.
        for (auto part : split(it->second, ':'))
            for (auto p : split(part, ';')) {
                if (p.empty()) continue;
                layer_.ld_library_path.emplace_back(p);
            }
    }

    // /opt/rocm (normally a link, or the alternatives system's) and every /opt/rocm-<release>, with the release
    // each one's .info/version names.
    void read_rocm_installs() {
        auto names = root_.list_dir("/opt");
        if (!names) return;
        for (auto& n : *names) {
            if (n != "rocm" && !n.starts_with("rocm-")) continue;
            std::string path = "/opt/" + n;
            auto st = root_.stat(path);
            if (!st || st->type != FileType::directory) continue;
            RocmInstall r;
            r.path = sanitize_utf8(path);
            auto canon = root_.canonical(path);
            r.real_path = sanitize_utf8(canon ? *canon : path);
            std::string vpath = path + "/.info/version";
            if (auto v = root_.read_file(vpath, 4096)) {
                auto lines = split_lines(*v);
                if (!lines.empty()) r.version = sanitize_utf8(trim(lines[0]));
            } else if (v.error().sys_errno != ENOENT) {
                problem(vpath, v.error().message);
            }
            layer_.rocm_installs.push_back(std::move(r));
        }
        for (auto& r : layer_.rocm_installs)
            if (r.path == "/opt/rocm") layer_.rocm_release = r.version;
        if (layer_.rocm_release.empty() && layer_.rocm_installs.size() == 1) layer_.rocm_release = layer_.rocm_installs[0].version;
    }

    void read_cache() {
        auto bytes = root_.read_file("/etc/ld.so.cache", kMaxCacheBytes);
        if (bytes) {
            auto parsed = parse_ld_so_cache(*bytes);
            if (!parsed) {
                problem("/etc/ld.so.cache", parsed.error().message);
                return;
            }
            cache_ = std::move(*parsed);
            layer_.ld_so_cache_source = "/etc/ld.so.cache";
        } else {
            if (bytes.error().sys_errno != ENOENT) {
                problem("/etc/ld.so.cache", bytes.error().message);
                return;
            }
            // A capture made before gpudx existed recorded `ldconfig -p` instead of the binary cache.
            if (root_.is_live()) return;
            auto text = root_.read_file("/_commands/ldconfig-p.txt");
            if (!text) {
                if (text.error().sys_errno != ENOENT) problem("/_commands/ldconfig-p.txt", text.error().message);
                return;
            }
            auto parsed = parse_ldconfig_p(*text);
            if (!parsed) {
                problem("/_commands/ldconfig-p.txt", parsed.error().message);
                return;
            }
            cache_ = std::move(*parsed);
            layer_.ld_so_cache_source = "/_commands/ldconfig-p.txt";
        }
        layer_.ld_so_cache_format = cache_.format;
        for (auto& p : cache_.problems) problem(layer_.ld_so_cache_source, p);
    }

    void read_conf(const std::string& path, int depth) {
        if (depth > kMaxConfDepth) {
            problem(path, "ld.so.conf includes nested too deeply");
            return;
        }
        auto text = root_.read_file(path, 1u << 20);
        if (!text) {
            if (text.error().sys_errno != ENOENT) problem(path, text.error().message);
            return;
        }
        auto conf = parse_ld_so_conf(*text);
        for (auto& d : conf.dirs)
            if (std::find(layer_.ld_so_conf_dirs.begin(), layer_.ld_so_conf_dirs.end(), d) == layer_.ld_so_conf_dirs.end())
                layer_.ld_so_conf_dirs.push_back(d);
        for (auto& pattern : conf.includes) {
            std::string full = pattern.starts_with("/") ? pattern : join(parent_dir(path), pattern);
            for (auto& f : glob(full)) read_conf(f, depth + 1);
        }
    }

    // Wildcards only in the last component, which is what ld.so.conf files use.
    std::vector<std::string> glob(const std::string& pattern) {
        std::string dir = parent_dir(pattern);
        std::string name = pattern.substr(pattern.rfind('/') + 1);
        if (name.find_first_of("*?[") == std::string::npos) return {pattern};
        std::vector<std::string> out;
        auto names = root_.list_dir(dir);
        if (!names) return out;
        for (auto& n : *names)
            if (::fnmatch(name.c_str(), n.c_str(), FNM_PERIOD) == 0) out.push_back(join(dir, n));
        return out;
    }

    void add_dir(std::string path, std::string label) {
        while (path.size() > 1 && path.back() == '/') path.pop_back();
        for (auto& d : dirs_)
            if (d.path == path) return;
        // /lib -> usr/lib on merged-/usr systems: one folder, listed once under its first name.
        auto canon = root_.canonical(path);
        if (canon && !canonical_dirs_.insert(*canon).second) return;
        SearchDir d{path, std::move(label), {}};
        if (auto names = root_.list_dir(path)) d.names = std::move(*names);
        else if (names.error().sys_errno == EACCES) problem(path, names.error().message);
        dirs_.push_back(std::move(d));
    }

    void collect_dirs() {
        for (auto& d : layer_.ld_library_path) add_dir(d, "LD_LIBRARY_PATH");
        for (auto d : kDefaultDirs) add_dir(std::string(d), "default dir");
        for (auto& d : layer_.ld_so_conf_dirs) add_dir(d, "ld.so.conf dir");
        for (auto d : {"/usr/local/lib", "/usr/local/lib64", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"})
            add_dir(d, "other");
        // ROCm's libraries live in its own tree (/opt/rocm/lib, reached through ld.so.conf.d/*rocm*.conf).
        for (auto& r : layer_.rocm_installs) {
            add_dir(r.path + "/lib", "rocm dir");
            add_dir(r.path + "/lib64", "rocm dir");
        }
        if (auto names = root_.list_dir("/usr/local")) {
            for (auto& n : *names) {
                if (!n.starts_with("cuda")) continue;
                std::string base = "/usr/local/" + n;
                add_dir(base + "/lib64", "cuda dir");
                add_dir(base + "/lib", "cuda dir");
                add_dir(base + "/targets/x86_64-linux/lib", "cuda dir");
                add_dir(base + "/compat", "compat dir");
            }
        }
    }

    static bool is_compat_path(std::string_view p) { return p.find("/compat/") != std::string_view::npos; }

    LibraryCopy make_copy(const std::string& path, std::string found_by, const std::string& soname, bool keep) {
        LibraryCopy c;
        c.path = path;
        c.found_by = std::move(found_by);
        c.present = root_.exists(path);
        c.real_path = path;
        if (c.present) {
            if (auto canon = root_.canonical(path)) c.real_path = *canon;
            if (c.real_path == path) {
                // A link recorded in a capture as a file holding a bare target name ("libcuda.so.580.159.04").
                if (auto text = root_.read_file(path, 256)) {
                    auto t = trim(*text);
                    if (!t.empty() && t.find_first_of("/\n\t ") == std::string_view::npos && t.starts_with("lib"))
                        c.real_path = join(parent_dir(path), t);
                } else if (auto link = root_.read_link(path)) {
                    c.real_path = link->starts_with("/") ? *link : join(parent_dir(path), *link);
                }
            }
        }
        std::string base = c.real_path.substr(c.real_path.rfind('/') + 1);
        c.version = library_version_from_name(base, soname, keep);
        if (c.version.empty() && keep) c.version = library_version_from_name(soname, soname, true);
        if (!c.version.empty()) {
            c.version_from = kVersionFromName;
        } else if (c.present) {
            // A driver library whose name carries no version (a `cp -L` of libcuda.so.1): its bytes do.
            c.version = driver_version_in_file(root_, c.real_path);
            if (!c.version.empty()) c.version_from = kVersionFromContents;
        }
        return c;
    }

    std::string canonical_or(const std::string& p) {
        auto c = root_.canonical(p);
        return c ? *c : p;
    }

    ResolvedLibrary resolve(const std::string& soname, bool keep) {
        ResolvedLibrary lib;
        lib.soname = soname;
        std::set<std::string> seen;  // canonical paths: one file reached through two names is one copy
        auto add = [&](const std::string& path, const std::string& how) -> LibraryCopy* {
            std::string key = canonical_or(path);
            if (!seen.insert(key).second) {
                for (auto& c : lib.copies)
                    if (canonical_or(c.path) == key) return &c;
                return nullptr;
            }
            lib.copies.push_back(make_copy(path, how, soname, keep));
            return &lib.copies.back();
        };

        // 1. LD_LIBRARY_PATH, in order.
        std::optional<LibraryCopy> chosen;
        for (auto& d : dirs_) {
            if (d.label != "LD_LIBRARY_PATH") continue;
            if (!std::binary_search(d.names.begin(), d.names.end(), soname)) continue;
            auto* c = add(join(d.path, soname), "LD_LIBRARY_PATH");
            if (!chosen && c) {
                chosen = *c;
                lib.reason = fmt::format("first LD_LIBRARY_PATH directory holding {} ({}); LD_LIBRARY_PATH is searched "
                                         "before the loader cache",
                                         soname, d.path);
            }
        }
        // 2. The cache: the first entry of this name built for x86-64 whose file opens.
        std::vector<std::string> skipped;
        for (auto& e : cache_.entries) {
            if (e.name != soname) continue;
            if (!ld_cache_entry_is_x86_64(e.flags)) continue;
            std::string how = is_compat_path(e.path) ? "compat dir" : "ld.so.cache";
            auto* c = add(e.path, how);
            if (chosen || !c) continue;
            if (e.hwcap & kLdCacheHwcapExtension) {
                skipped.push_back(e.path + " (glibc-hwcaps subdirectory: used only on matching CPUs)");
                continue;
            }
            if (!c->present && root_.is_live()) {
                skipped.push_back(e.path + " (in the cache but missing)");
                continue;
            }
            chosen = *c;
            lib.reason = fmt::format("first {} entry for {} in {}{}", describe_ld_cache_flags(e.flags), soname,
                                     layer_.ld_so_cache_source,
                                     c->present ? "" : " (the file itself is not in this capture)");
            if (!layer_.ld_library_path.empty()) lib.reason += "; no LD_LIBRARY_PATH directory holds it";
        }
        // 3. Default directories, then every other place a copy may hide.
        for (auto& d : dirs_) {
            if (d.label == "LD_LIBRARY_PATH") continue;
            if (!std::binary_search(d.names.begin(), d.names.end(), soname)) continue;
            std::string how = d.label;
            auto* c = add(join(d.path, soname), how);
            if (!chosen && c && d.label == "default dir") {
                chosen = *c;
                lib.reason = fmt::format("found in the default directory {}; {}", d.path,
                                         cache_.entries.empty() ? "no loader cache was readable"
                                                                : "the loader cache has no usable entry for it");
            }
        }
        if (!skipped.empty()) {
            std::string s;
            for (auto& k : skipped) s += (s.empty() ? "" : ", ") + k;
            lib.reason += (lib.reason.empty() ? "" : "; ") + std::string("skipped ") + s;
        }
        if (chosen) {
            lib.chosen = std::move(chosen);
        } else if (lib.reason.empty()) {
            lib.reason = lib.copies.empty()
                             ? fmt::format("{} is not on the loader's path: not in LD_LIBRARY_PATH, {}, or the default "
                                           "directories",
                                           soname, layer_.ld_so_cache_source.empty() ? "the loader cache" : layer_.ld_so_cache_source)
                             : fmt::format("copies of {} exist but none is on the loader's path (not in LD_LIBRARY_PATH, "
                                           "the loader cache or the default directories)",
                                           soname);
        }
        return lib;
    }

    const CollectContext& ctx_;
    const Root& root_;
    LibrariesLayer& layer_;
    CollectorStatus& status_;
    LdCache cache_;
    std::vector<SearchDir> dirs_;
    std::set<std::string> canonical_dirs_;
};

}  // namespace

CollectorStatus collect_libraries(const CollectContext& ctx, LibrariesLayer& layer) {
    auto st = status_ok(Collector::libraries);
    LibraryScan(ctx, layer, st).run();
    return st;
}

}  // namespace gpudx
