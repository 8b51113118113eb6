#include "rules/reference/catalogue_blob.hpp"

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>

#include "core/byte_image.hpp"

namespace gpudx {

namespace {

// Written before the sections: a blob from another layout of this file is refused, never misread.
constexpr std::string_view kMagic = "gpudx-catalogues-1\n";

// Every member of each catalogue structure, in declaration order. A structured binding must name all of them:
// a member added to the structure makes this fail to compile until it is added here, and so to the blob.
auto members(TemplatePart& p) {
    auto& [literal, text, field, type] = p;
    return std::tie(literal, text, field, type);
}
auto members(SignatureTemplate& t) {
    auto& [source, parts, gate] = t;
    return std::tie(source, parts, gate);
}
auto members(Signature& s) {
    auto& [id, layer, severity, vendor, summary, meaning, message, next_step, templates, unless, lines, group_by,
           suppressed_by, check, examples, origin] = s;
    return std::tie(id, layer, severity, vendor, summary, meaning, message, next_step, templates, unless, lines,
                    group_by, suppressed_by, check, examples, origin);
}
auto members(SignatureCatalogue& c) {
    auto& [version, signatures] = c;
    return std::tie(version, signatures);
}
auto members(XidEscalation& e) {
    auto& [repeats, within_s, severity, action] = e;
    return std::tie(repeats, within_s, severity, action);
}
auto members(XidBucket& b) {
    auto& [name, meaning, implies, recovery, escalation, origin] = b;
    return std::tie(name, meaning, implies, recovery, escalation, origin);
}
auto members(XidRule& r) {
    auto& [code, mnemonic, description, immediate, investigatory, generations, causes, name, sxid_class, meaning,
           severity, action, note, repeats, within_s, origin] = r;
    return std::tie(code, mnemonic, description, immediate, investigatory, generations, causes, name, sxid_class,
                    meaning, severity, action, note, repeats, within_s, origin);
}
auto members(XidPolicy& p) {
    auto& [version, generations, fallback, rules, buckets, sxid_fallback, sxids] = p;
    return std::tie(version, generations, fallback, rules, buckets, sxid_fallback, sxids);
}
auto members(ResultCode& c) {
    auto& [name, number, text, layer, severity, program_error, meaning, next_step, aliases, line, origin] = c;
    return std::tie(name, number, text, layer, severity, program_error, meaning, next_step, aliases, line, origin);
}
auto members(ResultCodeTable& t) {
    auto& [table, version, origin, codes] = t;
    return std::tie(table, version, origin, codes);
}

template <class T>
concept Structure = requires(T& x) { members(x); };

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_map : std::false_type {};
template <class K, class V, class C>
struct is_map<std::map<K, V, C>> : std::true_type {};

// Numbers little-endian in 8 bytes whatever their type; strings and lists prefixed with their length.
class Writer : public ByteImageWriter {
public:
    template <class T>
    void put(const T& x) {
        if constexpr (std::is_same_v<T, std::string>) {
            text(x);
        } else if constexpr (std::is_same_v<T, double>) {
            number(std::bit_cast<uint64_t>(x));
        } else if constexpr (std::is_enum_v<T>) {
            number(static_cast<uint64_t>(x));
        } else if constexpr (std::is_integral_v<T>) {
            number(static_cast<uint64_t>(x));
        } else if constexpr (is_optional<T>::value) {
            number(x.has_value());
            if (x) put(*x);
        } else if constexpr (is_vector<T>::value) {
            number(x.size());
            for (auto& e : x) put(e);
        } else if constexpr (is_map<T>::value) {
            number(x.size());
            for (auto& [k, v] : x) {
                put(k);
                put(v);
            }
        } else {
            static_assert(Structure<T>, "a catalogue structure needs its members() list");
            std::apply([&](auto&... m) { (put(m), ...); }, members(const_cast<T&>(x)));
        }
    }
};

class Reader : public ByteImageReader {
public:
    using ByteImageReader::ByteImageReader;

    template <class T>
    void get(T& x) {
        if (!ok()) return;
        if constexpr (std::is_same_v<T, std::string>) {
            x = text();
        } else if constexpr (std::is_same_v<T, double>) {
            x = std::bit_cast<double>(number());
        } else if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
            x = static_cast<T>(number());
        } else if constexpr (is_optional<T>::value) {
            if (number()) get(x.emplace());
            else x.reset();
        } else if constexpr (is_vector<T>::value) {
            size_t n = count();
            x.clear();
            x.reserve(n);
            for (size_t i = 0; i < n && ok(); ++i) get(x.emplace_back());
        } else if constexpr (is_map<T>::value) {
            size_t n = count();
            x.clear();
            for (size_t i = 0; i < n && ok(); ++i) {
                typename T::key_type k{};
                get(k);
                get(x[k]);
            }
        } else {
            std::apply([&](auto&... m) { (get(m), ...); }, members(x));
        }
    }

private:
    std::string_view in_;
    size_t pos_ = 0;
    bool ok_ = true;
};

template <class T>
std::string section(const T& x) {
    Writer w;
    w.put(x);
    return std::move(w.out);
}

template <class T>
Result<T> read_section(std::string_view bytes, std::string_view what) {
    Reader r(bytes);
    T x{};
    r.get(x);
    if (!r.ok() || !r.at_end()) return fail(fmt::format("the built-in {} in this binary is damaged", what));
    return x;
}

const CatalogueBlobSections& builtin_sections() {
    static const CatalogueBlobSections sections = [] {
        auto s = catalogue_blob_sections(builtin_catalogue_blob());
        if (!s) throw std::logic_error(s.error().message);
        return *s;
    }();
    return sections;
}

template <class T>
T checked(Result<T> x) {
    if (!x) throw std::logic_error(x.error().message);
    return std::move(*x);
}

}  // namespace

XidPolicy read_builtin_xid_policy() { return checked(read_xid_policy_section(builtin_sections().xid_policy)); }
SignatureCatalogue read_builtin_signatures() { return checked(read_signatures_section(builtin_sections().signatures)); }
std::vector<ResultCodeTable> read_builtin_result_codes() {
    return checked(read_result_codes_section(builtin_sections().result_codes));
}

std::string write_catalogue_blob(const BuiltinCatalogues& c) {
    Writer w;
    w.out = kMagic;
    for (const std::string& s : {section(c.xid_policy), section(c.signatures), section(c.result_codes)}) w.put(s);
    return std::move(w.out);
}

Result<CatalogueBlobSections> catalogue_blob_sections(std::string_view blob) {
    if (!blob.starts_with(kMagic)) return fail("the built-in catalogues in this binary are missing or of another layout");
    Reader r(blob.substr(kMagic.size()));
    CatalogueBlobSections s{r.text(), r.text(), r.text()};
    if (!r.ok() || !r.at_end()) return fail("the built-in catalogues in this binary are damaged");
    return s;
}

Result<XidPolicy> read_xid_policy_section(std::string_view section) {
    return read_section<XidPolicy>(section, "Xid policy");
}
Result<SignatureCatalogue> read_signatures_section(std::string_view section) {
    return read_section<SignatureCatalogue>(section, "signature catalogue");
}
Result<std::vector<ResultCodeTable>> read_result_codes_section(std::string_view section) {
    return read_section<std::vector<ResultCodeTable>>(section, "result-code tables");
}

}  // namespace gpudx
