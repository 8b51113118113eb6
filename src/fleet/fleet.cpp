#include "fleet/fleet.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/pci_address.hpp"
#include "core/release_memory.hpp"
#include "core/text.hpp"
#include "core/clock.hpp"
#include "model/json_support.hpp"  // UnknownName, the snapshot readers' names
#include "model/layer_json.hpp"
#include "model/snapshot_keys.hpp"
#include "rules/engine/diagnose.hpp"

namespace gpudx {

// ---- reading one snapshot, only the fields the report uses --------------------------------------------

namespace {

using json = nlohmann::json;

// Larger files are not snapshots of one node; reading them would only cost memory.
constexpr size_t kMaxSnapshotBytes = 64u << 20;

// A JSON boolean is not read into an integer field (nor an integer into a boolean one).
template <class T>
concept Integer = std::integral<T> && !std::same_as<T, bool>;

struct Null {};
struct Container {};  // an object or array, where the schema has a scalar
using Value = std::variant<Null, bool, int64_t, double, std::string_view, Container>;

// Which fields a SnapshotReader fills: the FleetFields (model/snapshot_keys.hpp) for the report's summary, or
// every field of the Schema, the whole snapshot the rules judge.
enum class ReadFields { fleet, whole };

// A SAX reader that fills the snapshot straight into the model: no document is built, so a 20 KB snapshot costs
// one pass of the lexer and the strings it keeps. Each open object or array is a frame that knows what it fills;
// one not among the fields read is skipped, only lexed. Keys come from the model's Schema, so this reader and
// snapshot_from_json cannot disagree on a name. A value of the wrong type where the schema has a field is an
// error, as in snapshot_from_json. Reading the whole snapshot, it gives what snapshot_from_json gives for any
// snapshot gpudx writes (tests/unit/test_fleet.cpp holds the two to each other).
template <ReadFields Fields>
class SnapshotReader {
public:
    Snapshot s;
    std::string error;
    bool truncated = false;
    bool saw_schema_version = false, saw_pcie = false;

    explicit SnapshotReader(size_t size) : size_(size) {}

