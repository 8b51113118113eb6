#include "rules/comparisons/matrix.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/input_file.hpp"
#include "core/text.hpp"
#include "core/toml.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/engine/families.hpp"

namespace gpudx {

namespace {

// A divergence is filed under the layer whose value is outside the tested set.
using C = Collector;
constexpr Rule kRules[] = {
    {"matrix.no_class", Layer::pcie, Severity::warning, {C::host, C::module, C::nvml},
     "no class of the matrix fits the node"},
    {"matrix.review_overdue", Layer::pcie, Severity::warning, {}, "the node's class is past its review_by date"},
    {"matrix.gpu_model", Layer::pcie, Severity::error, {C::module, C::nvml},
     "GPUs of another model than the class's gpu_model"},
    {"matrix.gpu_count", Layer::pcie, Severity::error, {C::pcie, C::module, C::nvml},
     "fewer GPUs than the class's gpu_count (a warning for more)"},
    {"matrix.driver_untested", Layer::module, Severity::warning, {C::module, C::nvml},
     "the driver branch or version is outside the class's tested set"},
    {"matrix.kernel_untested", Layer::module, Severity::warning, {C::host, C::module},
     "the kernel is outside the class's tested set"},
    {"matrix.vbios_untested", Layer::pcie, Severity::warning, {C::module, C::nvml},
     "a GPU's VBIOS is outside the class's tested set"},
    {"matrix.fabric_manager_untested", Layer::driver, Severity::warning, {C::libraries},
     "the Fabric Manager version is outside the class's tested set"},
    {"matrix.cuda_untested", Layer::driver, Severity::warning, {C::cuda},
     "the CUDA driver API version is outside the class's tested set"},
    {"matrix.value_unknown", Layer::module, Severity::info, {C::module, C::nvml, C::cuda, C::libraries},
     "the class constrains a value this snapshot does not show"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

}  // namespace

constinit const RuleTable kMatrixRules{"matrix", kRules};

bool matches_any(const std::vector<std::string>& patterns, std::string_view value) {
    std::string v(value);
    for (auto& p : patterns)
        if (::fnmatch(p.c_str(), v.c_str(), FNM_CASEFOLD) == 0) return true;
    return false;
}

// ---- reading the TOML ---------------------------------------------------------------------------

namespace {

const char* type_name(const toml::node& n) {
    switch (n.type()) {
        case toml::node_type::table: return "a table";
        case toml::node_type::array: return "an array";
        case toml::node_type::string: return "a string";
        case toml::node_type::integer: return "an integer";
        case toml::node_type::floating_point: return "a number";
        case toml::node_type::boolean: return "a boolean";
        case toml::node_type::date: return "a date";
        case toml::node_type::time: return "a time";
        case toml::node_type::date_time: return "a date-time";
        default: return "nothing";
    }
}

// Walks the parsed document against the schema; the first problem wins and names its line.
class MatrixReader {
public:
    explicit MatrixReader(std::string source) : source_(std::move(source)) {}

    Result<Matrix> read(const toml::table& root) {
        Matrix m;
        m.path = source_;
        if (!check_keys(root, {"schema_version", "class"}, "the top level")) return failure();
        if (auto* v = root.get("schema_version")) {
            auto n = v->value<int64_t>();
            if (!v->is_integer() || !n) return bad(*v, "schema_version must be an integer");
            if (*n > kMatrixSchemaVersion)
                return bad(*v, fmt::format("schema_version {} is newer than this gpudx understands ({})", *n,
                                             kMatrixSchemaVersion));
        }
        auto* classes = root.get("class");
        if (!classes) return bad_at(1, "no node classes: add at least one [[class]] table");
        auto* arr = classes->as_array();
        if (!arr) return bad(*classes, "'class' must be an array of tables: write each class as [[class]]");
        std::set<std::string> names;
        for (auto& el : *arr) {
            auto* t = el.as_table();
            if (!t) return bad(el, "each [[class]] entry must be a table");
            NodeClass c;
            if (!read_class(*t, c)) return failure();
            if (!names.insert(c.name).second)
                return bad_at(c.line, fmt::format("class '{}' is defined twice", c.name));
            m.classes.push_back(std::move(c));
        }
        if (m.classes.empty()) return bad_at(1, "no node classes: add at least one [[class]] table");
        return m;
    }

private:
    bool read_class(const toml::table& t, NodeClass& c) {
        c.line = t.source().begin.line;
        if (!check_keys(t, {"name", "owner", "review_by", "description", "match", "tested", "accept"}, "[[class]]"))
            return false;
        if (!string_field(t, "name", c.name, true, "[[class]]")) return false;
        std::string where = fmt::format("class '{}'", c.name);
        if (!string_field(t, "owner", c.owner, true, where)) return false;
        if (!string_field(t, "description", c.description, false, where)) return false;
        auto* rb = t.get("review_by");
        if (!rb) return error_at(c.line, fmt::format("{} has no review_by date (YYYY-MM-DD)", where));
        if (auto* d = rb->as_date()) {
            c.review_by = {d->get().year, d->get().month, d->get().day};
        } else if (auto s = rb->value<std::string>(); s && rb->is_string()) {
            auto parsed = CalendarDate::parse(*s);
            if (!parsed) return error(*rb, fmt::format("{}: review_by '{}' is not a date (YYYY-MM-DD)", where, *s));
            c.review_by = *parsed;
        } else {
            return error(*rb, fmt::format("{}: review_by must be a date (YYYY-MM-DD), not {}", where, type_name(*rb)));
        }

        if (auto* mt = t.get("match")) {
            auto* tbl = mt->as_table();
            if (!tbl) return error(*mt, fmt::format("{}: match must be a table", where));
            std::string w = where + " match";
            if (!check_keys(*tbl, {"gpu_model", "gpu_count", "hostname"}, w)) return false;
            if (!string_field(*tbl, "gpu_model", c.match.gpu_model, false, w)) return false;
            if (auto* n = tbl->get("gpu_count")) {
                auto v = n->value<int64_t>();
                if (!n->is_integer() || !v || *v < 1 || *v > 4096)
                    return error(*n, fmt::format("{}: gpu_count must be a positive integer", w));
                c.match.gpu_count = static_cast<unsigned>(*v);
            }
            if (!string_list(*tbl, "hostname", c.match.hostnames, w)) return false;
        }
        if (auto* ts = t.get("tested")) {
            auto* tbl = ts->as_table();
            if (!tbl) return error(*ts, fmt::format("{}: tested must be a table", where));
            std::string w = where + " tested";
            if (!check_keys(*tbl, {"driver_branches", "driver_versions", "kernels", "vbios", "fabric_manager", "cuda"}, w))
                return false;
            if (!string_list(*tbl, "driver_branches", c.tested.driver_branches, w) ||
                !string_list(*tbl, "driver_versions", c.tested.driver_versions, w) ||
                !string_list(*tbl, "kernels", c.tested.kernels, w) || !string_list(*tbl, "vbios", c.tested.vbios, w) ||
                !string_list(*tbl, "fabric_manager", c.tested.fabric_manager, w) ||
                !string_list(*tbl, "cuda", c.tested.cuda, w))
                return false;
        }
        if (auto* ac = t.get("accept")) {
            auto* tbl = ac->as_table();
            if (!tbl) return error(*ac, fmt::format("{}: accept must be a table", where));
            std::string w = where + " accept";
            if (!check_keys(*tbl,
                            {"h2d_gbps", "d2h_gbps", "p2p_gbps", "p2p_pcie_gbps", "d2d_gbps", "memory_min_fraction",
                             "pairs"},
                            w))
                return false;
            AcceptThresholds a;
            if (!gbps(*tbl, "h2d_gbps", a.min_h2d_gbps, w) || !gbps(*tbl, "d2h_gbps", a.min_d2h_gbps, w) ||
                !gbps(*tbl, "p2p_gbps", a.min_p2p_gbps, w) || !gbps(*tbl, "p2p_pcie_gbps", a.min_p2p_pcie_gbps, w) ||
                !gbps(*tbl, "d2d_gbps", a.min_d2d_gbps, w))
                return false;
            if (auto* n = tbl->get("memory_min_fraction")) {
                auto v = n->value<double>();
                if (!n->is_number() || !v || *v <= 0 || *v > 1)
                    return error(*n, fmt::format("{}: memory_min_fraction must be a number in (0, 1]", w));
                a.min_memory_fraction = *v;
            }
            std::string pairs;
            if (!string_field(*tbl, "pairs", pairs, false, w)) return false;
            if (!pairs.empty()) a.pairs = pairs;
            c.accept = a;
        }
        return true;
    }

    bool check_keys(const toml::table& t, std::initializer_list<std::string_view> allowed, std::string_view where) {
        for (auto&& [key, value] : t) {
            if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
            unsigned line = key.source().begin.line ? key.source().begin.line : value.source().begin.line;
            return error_at(line, fmt::format("unknown key '{}' in {} (allowed: {})", key.str(), where,
                                              join_strings(std::vector<std::string>(allowed.begin(), allowed.end()))));
        }
        return true;
    }

    bool string_field(const toml::table& t, std::string_view key, std::string& out, bool required,
                      std::string_view where) {
        auto* n = t.get(key);
        if (!n) {
            if (required) return error_at(t.source().begin.line, fmt::format("{} has no '{}'", where, key));
            return true;
        }
        if (!n->is_string()) return error(*n, fmt::format("{}: {} must be a string, not {}", where, key, type_name(*n)));
        out = *n->value<std::string>();
        if (required && trim(out).empty()) return error(*n, fmt::format("{}: {} is empty", where, key));
        return true;
    }

    // A string or an array of strings.
    bool string_list(const toml::table& t, std::string_view key, std::vector<std::string>& out, std::string_view where) {
        auto* n = t.get(key);
        if (!n) return true;
        if (n->is_string()) {
            out.push_back(*n->value<std::string>());
            return true;
        }
        auto* arr = n->as_array();
        if (!arr)
            return error(*n, fmt::format("{}: {} must be a string or an array of strings, not {}", where, key,
                                         type_name(*n)));
        for (auto& el : *arr) {
            if (!el.is_string())
                return error(el, fmt::format("{}: every entry of {} must be a string, not {}", where, key, type_name(el)));
            out.push_back(*el.value<std::string>());
        }
        return true;
    }

    bool gbps(const toml::table& t, std::string_view key, std::optional<double>& out, std::string_view where) {
        auto* n = t.get(key);
        if (!n) return true;
        auto v = n->value<double>();
        if (!n->is_number() || !v || *v <= 0)
            return error(*n, fmt::format("{}: {} must be a positive number (GB/s)", where, key));
        out = *v;
        return true;
    }

    bool error(const toml::node& n, std::string message) { return error_at(n.source().begin.line, std::move(message)); }
    bool error_at(unsigned line, std::string message) {
        if (!error_) error_ = Error{fmt::format("{}:{}: {}", source_, line, message), source_, 0};
        return false;
    }
    std::unexpected<Error> bad(const toml::node& n, std::string message) {
        error(n, std::move(message));
        return failure();
    }
    std::unexpected<Error> bad_at(unsigned line, std::string message) {
        error_at(line, std::move(message));
        return failure();
    }
    std::unexpected<Error> failure() const {
        return std::unexpected(error_.value_or(Error{source_ + ": invalid matrix", source_, 0}));
    }

    std::string source_;
    std::optional<Error> error_;
};

}  // namespace

Result<Matrix> parse_matrix(std::string_view text, std::string_view source_name) {
    std::string source(source_name.empty() ? "matrix" : source_name);
    auto parsed = parse_toml(text, source);
    if (!parsed) return std::unexpected(parsed.error());
    const toml::table& root = *parsed;
    return MatrixReader(source).read(root);
}

Result<Matrix> load_matrix(const std::string& path) {
    auto text = read_input_file(path, 16u << 20);
    if (!text)
        return fail(fmt::format("{}: cannot read the matrix file: {}", path, text.error().message), path,
                    text.error().sys_errno);
    return parse_matrix(*text, path);
}

// ---- classifying and checking a node ------------------------------------------------------------

namespace {

bool model_fits(const NodeClass& c, const NodeRecord& node) {
    if (c.match.gpu_model.empty()) return true;
    auto model = dominant_gpu_model(node);
    return !model.empty() && matches_any({c.match.gpu_model}, model);
}

bool hostname_fits(const NodeClass& c, const NodeRecord& node) {
    if (c.match.hostnames.empty()) return true;
    return !node.hostname.empty() && matches_any(c.match.hostnames, node.hostname);
}

// Among candidates: the exact count, else the smallest count above the node's (cards lost), else the first.
const NodeClass* pick(const std::vector<const NodeClass*>& candidates, size_t gpus) {
    if (candidates.empty()) return nullptr;
    for (auto* c : candidates)
        if (!c->match.gpu_count || *c->match.gpu_count == gpus) return c;
    const NodeClass* best = nullptr;
    for (auto* c : candidates)
        if (*c->match.gpu_count > gpus && (!best || *c->match.gpu_count < *best->match.gpu_count)) best = c;
    return best ? best : candidates.front();
}

std::string listed(const std::vector<std::string>& v) { return v.empty() ? "(any)" : join_strings(v); }

}  // namespace

Classification classify_node(const Matrix& m, const NodeRecord& node) {
    Classification out;
    std::vector<const NodeClass*> fit, by_host;
    for (auto& c : m.classes) {
        if (!hostname_fits(c, node)) continue;
        if (model_fits(c, node))
            fit.push_back(&c);
        else if (!c.match.hostnames.empty())
            by_host.push_back(&c);
    }
    out.node_class = pick(fit, node.gpus.size());
    if (!out.node_class) {
        out.node_class = pick(by_host, node.gpus.size());
        out.model_mismatch = out.node_class != nullptr;
        fit = by_host;
    }
    for (auto* c : fit)
        if (c != out.node_class) out.also_fitting.push_back(c->name);
    return out;
}

MatrixCheck check_node_against_matrix(const Matrix& m, const NodeRecord& node, const CalendarDate& today) {
    MatrixCheck r;
    auto cls = classify_node(m, node);
    r.node_class = cls.node_class;
    r.also_fitting = cls.also_fitting;
    const std::string mfile = m.path.empty() ? std::string("matrix") : m.path;
    if (!cls.node_class) {
        std::vector<std::string> names;
        for (auto& c : m.classes) names.push_back(c.name);
        r.findings.push_back(
            rule("matrix.no_class")
                .finding(fmt::format("No class of the matrix fits this node (host '{}', {} x {})", node.hostname,
                                     node.gpus.size(),
                                     dominant_gpu_model(node).empty() ? "unknown GPU" : dominant_gpu_model(node)),
                         {{},
                          {{mfile, "classes: " + join_strings(names)}},
                          "Add a class for this kind of node to the matrix (owner, review_by, tested set), or fix the "
                          "class's "
                          "hostname/gpu_model patterns so that it fits."}));
        r.exit_code = exit_code_for(r.findings);
        return r;
    }
    const NodeClass& c = *cls.node_class;
    const std::string csrc = fmt::format("{}:{} class {}", mfile, c.line, c.name);

    if (c.review_by < today)
        r.findings.push_back(
            rule("matrix.review_overdue")
                .finding(
                    fmt::format("Class '{}' was due for review on {} (owner {})", c.name, c.review_by.str(), c.owner),
                    {{},
                     {{csrc, "review_by = " + c.review_by.str()}},
                     fmt::format("Ask {} to re-validate the tested set of '{}' and move review_by forward.", c.owner,
                                 c.name)}));

    if (cls.model_mismatch || !c.match.gpu_model.empty()) {
        Finding f = rule("matrix.gpu_model").finding("");
        for (auto& g : node.gpus) {
            if (g.model.empty() || matches_any({c.match.gpu_model}, g.model)) continue;
            f.subjects.push_back({g.uuid, g.pci});
            f.evidence.push_back({"/proc/driver/nvidia/gpus/" + g.pci + "/information", g.model});
        }
        if (!f.subjects.empty()) {
            f.message = fmt::format("{} GPU(s) are not of the class's model '{}'", f.subjects.size(), c.match.gpu_model);
            f.evidence.push_back({csrc, "gpu_model = " + c.match.gpu_model});
            f.next_step = "A card of another model is in a node of this class: check the hardware inventory, or "
                          "move the node to the right class.";
            r.findings.push_back(std::move(f));
        }
    }
    if (c.match.gpu_count && node.gpus.size() != *c.match.gpu_count) {
        bool fewer = node.gpus.size() < *c.match.gpu_count;
        std::string list;
        for (auto& g : node.gpus) list += (list.empty() ? "" : ", ") + g.pci;
        r.findings.push_back(
            rule("matrix.gpu_count")
                .finding(
                    fewer ? Severity::error : Severity::warning,
                    fmt::format("{} GPU(s) found, class '{}' has {}", node.gpus.size(), c.name, *c.match.gpu_count),
                    {{},
                     {{csrc, fmt::format("gpu_count = {}", *c.match.gpu_count)},
                      {"/sys/bus/pci/devices", list.empty() ? "no GPU" : list}},
                     fewer ? "Drain the node and find the missing card (gpudx diagnose; gpudx baseline diff names "
                             "which UUID is "
                             "gone)."
                           : "An extra card is present: check the inventory and the class's gpu_count."}));
    }

    auto unknown = [&](std::string_view what, const std::vector<std::string>& allowed) {
        r.findings.push_back(
            rule("matrix.value_unknown")
                .finding(
                    fmt::format("The class constrains the {} but this snapshot does not show it", what),
                    {{},
                     {{csrc, std::string(what) + " in " + listed(allowed)}},
                     "Collect the snapshot with the driver loaded (gpudx snapshot without --no-driver) to check it."}));
    };
    auto value_check = [&](const Rule& untested, std::string_view what, const std::string& value,
                           const std::vector<std::string>& allowed, const std::string& source, std::string next) {
        if (allowed.empty()) return;
        if (value.empty()) return unknown(what, allowed);
        if (matches_any(allowed, value)) return;
        r.findings.push_back(untested.finding(
            fmt::format("{} {} is not in the tested set of class '{}' ({})", what, value, c.name, listed(allowed)),
            {{}, {{source, value}, {csrc, listed(allowed)}}, std::move(next)}));
    };
    const std::string driver_next = fmt::format(
        "Install a tested driver version, or have {} test this one and add it to class '{}'.", c.owner, c.name);
    // An untested branch says it all; the version within it is then not reported again.
    bool branch_untested = !c.tested.driver_branches.empty() && !node.driver_branch.empty() &&
                           !matches_any(c.tested.driver_branches, node.driver_branch);
    value_check(rule("matrix.driver_untested"), "Driver branch", node.driver_branch, c.tested.driver_branches,
                "/proc/driver/nvidia/version", driver_next);
    if (!branch_untested)
        value_check(rule("matrix.driver_untested"), "Driver version", node.driver_version, c.tested.driver_versions,
                    "/proc/driver/nvidia/version", driver_next);
    value_check(
        rule("matrix.kernel_untested"), "Kernel", node.kernel_release, c.tested.kernels, "/proc/sys/kernel/osrelease",
        fmt::format("Boot a tested kernel, or have {} test this one and add it to class '{}'.", c.owner, c.name));
    value_check(rule("matrix.fabric_manager_untested"), "Fabric Manager", node.fabric_manager, c.tested.fabric_manager,
                "libraries layer",
                "Install the Fabric Manager build that matches the driver and is in the tested set.");
    value_check(rule("matrix.cuda_untested"), "CUDA driver version", cuda_version_text(node.cuda_driver_version),
                c.tested.cuda, "cuDriverGetVersion", driver_next);
    if (!c.tested.vbios.empty()) {
        Finding f = rule("matrix.vbios_untested").finding("");
        std::set<std::string> seen;
        bool any_unknown = false;
        for (auto& g : node.gpus) {
            if (g.vbios.empty()) {
                any_unknown = true;
                continue;
            }
            if (matches_any(c.tested.vbios, g.vbios)) continue;
            f.subjects.push_back({g.uuid, g.pci});
            f.evidence.push_back({"/proc/driver/nvidia/gpus/" + g.pci + "/information", "Video BIOS: " + g.vbios});
            seen.insert(to_lower(g.vbios));
        }
        if (!f.subjects.empty()) {
            f.message = fmt::format("{} GPU(s) run VBIOS {} outside the tested set of class '{}' ({})", f.subjects.size(),
                                    join_strings(std::vector<std::string>(seen.begin(), seen.end())), c.name,
                                    listed(c.tested.vbios));
            f.evidence.push_back({csrc, listed(c.tested.vbios)});
            f.next_step = fmt::format("Flash a tested VBIOS (vendor tool), or have {} test this one.", c.owner);
            r.findings.push_back(std::move(f));
        } else if (any_unknown && !node.gpus.empty()) {
            unknown("VBIOS", c.tested.vbios);
        }
    }
    std::stable_sort(r.findings.begin(), r.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
    r.exit_code = exit_code_for(r.findings);
    return r;
}

MatrixCheck check_against_matrix(const Matrix& m, const Snapshot& s, const CalendarDate& today) {
    return check_node_against_matrix(m, make_node_record(s), today);
}

const NodeClass* class_for(const Matrix& m, const Snapshot& s) {
    return classify_node(m, make_node_record(s)).node_class;
}

std::optional<AcceptThresholds> thresholds_for(const Matrix& m, const Snapshot& s) {
    auto* c = class_for(m, s);
    if (!c) return std::nullopt;
    return c->accept;
}

}  // namespace gpudx
