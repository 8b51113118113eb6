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
    {"matrix.nvlinks_below", Layer::driver, Severity::error, {C::nvml},
     "a GPU has fewer NVLinks active than its class's nvlinks_active (names the GPU and the links down); a class "
     "without nvlinks_active leaves the links to health.nvlink_down"},
    {"matrix.ib_port_missing", Layer::pcie, Severity::error, {C::infiniband},
     "the node has fewer InfiniBand/RoCE ports of a link layer than its class's [[class.expect.infiniband]] entry"},
    {"matrix.ib_port_not_active", Layer::pcie, Severity::error, {C::infiniband},
     "an InfiniBand/RoCE port the class expects is not ACTIVE (replaces ib.port_down and ib.port_link_up_not_active "
     "for the ports the class names)"},
    {"matrix.ib_rate_lower", Layer::pcie, Severity::warning, {C::infiniband},
     "an InfiniBand/RoCE port the class expects runs below the class's rate_gbps"},
    {"matrix.value_unknown", Layer::module, Severity::info, {C::module, C::nvml, C::cuda, C::libraries, C::infiniband},
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
        if (!check_keys(t, {"name", "owner", "review_by", "description", "match", "tested", "accept", "expect"},
                        "[[class]]"))
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
        if (auto* ex = t.get("expect")) {
            auto* tbl = ex->as_table();
            if (!tbl) return error(*ex, fmt::format("{}: expect must be a table", where));
            if (!read_expectations(*tbl, c.expect, where + " expect")) return false;
        }
        return true;
    }

    bool read_expectations(const toml::table& t, ClassExpectations& e, const std::string& where) {
        if (!check_keys(t, {"nvlinks_active", "infiniband"}, where)) return false;
        if (auto* n = t.get("nvlinks_active")) {
            auto v = n->value<int64_t>();
            if (!n->is_integer() || !v || *v < 0 || *v > 64)
                return error(*n, fmt::format("{}: nvlinks_active must be an integer from 0 to 64 (NVLinks active "
                                             "on each GPU)", where));
            e.nvlinks_active = static_cast<unsigned>(*v);
            e.nvlinks_line = n->source().begin.line;
        }
        auto* ib = t.get("infiniband");
        if (!ib) return true;
        const std::string w = where + " infiniband";
        // One entry as a table ([class.expect.infiniband]), several as an array of tables ([[...]]).
        if (auto* one = ib->as_table()) return read_ib_expectation(*one, e.infiniband.emplace_back(), w);
        auto* arr = ib->as_array();
        if (!arr)
            return error(*ib, fmt::format("{} must be a table: write each entry as [[class.expect.infiniband]]", w));
        for (auto& el : *arr) {
            auto* entry = el.as_table();
            if (!entry) return error(el, fmt::format("{}: each entry must be a table", w));
            if (!read_ib_expectation(*entry, e.infiniband.emplace_back(), w)) return false;
        }
        return true;
    }

    bool read_ib_expectation(const toml::table& t, IbPortExpectation& e, const std::string& where) {
        e.line = t.source().begin.line;
        if (!check_keys(t, {"ports", "rate_gbps", "link_layer", "devices"}, where)) return false;
        auto* n = t.get("ports");
        if (!n) return error_at(e.line, fmt::format("{} has no 'ports' (how many ports of the link layer)", where));
        auto v = n->value<int64_t>();
        if (!n->is_integer() || !v || *v < 1 || *v > 1024)
            return error(*n, fmt::format("{}: ports must be a positive integer", where));
        e.ports = static_cast<unsigned>(*v);
        if (auto* r = t.get("rate_gbps")) {
            auto rate = r->value<double>();
            if (!r->is_number() || !rate || *rate <= 0)
                return error(*r, fmt::format("{}: rate_gbps must be a positive number (Gb/s, as the port's rate "
                                             "file writes it: 400 for \"400 Gb/sec (4X NDR)\")", where));
            e.rate_gbps = *rate;
        }
        std::string layer;
        if (!string_field(t, "link_layer", layer, false, where)) return false;
        if (!layer.empty()) {
            if (to_lower(layer) == "infiniband") e.link_layer = "InfiniBand";
            else if (to_lower(layer) == "ethernet") e.link_layer = "Ethernet";
            else return error(*t.get("link_layer"), fmt::format("{}: link_layer must be \"InfiniBand\" or \"Ethernet\" "
                                                               "(RoCE), not '{}'", where, layer));
        }
        return string_list(t, "devices", e.devices, where);
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

std::string class_source(const std::string& mfile, unsigned line, const NodeClass& c) {
    return fmt::format("{}:{} class {}", mfile, line, c.name);
}

Finding value_unknown(std::string message, Evidence expected) {
    return rule("matrix.value_unknown")
        .finding(std::move(message),
                 {{},
                  {std::move(expected)},
                  "Collect the snapshot with the driver loaded and every collector answering (gpudx snapshot "
                  "without --no-driver) to check it."});
}

// Links NVML did not answer for: the GPU's link count says more links than were read.
size_t nvlinks_not_read(const RecordedGpu& g) {
    size_t read = g.nvlinks ? g.nvlinks->size() : 0;
    return g.nvlink_count && *g.nvlink_count > read ? *g.nvlink_count - read : 0;
}

// Each GPU's active NVLinks against the class's nvlinks_active. Links that were not read could be the missing
// ones: then the count is unknown, not short.
void check_nvlinks(const NodeClass& c, const std::string& mfile, const NodeRecord& node, std::vector<Finding>& out) {
    if (!c.expect.nvlinks_active || *c.expect.nvlinks_active == 0) return;
    const unsigned want = *c.expect.nvlinks_active;
    const std::string src = class_source(mfile, c.expect.nvlinks_line, c);
    const std::string expected = fmt::format("nvlinks_active = {}", want);
    std::vector<std::string> unknown;
    for (auto& g : node.gpus) {
        if (!g.nvlinks) {
            unknown.push_back(g.pci);
            continue;
        }
        std::vector<unsigned> up, down;
        for (auto& l : *g.nvlinks) (l.active ? up : down).push_back(l.link);
        const size_t not_read = nvlinks_not_read(g);
        if (!nvlinks_below_class(c, up.size(), not_read)) {
            if (up.size() < want) unknown.push_back(g.pci);
            continue;
        }
        GpuRef ref{g.uuid, g.pci};
        auto links = [](const std::vector<unsigned>& v) {
            return v.empty() ? std::string("none") : fmt::format("{}", fmt::join(v, ","));
        };
        std::string message =
            g.nvlinks->empty()
                ? fmt::format("{}: no NVLink, class '{}' expects {} active on each GPU (NVML reports no NVLink on "
                              "this GPU)",
                              describe(ref), c.name, want)
                : fmt::format("{}: {} of the {} NVLinks class '{}' expects are active; down: {}", describe(ref),
                              up.size(), want, c.name,
                              down.empty() ? std::string("none") : fmt::format("{}", fmt::join(down, ", ")));
        if (g.nvlinks->size() < want && !g.nvlinks->empty())
            message += fmt::format(" (NVML reports {} link(s){})", g.nvlinks->size(),
                                   not_read ? fmt::format(", {} not read", not_read) : std::string());
        std::string state = g.nvlinks->empty() ? std::string("no link (Not Supported or a link count of 0)")
                                               : fmt::format("active: {}; inactive: {}", links(up), links(down));
        out.push_back(rule("matrix.nvlinks_below")
                          .finding(std::move(message),
                                   {{ref},
                                    {{"nvmlDeviceGetFieldValues NVML_FI_DEV_NVLINK_GET_STATE", state}, {src, expected}},
                                    "Check `nvidia-smi nvlink -s -i <UUID>` and the kernel log for NVLink Xids (74, "
                                    "144-150); reset the GPU (and on NVSwitch systems restart nvidia-fabricmanager). A "
                                    "link that stays down needs the baseboard serviced. If GPUs of this class have "
                                    "fewer links, correct the class's nvlinks_active."}));
    }
    if (!unknown.empty())
        out.push_back(value_unknown(
            fmt::format("The class expects {} NVLinks active on each GPU, but the links of {} were not (all) read",
                        want, join_strings(unknown)),
            {src, expected}));
}

bool same_text(std::string_view a, std::string_view b) { return to_lower(a) == to_lower(b); }

std::string describe_port(const RecordedIbPort& p) {
    std::string what = p.link_layer;
    if (!p.pci.empty()) what += (what.empty() ? "" : ", ") + p.pci;
    return fmt::format("{} port {}{}", p.device, p.port, what.empty() ? "" : " (" + what + ")");
}

std::string ib_path(const RecordedIbPort& p, std::string_view attr) {
    return fmt::format("/sys/class/infiniband/{}/ports/{}/{}", p.device, p.port, attr);
}

// "8 InfiniBand port(s) at 400 Gb/sec on mlx5_*".
std::string describe_expectation(const IbPortExpectation& e) {
    return fmt::format("{} {} port(s){}{}", e.ports, e.link_layer,
                       e.rate_gbps ? fmt::format(" at {:g} Gb/sec", *e.rate_gbps) : std::string(),
                       e.devices.empty() ? std::string() : " on " + join_strings(e.devices));
}

// The InfiniBand/RoCE ports of each [[class.expect.infiniband]] entry: every port it covers ACTIVE at its rate,
// and as many as it says.
void check_ib_ports(const NodeClass& c, const std::string& mfile, const NodeRecord& node, std::vector<Finding>& out) {
    for (auto& e : c.expect.infiniband) {
        const std::string src = class_source(mfile, e.line, c);
        const std::string want = describe_expectation(e);
        if (!node.ib_ports) {
            out.push_back(value_unknown(
                fmt::format("The class expects {} ACTIVE, but the InfiniBand ports were not read", want),
                {src, want}));
            continue;
        }
        std::vector<const RecordedIbPort*> covered;
        std::vector<std::string> rate_unknown;
        for (auto& p : *node.ib_ports)
            if (ib_port_expected(e, p.device, p.link_layer)) covered.push_back(&p);
        for (auto* p : covered) {
            if (!p->active) {
                out.push_back(rule("matrix.ib_port_not_active")
                                  .finding(fmt::format("{} is {} ({}): class '{}' expects {} ACTIVE", describe_port(*p),
                                                       p->state.empty() ? "not ACTIVE" : p->state,
                                                       p->phys_state.empty() ? "physical state unknown" : p->phys_state,
                                                       c.name, want),
                                           {{},
                                            {{ib_path(*p, "state"), p->state},
                                             {ib_path(*p, "phys_state"), p->phys_state},
                                             {src, want}},
                                            "Check the cable, the transceiver and the switch port (`ibstat`, "
                                            "`mlxlink -d <pci>`); a port up on the wire but INIT has no subnet "
                                            "manager configuring it (opensm or the fabric's UFM). If this port is not "
                                            "meant to carry traffic, narrow the class's devices."}));
                continue;
            }
            if (!e.rate_gbps) continue;
            if (!p->rate_gbps) {
                rate_unknown.push_back(fmt::format("{} port {}", p->device, p->port));
                continue;
            }
            if (*p->rate_gbps + 1e-9 >= *e.rate_gbps) continue;
            const std::string rate = p->rate.empty() ? fmt::format("{:g} Gb/sec", *p->rate_gbps) : p->rate;
            out.push_back(rule("matrix.ib_rate_lower")
                              .finding(fmt::format("{} runs at {}, below the {:g} Gb/sec class '{}' expects",
                                                   describe_port(*p), rate, *e.rate_gbps, c.name),
                                       {{},
                                        {{ib_path(*p, "rate"), p->rate}, {src, want}},
                                        "The link trained at a lower speed or width: check the cable and transceiver "
                                        "(`mlxlink -d <pci>` shows the speed and lanes it negotiated) and the switch "
                                        "port's configuration; reseat or replace the cable."}));
        }
        if (covered.size() < e.ports) {
            std::vector<std::string> names;
            for (auto* p : covered) names.push_back(fmt::format("{} port {}", p->device, p->port));
            out.push_back(rule("matrix.ib_port_missing")
                              .finding(fmt::format("{} {} port(s) found{}, class '{}' expects {}", covered.size(),
                                                   e.link_layer, names.empty() ? "" : " (" + join_strings(names) + ")",
                                                   c.name, want),
                                       {{},
                                        {{"/sys/class/infiniband", names.empty() ? "none" : join_strings(names)},
                                         {src, want}},
                                        "Check that every adapter is on PCIe (`lspci -d 15b3:`) and that its driver "
                                        "(mlx5_core, mlx5_ib) is loaded; an adapter missing from the bus needs "
                                        "reseating or replacement."}));
        }
        if (!rate_unknown.empty())
            out.push_back(value_unknown(
                fmt::format("The class expects {}, but the rate of {} was not read", want, join_strings(rate_unknown)),
                {src, want}));
    }
}

}  // namespace

bool nvlinks_below_class(const NodeClass& c, size_t active, size_t not_read) {
    return c.expect.nvlinks_active && *c.expect.nvlinks_active > 0 && active + not_read < *c.expect.nvlinks_active;
}

bool ib_port_expected(const IbPortExpectation& e, std::string_view device, std::string_view link_layer) {
    return same_text(e.link_layer, link_layer) && (e.devices.empty() || matches_any(e.devices, device));
}

bool class_expects_ib_port(const NodeClass& c, std::string_view device, std::string_view link_layer) {
    for (auto& e : c.expect.infiniband)
        if (ib_port_expected(e, device, link_layer)) return true;
    return false;
}

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
    check_nvlinks(c, mfile, node, r.findings);
    check_ib_ports(c, mfile, node, r.findings);
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