    // --- nlohmann SAX interface ---
    bool null() { return scalar(Null{}); }
    bool boolean(bool v) { return scalar(v); }
    bool number_integer(json::number_integer_t v) { return scalar(static_cast<int64_t>(v)); }
    bool number_unsigned(json::number_unsigned_t v) {
        return v > static_cast<uint64_t>(INT64_MAX) ? scalar(static_cast<double>(v)) : scalar(static_cast<int64_t>(v));
    }
    bool number_float(json::number_float_t v, const std::string&) { return scalar(static_cast<double>(v)); }
    bool string(std::string& v) { return scalar(std::string_view(v)); }
    bool binary(json::binary_t&) { return scalar(Null{}); }
    bool start_object(std::size_t) { return open(false); }
    bool start_array(std::size_t) { return open(true); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool key(std::string& k) {
        if (frames_.back().what.kind) frames_.back().key.assign(k);
        return true;
    }
    bool parse_error(std::size_t position, const std::string&, const json::exception& e) {
        truncated = position >= size_;
        std::string what = e.what();
        // "[json.exception.parse_error.101] parse error at line 3, column 1: ..." -> "parse error at line 3, ..."
        if (auto close_bracket = what.find("] "); what.starts_with("[json.") && close_bracket != std::string::npos)
            what.erase(0, close_bracket + 2);
        error = fmt::format("{}not valid JSON: {}", truncated ? "truncated, " : "", what);
        return false;
    }

private:
    // How the members (of an object) or the elements (of an array) of one frame are read.
    struct Opened;
    struct Kind {
        Opened (SnapshotReader::*open)(void* target, bool array);
        bool (SnapshotReader::*scalar)(void* target, const Value& v);
    };
    struct Opened {
        const Kind* kind = nullptr;  // nullptr: skipped
        void* target = nullptr;
    };
    struct Frame {
        Opened what;
        bool array;
        std::string key;  // the member being read (objects)
    };

    bool schema_error(std::string_view what) {
        std::string path;
        for (auto& f : frames_)
            if (!f.array) path += (path.empty() ? "" : ".") + f.key;
        error = fmt::format("snapshot does not match the schema: {} {}", path, what);
        return false;
    }

    Opened wrong(std::string_view what) {
        schema_error(what);
        failed_ = true;
        return {};
    }

    bool open(bool array) {
        if (frames_.empty()) {
            if (array) return not_a_snapshot();
            frames_.push_back({{object_kind<Snapshot>(), &s}, false, {}});
            return true;
        }
        Frame& parent = frames_.back();
        Opened next = parent.what.kind ? (this->*parent.what.kind->open)(parent.what.target, array) : Opened{};
        if (failed_) return false;
        frames_.push_back({next, array, {}});
        return true;
    }

    bool close() {
        frames_.pop_back();
        return true;
    }

    bool scalar(const Value& v) {
        if (frames_.empty()) return not_a_snapshot();
        Frame& f = frames_.back();
        return f.what.kind ? (this->*f.what.kind->scalar)(f.what.target, v) : true;
    }

    bool not_a_snapshot() {
        error = "not a gpudx snapshot (no schema_version or pcie key)";
        return false;
    }

    // --- the frames: an object of a struct with FleetFields, a list of them, a list of strings ---
    template <class T>
    static const Kind* object_kind() {
        static constexpr Kind kind{&SnapshotReader::open_member_of<T>, &SnapshotReader::scalar_member_of<T>};
        return &kind;
    }
    template <class T>
    static const Kind* list_kind() {
        static constexpr Kind kind{&SnapshotReader::open_element_of<T>, &SnapshotReader::scalar_element_of<T>};
        return &kind;
    }
    static const Kind* string_list_kind() {
        static constexpr Kind kind{&SnapshotReader::open_string_element, &SnapshotReader::scalar_string_element};
        return &kind;
    }
    template <class V>
    static const Kind* map_kind() {
        static constexpr Kind kind{&SnapshotReader::open_map_value, &SnapshotReader::scalar_map_value<V>};
        return &kind;
    }

    // Calls f.template operator()<Member>() for the member of T under `key` that this reader fills, if one is.
    template <class T, class F>
    static void with_member(std::string_view key, F&& f) {
        if constexpr (Fields == ReadFields::whole)
            with_schema_member<T>(key, f, std::make_index_sequence<std::tuple_size_v<decltype(Schema<T>::fields)>>{});
        else if constexpr (FleetRead<T>)
            with_member(key, f, FleetFields<T>{});
    }
    template <class F, auto... Member>
    static void with_member(std::string_view key, F& f, FieldList<Member...>) {
        (void)((key == snapshot_key<Member> && (f.template operator()<Member>(), true)) || ...);
    }
    template <class T, class F, size_t... I>
    static void with_schema_member(std::string_view key, F& f, std::index_sequence<I...>) {
        (void)((key == std::get<I>(Schema<T>::fields).key &&
                (f.template operator()<std::get<I>(Schema<T>::fields).member>(), true)) ||
               ...);
    }

    template <class T>
    Opened open_member_of(void* target, bool array) {
        const std::string& k = frames_.back().key;
        if constexpr (std::is_same_v<T, Snapshot>) {
            if (k == snapshot_key<&Snapshot::pcie>) saw_pcie = true;
            // A rocm_smi layer is written only when ROCm SMI was asked, so one read back means it was.
            if (Fields == ReadFields::whole && k == snapshot_key<&Snapshot::rocm_smi>) s.rocm_smi.probed = true;
        }
        Opened next;
        with_member<T>(k, [&]<auto Member>() { next = open_field(static_cast<T*>(target)->*Member, array); });
        return next;
    }

    template <class T>
    bool scalar_member_of(void* target, const Value& v) {
        const std::string& k = frames_.back().key;
        if constexpr (std::is_same_v<T, Snapshot>) {
            if (k == snapshot_key<&Snapshot::schema_version>) return schema_version(v);
            if (k == snapshot_key<&Snapshot::pcie>) saw_pcie = true;  // a null layer: collected nothing, still a snapshot
        }
        if constexpr (Fields == ReadFields::whole && requires(T& layer) { layer.hung_call; })
            if (k == kHungCallKey) return hung_call(static_cast<T*>(target)->hung_call, driver_api_of<T>(), v);
        bool ok = true;
        with_member<T>(k, [&]<auto Member>() { ok = set(static_cast<T*>(target)->*Member, v); });
        return ok;
    }

    // A driver layer's hung call, written as its label beside the layer's fields (model/driver_json.cpp).
    template <class Layer>
    static constexpr DriverApi driver_api_of() {
        if constexpr (std::is_same_v<Layer, NvmlLayer>) return DriverApi::nvml;
        else if constexpr (std::is_same_v<Layer, CudaLayer>) return DriverApi::cuda;
        else return DriverApi::rocm_smi;
    }
    bool hung_call(std::optional<HungCall>& out, DriverApi api, const Value& v) {
        auto* label = std::get_if<std::string_view>(&v);
        if (!label) return schema_error("is not a string");
        if (label->empty()) out.reset();
        else out = parse_hung_call(api, *label);
        return true;
    }

    template <class T>
    Opened open_element_of(void* target, bool array) {
        if (array) return wrong("holds an array, expected objects");
        return {object_kind<T>(), &static_cast<std::vector<T>*>(target)->emplace_back()};
    }
    template <class T>
    bool scalar_element_of(void*, const Value&) {
        return schema_error("holds a scalar, expected objects");
    }
    Opened open_string_element(void*, bool) { return wrong("holds an object or array, expected strings"); }
    Opened open_map_value(void*, bool) { return wrong("holds an object or array, expected scalars"); }
    template <class V>
    bool scalar_map_value(void* target, const Value& v) {
        return set((*static_cast<std::map<std::string, V>*>(target))[frames_.back().key], v);
    }
    bool scalar_string_element(void* target, const Value& v) {
        return set(static_cast<std::vector<std::string>*>(target)->emplace_back(), v);
    }

    bool schema_version(const Value& v) {
        auto* i = std::get_if<int64_t>(&v);
        if (!i) return schema_error("is not an integer");
        if (*i > kSnapshotSchemaVersion) {
            error = fmt::format("snapshot schema version {} is newer than this gpudx understands ({}); "
                                "upgrade gpudx to read it",
                                *i, kSnapshotSchemaVersion);
            return false;
        }
        saw_schema_version = true;
        s.schema_version = static_cast<int>(*i);
        return true;
    }

    // --- a member opens an object or array: the frame it becomes, by the member's type. As in the full reader,
    // a member given twice counts once, the last. ---
    template <HasSchema T>
    Opened open_field(T& field, bool array) {
        if (array) return wrong("is an array, expected an object");
        field = T{};
        return {object_kind<T>(), &field};
    }
    template <HasSchema T>
    Opened open_field(std::optional<T>& field, bool array) {
        if (array) return wrong("is an array, expected an object");
        return {object_kind<T>(), &field.emplace()};
    }
    template <HasSchema T>
    Opened open_field(std::vector<T>& field, bool array) {
        if (!array) return wrong("is an object, expected an array");
        field.clear();
        return {list_kind<T>(), &field};
    }
    Opened open_field(std::vector<std::string>& field, bool array) {
        if (!array) return wrong("is an object, expected an array");
        field.clear();
        return {string_list_kind(), &field};
    }
    template <class V>
    Opened open_field(std::map<std::string, V>& field, bool array) {
        if (array) return wrong("is an array, expected an object");
        field.clear();
        return {map_kind<V>(), &field};
    }
    template <class Scalar>
    Opened open_field(Scalar& field, bool) {
        set(field, Container{});
        failed_ = true;
        return {};
    }

    // --- a member is a scalar: null keeps the default ---
    template <HasSchema T>
    bool set(T&, const Value& v) {
        return std::holds_alternative<Null>(v) || schema_error("is not an object");
    }
    template <HasSchema T>
    bool set(std::optional<T>&, const Value& v) {
        return std::holds_alternative<Null>(v) || schema_error("is not an object");
    }
    template <class T>
    bool set(std::vector<T>&, const Value& v) {
        return std::holds_alternative<Null>(v) || schema_error("is not an array");
    }
    template <class V>
    bool set(std::map<std::string, V>&, const Value& v) {
        return std::holds_alternative<Null>(v) || schema_error("is not an object");
    }
    // An enum is written as its name; the model reads it back (an unknown name as the model does).
    template <class E>
        requires std::is_enum_v<E>
    bool set(E& out, const Value& v) {
        if (auto* sv = std::get_if<std::string_view>(&v)) {
            if constexpr (NamedEnum<E>) {
                // As the snapshot's reader takes it (model/json_support.hpp): an unknown name is refused, or
                // read as `other` where the enum keeps one for a newer gpudx's names.
                try {
                    out = json(*sv).get<E>();
                } catch (const UnknownName& e) {
                    return schema_error(e.what());
                }
            } else {
                return enum_from_name(*sv, out) || schema_error("is not a name gpudx knows");
            }
        } else if (!std::holds_alternative<Null>(v)) {
            return schema_error("is not a string");
        }
        return true;
    }
    bool set(std::optional<bool>& out, const Value& v) {
        if (auto* b = std::get_if<bool>(&v)) out = *b;
        else if (std::holds_alternative<Null>(v)) out.reset();
        else return schema_error("is not a boolean");
        return true;
    }
    bool set(double& out, const Value& v) {
        if (auto* d = std::get_if<double>(&v)) out = *d;
        else if (auto* i = std::get_if<int64_t>(&v)) out = static_cast<double>(*i);
        else if (!std::holds_alternative<Null>(v)) return schema_error("is not a number");
        return true;
    }
    bool set(std::string& out, const Value& v) {
        if (auto* sv = std::get_if<std::string_view>(&v)) out.assign(*sv);
        else if (!std::holds_alternative<Null>(v)) return schema_error("is not a string");
        return true;
    }
    bool set(EnvValue& out, const Value& v) {
        if (auto* sv = std::get_if<std::string_view>(&v)) {
            if (*sv == kUnsetVariable) out = std::nullopt;
            else out = std::string(*sv);
        } else if (!std::holds_alternative<Null>(v)) {
            return schema_error("is not a string");
        }
        return true;
    }
    bool set(std::optional<std::string>& out, const Value& v) {
        if (auto* sv = std::get_if<std::string_view>(&v)) out.emplace(*sv);
        else if (std::holds_alternative<Null>(v)) out.reset();
        else return schema_error("is not a string");
        return true;
    }
    bool set(bool& out, const Value& v) {
        if (auto* b = std::get_if<bool>(&v)) out = *b;
        else if (!std::holds_alternative<Null>(v)) return schema_error("is not a boolean");
        return true;
    }
    template <Integer Int>
    bool set(Int& out, const Value& v) {
        if (auto* i = std::get_if<int64_t>(&v)) out = static_cast<Int>(*i);
        else if (!std::holds_alternative<Null>(v)) return schema_error("is not an integer");
        return true;
    }
    template <Integer Int>
    bool set(std::optional<Int>& out, const Value& v) {
        if (auto* i = std::get_if<int64_t>(&v)) out = static_cast<Int>(*i);
        else if (std::holds_alternative<Null>(v)) out.reset();
        else return schema_error("is not an integer");
        return true;
    }
    bool set(std::optional<double>& out, const Value& v) {
        if (auto* d = std::get_if<double>(&v)) out = *d;
        else if (auto* i = std::get_if<int64_t>(&v)) out = static_cast<double>(*i);
        else if (std::holds_alternative<Null>(v)) out.reset();
        else return schema_error("is not a number");
        return true;
    }

    size_t size_;
    std::vector<Frame> frames_;
    bool failed_ = false;
};

}  // namespace

namespace {

constexpr std::string_view kSchemaMismatch = "snapshot does not match the schema";

template <ReadFields Fields>
Result<Snapshot> read_snapshot(std::string_view text) {
    SnapshotReader<Fields> reader(text.size());
    bool ok = json::sax_parse(text.begin(), text.end(), &reader, nlohmann::detail::input_format_t::json, true);
    if (!ok || !reader.error.empty()) return fail(reader.error.empty() ? "not valid JSON" : reader.error);
    if (!reader.saw_schema_version || !reader.saw_pcie) return fail("not a gpudx snapshot (no schema_version or pcie key)");
    return std::move(reader.s);
}

FleetNode fleet_node_of(const Snapshot& s) {
    FleetNode n;
    n.collected_at = s.collected_at;
    n.record = make_node_record(s);
    n.xids.reserve(s.kernel_log.xids.size());
    for (auto& x : s.kernel_log.xids) n.xids.push_back({normalize_pci(x.pci), x.code});
    return n;
}

std::vector<Finding> health_findings(std::vector<Finding> findings);

}  // namespace

Result<Snapshot> read_fleet_fields(std::string_view text) { return read_snapshot<ReadFields::fleet>(text); }
Result<Snapshot> read_whole_snapshot(std::string_view text) { return read_snapshot<ReadFields::whole>(text); }

Result<FleetNode> parse_fleet_snapshot(std::string_view text) {
    auto s = read_fleet_fields(text);
    if (!s) return std::unexpected(s.error());
    return fleet_node_of(*s);
}

Result<FleetNode> judge_fleet_snapshot(std::string_view text, const Matrix* matrix) {
    auto whole = read_whole_snapshot(text);
    if (whole) {
        FleetNode n = fleet_node_of(*whole);
        n.health_source = HealthSource::snapshot;
        DiagnoseOptions options;
        if (matrix) options.node_class = classify_node(*matrix, n.record).node_class;
        n.health = health_findings(diagnose(*whole, options).findings);
        return n;
    }
    if (!whole.error().message.starts_with(kSchemaMismatch)) return std::unexpected(whole.error());
    // A field the summary does not read is not what the schema says: the summary may still be sound, and the
    // full reader says why the rules cannot run (as it would for `gpudx diagnose --from`).
    auto n = parse_fleet_snapshot(text);
    if (!n) return n;
    if (auto health = health_from_snapshot(text, matrix ? classify_node(*matrix, n->record).node_class : nullptr)) {
        n->health_source = HealthSource::snapshot;
        n->health = std::move(*health);
    } else {
        n->health_error = "the rules could not run on the snapshot: " + health.error().message;
    }
    return n;
}

namespace {

// The whole file into `buffer` (reused across files by one thread).
Result<void> read_whole_file(const std::string& path, std::string& buffer) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(fmt::format("cannot open: {}", std::strerror(errno)), path, errno);
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return fail("not a regular file", path);
    }
    if (static_cast<size_t>(st.st_size) > kMaxSnapshotBytes) {
        ::close(fd);
        return fail(fmt::format("{} bytes: larger than a snapshot can be ({} MiB)", st.st_size, kMaxSnapshotBytes >> 20),
                    path);
    }
    buffer.resize(static_cast<size_t>(st.st_size));
    size_t off = 0;
    while (off < buffer.size()) {
        ssize_t n = ::read(fd, buffer.data() + off, buffer.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            ::close(fd);
            return fail(fmt::format("read error: {}", std::strerror(err)), path, err);
        }
        if (n == 0) break;
        off += static_cast<size_t>(n);
    }
    ::close(fd);
    buffer.resize(off);
    if (off == 0) return fail("empty file", path);
    return {};
}

template <class T>
Result<T> with_path(Result<T> r, const std::string& path) {
    if (!r) {
        auto e = r.error();
        e.path = path;
        return std::unexpected(e);
    }
    return r;
}

// What the report keeps of a finding: the fleet groups by id and lists messages; evidence and next steps are
// the node's own report, and dropping them keeps memory near a kilobyte per node.
std::vector<Finding> health_findings(std::vector<Finding> findings) {
    std::erase_if(findings, [](const Finding& f) { return f.severity == Severity::info; });
    for (auto& f : findings) {
        f.evidence.clear();
        f.next_step.clear();
    }
    return findings;
}

// A diagnosis has these top-level keys and a snapshot has neither.
bool looks_like_diagnosis(const json& j) {
    return j.is_object() && j.contains("verdict") && j.contains("findings") && !j.contains("pcie");
}

}  // namespace

Result<FleetNode> read_fleet_snapshot(const std::string& path, std::string& buffer) {
    if (auto read = read_whole_file(path, buffer); !read) return std::unexpected(read.error());
    auto node = with_path(parse_fleet_snapshot(buffer), path);
    if (node) node->file = path;
    return node;
}

Result<FleetDiagnosis> parse_fleet_diagnosis(std::string_view text) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return fail("not valid JSON");
    if (!looks_like_diagnosis(j)) return fail("not a gpudx diagnosis (no verdict or findings key)");
    auto bad = [](std::string what) { return fail("saved diagnosis does not match its format: " + what); };
    auto string_at = [](const json& o, const char* key) -> std::optional<std::string> {
        auto it = o.find(key);
        if (it == o.end() || it->is_null()) return std::string();
        if (!it->is_string()) return std::nullopt;
        return it->get<std::string>();
    };
    auto version = j.find("schema_version");
    if (version == j.end() || !version->is_number_integer()) return bad("schema_version is missing or not an integer");
    if (version->get<int64_t>() > 1)
        return fail(fmt::format("diagnosis schema version {} is newer than this gpudx understands (1); upgrade gpudx "
                                "to read it",
                                version->get<int64_t>()));
    FleetDiagnosis d;
    auto host = string_at(j, "host");
    auto collected = string_at(j, "collected_at");
    if (!host) return bad("host is not a string");
    if (!collected) return bad("collected_at is not a string");
    d.host = *host;
    d.collected_at = *collected;
    const json& findings = j["findings"];
    if (!findings.is_array()) return bad("findings is not an array");
    std::vector<Finding> all;
    for (size_t i = 0; i < findings.size(); ++i) {
        const json& fj = findings[i];
        std::string where = fmt::format("findings[{}]", i);
        if (!fj.is_object()) return bad(where + " is not an object");
        Finding f;
        auto id = string_at(fj, "id");
        auto layer = string_at(fj, "layer");
        auto severity = string_at(fj, "severity");
        auto message = string_at(fj, "message");
        if (!id || id->empty()) return bad(where + ".id is missing or not a string");
        if (!message) return bad(where + ".message is not a string");
        auto parsed_layer = layer ? parse_layer(*layer) : std::nullopt;
        if (!parsed_layer) return bad(fmt::format("{}.layer {} is not a layer", where, fj.value("layer", json()).dump()));
        auto parsed_severity = severity ? parse_severity(*severity) : std::nullopt;
        if (!parsed_severity)
            return bad(fmt::format("{}.severity {} is not info, warning or error", where,
                                   fj.value("severity", json()).dump()));
        f.id = *id;
        f.layer = *parsed_layer;
        f.severity = *parsed_severity;
        f.message = *message;
        if (auto subjects = fj.find("subjects"); subjects != fj.end() && !subjects->is_null()) {
            if (!subjects->is_array()) return bad(where + ".subjects is not an array");
            for (auto& g : *subjects) {
                auto uuid = g.is_object() ? string_at(g, "uuid") : std::nullopt;
                auto pci = g.is_object() ? string_at(g, "pci") : std::nullopt;
                if (!uuid || !pci) return bad(where + ".subjects holds an entry without string uuid and pci");
                f.subjects.push_back({*uuid, *pci});
            }
        }
        all.push_back(std::move(f));
    }
    d.findings = health_findings(std::move(all));
    return d;
}

Result<FleetInput> read_fleet_input(const std::string& path, std::string& buffer, const Matrix* matrix) {
    if (auto read = read_whole_file(path, buffer); !read) return std::unexpected(read.error());
    auto node = judge_fleet_snapshot(buffer, matrix);
    if (node) {
        node->file = path;
        if (node->health_source == HealthSource::snapshot) node->health_file = path;
        return FleetInput(std::move(*node));
    }
    // Not a snapshot: perhaps a saved diagnosis. Only files that fail the snapshot reader pay for this look.
    if (!node.error().message.starts_with("truncated")) {
        json j = json::parse(buffer, nullptr, false);
        if (looks_like_diagnosis(j)) {
            auto d = with_path(parse_fleet_diagnosis(buffer), path);
            if (!d) return std::unexpected(d.error());
            d->file = path;
            return FleetInput(std::move(*d));
        }
    }
    return with_path(Result<FleetInput>(std::unexpected(node.error())), path);
}

Result<std::vector<Finding>> health_from_snapshot(std::string_view text, const NodeClass* node_class) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return fail("not valid JSON");
    auto s = snapshot_from_json(j);
    if (!s) return std::unexpected(s.error());
    DiagnoseOptions options;
    options.node_class = node_class;
    return health_findings(diagnose(*s, options).findings);
}

std::vector<std::pair<std::string, std::string>> attach_diagnoses(std::vector<FleetNode>& nodes,
                                                                  std::vector<FleetDiagnosis> diagnoses) {
    std::vector<std::pair<std::string, std::string>> left_out;
    // The newest diagnosis of each host (collected_at, then the later file given); one without a host stands
    // alone.
    std::map<std::string, size_t> newest_diagnosis;
    std::vector<size_t> alone;
    for (size_t i = 0; i < diagnoses.size(); ++i) {
        if (diagnoses[i].host.empty()) {
            alone.push_back(i);
            continue;
        }
        auto [it, inserted] = newest_diagnosis.emplace(diagnoses[i].host, i);
        if (inserted) continue;
        bool newer = diagnoses[i].collected_at >= diagnoses[it->second].collected_at;
        size_t loser = newer ? it->second : i;
        left_out.emplace_back(diagnoses[loser].file, diagnoses[newer ? i : it->second].file);
        if (newer) it->second = i;
    }
    // The newest snapshot of each host, by the rule summarize_fleet applies.
    std::map<std::string, size_t> newest_snapshot;
    for (size_t i = 0; i < nodes.size(); ++i) {
        if (!nodes[i].has_snapshot || nodes[i].record.hostname.empty()) continue;
        auto [it, inserted] = newest_snapshot.emplace(nodes[i].record.hostname, i);
        if (!inserted && nodes[i].collected_at >= nodes[it->second].collected_at) it->second = i;
    }
    auto as_node = [](FleetDiagnosis& d) {
        FleetNode n;
        n.file = d.file;
        n.collected_at = d.collected_at;
        n.record.hostname = d.host;
        n.has_snapshot = false;
        n.health_source = HealthSource::diagnosis;
        n.health_file = d.file;
        n.health = std::move(d.findings);
        return n;
    };
    for (auto& [host, i] : newest_diagnosis) {
        auto& d = diagnoses[i];
        auto snap = newest_snapshot.find(host);
        if (snap == newest_snapshot.end()) {
            nodes.push_back(as_node(d));
            continue;
        }
        FleetNode& n = nodes[snap->second];
        if (d.collected_at < n.collected_at) {  // the snapshot is newer: the rules run on it instead
            left_out.emplace_back(d.file, n.file);
            continue;
        }
        n.health_source = HealthSource::diagnosis;
        n.health_file = d.file;
        n.health = std::move(d.findings);
    }
    for (size_t i : alone) nodes.push_back(as_node(diagnoses[i]));
    return left_out;
}

std::vector<std::string> expand_fleet_inputs(const std::vector<std::string>& args, std::vector<FleetProblem>& problems) {
    namespace fs = std::filesystem;
    std::vector<std::string> files;
    for (auto& a : args) {
        std::error_code ec;
        auto st = fs::status(a, ec);
        if (ec || !fs::exists(st)) {
            problems.push_back({a, "no such file or directory"});
            continue;
        }
        if (!fs::is_directory(st)) {
            files.push_back(a);
            continue;
        }
        std::vector<std::string> found;
        fs::recursive_directory_iterator it(a, fs::directory_options::skip_permission_denied, ec), end;
        if (ec) {
            problems.push_back({a, "cannot list: " + ec.message()});
            continue;
        }
        for (; it != end; it.increment(ec)) {
            if (ec) {
                problems.push_back({a, "cannot list: " + ec.message()});
                break;
            }
            if (it->path().extension() == ".json" && it->is_regular_file(ec)) found.push_back(it->path().string());
        }
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
    }
    return files;
}

// ---- aggregating -------------------------------------------------------------------------------

namespace {

std::string node_name(const FleetNode& n) {
    if (!n.record.hostname.empty()) return n.record.hostname;
    return std::filesystem::path(n.file).stem().string();
}

std::string or_unknown(const std::string& v) { return v.empty() ? std::string("unknown") : v; }

}  // namespace

FleetReport summarize_fleet(const Matrix& matrix, std::vector<FleetNode> nodes, std::vector<FleetProblem> skipped,
                            const CalendarDate& today) {
    FleetReport r;
    r.matrix_path = matrix.path;
    r.generated_at = utc_now_iso8601();
    r.skipped = std::move(skipped);
    r.inputs = nodes.size() + r.skipped.size();

    // Several snapshots of one host: the newest counts (collected_at, then the later file given).
    std::map<std::string, size_t> latest;
    std::vector<bool> superseded(nodes.size(), false);
    for (size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i].record.hostname.empty()) continue;
        auto [it, inserted] = latest.emplace(nodes[i].record.hostname, i);
        if (inserted) continue;
        size_t& prev = it->second;
        bool newer = nodes[i].collected_at >= nodes[prev].collected_at;
        size_t loser = newer ? prev : i;
        superseded[loser] = true;
        r.superseded.emplace_back(nodes[loser].file, nodes[newer ? i : prev].file);
        if (newer) prev = i;
    }

    std::map<std::string, size_t> class_index;
    for (auto& c : matrix.classes) {
        FleetClassReport cr;
        cr.name = c.name;
        cr.owner = c.owner;
        cr.review_by = c.review_by.str();
        cr.review_overdue = c.review_by < today;
        cr.expected_gpus = c.match.gpu_count;
        class_index[c.name] = r.classes.size();
        r.classes.push_back(std::move(cr));
    }
    std::optional<size_t> unclassified;

    std::map<std::string, FleetXidNode> xid_nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
        if (superseded[i]) continue;
        auto& n = nodes[i];
        ++r.nodes;
        // A node known only from a saved diagnosis has no versions or GPUs to hold to the tested set: its
        // class comes from its hostname alone.
        MatrixCheck check;
        if (n.has_snapshot)
            check = check_node_against_matrix(matrix, n.record, today);
        else
            check.node_class = classify_node(matrix, n.record).node_class;
        size_t ci;
        if (check.node_class) {
            ci = class_index.at(check.node_class->name);
        } else {
            if (!unclassified) {
                unclassified = r.classes.size();
                FleetClassReport cr;
                cr.name = "(unclassified)";
                r.classes.push_back(std::move(cr));
            }
            ci = *unclassified;
        }
        auto& cr = r.classes[ci];
        ++cr.nodes;
        ++cr.drivers[or_unknown(n.record.driver_version)];
        ++cr.kernels[or_unknown(n.record.kernel_release)];
        ++cr.cuda[or_unknown(cuda_version_text(n.record.cuda_driver_version))];
        ++cr.fabric_manager[or_unknown(n.record.fabric_manager)];
        for (auto& g : n.record.gpus) ++cr.vbios[or_unknown(to_lower(g.vbios))];

        FleetNodeDivergence d{node_name(n), n.file, {}};
        std::set<std::string> ids;
        for (auto& f : check.findings) {
            if (f.id == "matrix.review_overdue" || f.severity == Severity::info) continue;
            ids.insert(f.id);
            d.findings.push_back(f);
        }
        for (auto& id : ids) ++cr.divergence_nodes[id];
        bool diverges = !d.findings.empty();
        if (diverges) cr.diverging.push_back(std::move(d));
        if (n.has_snapshot && cr.expected_gpus && n.record.gpus.size() < *cr.expected_gpus)
            cr.missing.push_back({node_name(n), n.file, n.record.gpus.size(), *cr.expected_gpus});

        // Health: a node with a warning or an error finding, or whose health is unknown, is not conforming,
        // whatever its versions.
        cr.health_only += !n.has_snapshot;
        switch (n.health_source) {
            case HealthSource::none: ++r.health_unknown; ++cr.health_unknown; break;
            case HealthSource::diagnosis: ++r.health_saved; break;
            case HealthSource::snapshot: ++r.health_computed; break;
        }
        bool healthy = n.health_source != HealthSource::none && n.health.empty();
        if (healthy) {
            ++cr.healthy;
        } else {
            std::set<std::string> finding_ids;
            for (auto& f : n.health) {
                auto& count = cr.finding_nodes[f.id];
                if (finding_ids.insert(f.id).second) ++count.nodes;
                count.severity = std::max(count.severity, f.severity);
                count.layer = f.layer;
            }
            cr.unhealthy.push_back({node_name(n), n.health_file.empty() ? n.file : n.health_file, n.health_source,
                                    n.health_error, std::move(n.health)});
        }
        if (!diverges && healthy) ++cr.conforming;

        if (!n.xids.empty()) {
            auto& xn = xid_nodes[node_name(n) + '\0' + n.file];
            xn.node = node_name(n);
            xn.file = n.file;
            xn.node_class = cr.name;
            std::set<int> codes;
            for (auto& x : n.xids) {
                ++xn.by_code[x.code];
                ++xn.total;
                ++r.xids_by_code[x.code];
                codes.insert(x.code);
            }
            for (int c : codes) ++r.xid_nodes_by_code[c];
        }
    }
    for (auto& [key, xn] : xid_nodes) r.xids_by_node.push_back(std::move(xn));
    std::stable_sort(r.xids_by_node.begin(), r.xids_by_node.end(),
                     [](const FleetXidNode& a, const FleetXidNode& b) { return a.total > b.total; });

    bool errors = false, warnings = !r.skipped.empty() || r.health_unknown > 0;
    for (auto& c : r.classes) {
        if (c.review_overdue || c.name == "(unclassified)") warnings |= c.nodes > 0;
        for (auto& d : c.diverging)
            for (auto& f : d.findings) {
                errors |= f.severity == Severity::error;
                warnings |= f.severity == Severity::warning;
            }
        for (auto& [id, count] : c.finding_nodes) {
            errors |= count.severity == Severity::error;
            warnings |= count.severity == Severity::warning;
        }
    }
    r.exit_code = errors ? 1 : warnings ? 2 : 0;
    return r;
}

namespace {

// Runs work(i, buffer) for i in [0, count) on `jobs` threads, each with its own reusable buffer; progress (from
// this thread) as items finish.
void parallel_for(size_t count, unsigned jobs, const std::function<void(size_t, std::string&)>& work,
                  const std::function<void(size_t, size_t)>& progress) {
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    std::mutex m;
    std::condition_variable cv;
    auto worker = [&] {
        std::string buffer;
        for (;;) {
            size_t i = next.fetch_add(1, std::memory_order_relaxed);
            if (i >= count) break;
            work(i, buffer);
            if (buffer.capacity() > (4u << 20)) release_memory(buffer);  // do not keep one huge file's memory
            done.fetch_add(1, std::memory_order_release);
            if (progress) cv.notify_one();
        }
    };
    jobs = std::clamp(jobs, 1u, 64u);
    jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(count, 1)));
    std::vector<std::jthread> pool;
    for (unsigned t = 0; t < jobs; ++t) pool.emplace_back(worker);
    if (progress) {
        std::unique_lock lock(m);
        size_t last = 0;
        while ((last = done.load(std::memory_order_acquire)) < count) {
            progress(last, count);
            cv.wait_for(lock, std::chrono::milliseconds(200));
        }
        progress(count, count);
    }
}

}  // namespace

FleetReport build_fleet_report(const Matrix& matrix, const std::vector<std::string>& files,
                               std::vector<FleetProblem> input_problems, const FleetOptions& options) {
    auto started = std::chrono::steady_clock::now();
    using Outcome = std::variant<FleetNode, FleetDiagnosis, FleetProblem>;
    std::vector<std::optional<Outcome>> outcomes(files.size());
    parallel_for(
        files.size(), options.jobs,
        [&](size_t i, std::string& buffer) {
            auto input = read_fleet_input(files[i], buffer, &matrix);
            if (!input)
                outcomes[i].emplace(FleetProblem{files[i], input.error().message});
            else if (auto* n = std::get_if<FleetNode>(&*input))
                outcomes[i].emplace(std::move(*n));
            else
                outcomes[i].emplace(std::move(std::get<FleetDiagnosis>(*input)));
        },
        options.progress);

    std::vector<FleetNode> nodes;
    std::vector<FleetDiagnosis> diagnoses;
    nodes.reserve(files.size());
    for (auto& o : outcomes) {
        if (!o) continue;
        if (auto* n = std::get_if<FleetNode>(&*o))
            nodes.push_back(std::move(*n));
        else if (auto* d = std::get_if<FleetDiagnosis>(&*o))
            diagnoses.push_back(std::move(*d));
        else
            input_problems.push_back(std::get<FleetProblem>(*o));
    }
    outcomes.clear();
    auto left_out = attach_diagnoses(nodes, std::move(diagnoses));

    auto report = summarize_fleet(matrix, std::move(nodes), std::move(input_problems), options.today);
    report.superseded.insert(report.superseded.end(), left_out.begin(), left_out.end());
    report.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return report;
}

}  // namespace gpudx
