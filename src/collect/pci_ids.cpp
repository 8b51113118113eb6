#include "collect/pci_ids.hpp"

#include <string.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/mapped_file.hpp"
#include "core/text.hpp"

#include <optional>

namespace gpudx {
namespace {

// The rest of the line after "xxxx  " (the id and two blanks), trimmed.
std::string name_after_id(std::string_view text, size_t id_pos) {
    size_t start = id_pos + 4;
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    return sanitize_utf8(trim(text.substr(start, end - start)));
}

// The vendor block runs from its line to the next line that does not start with a tab or '#'.
std::string_view vendor_block(std::string_view text, size_t vendor_line) {
    size_t pos = text.find('\n', vendor_line);
    while (pos != std::string_view::npos && pos + 1 < text.size()) {
        char c = text[pos + 1];
        if (c != '\t' && c != '#' && c != '\n') return text.substr(vendor_line, pos + 1 - vendor_line);
        pos = text.find('\n', pos + 1);
    }
    return text.substr(vendor_line);
}

// Vendor id of a vendor line ("10de  NVIDIA Corporation"); the class section ("C 03  ...") that follows
// every vendor sorts after them all; other lines (devices, comments) have none.
std::optional<uint32_t> vendor_line_id(std::string_view line) {
    if (line.starts_with("C ")) return 0x10000;
    if (line.size() < 6 || line[4] != ' ' || line[5] != ' ') return std::nullopt;
    auto v = parse_uint(line.substr(0, 4), 16);
    if (!v) return std::nullopt;
    return static_cast<uint32_t>(*v);
}

// The first vendor line at or after pos: its start and id.
std::optional<std::pair<size_t, uint32_t>> next_vendor_line(std::string_view text, size_t pos) {
    if (pos > 0) {
        pos = text.find('\n', pos - 1);
        if (pos == std::string_view::npos) return std::nullopt;
        ++pos;
    }
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        std::string_view line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
        if (auto id = vendor_line_id(line)) return std::pair{pos, *id};
        if (end == std::string_view::npos) break;
        pos = end + 1;
    }
    return std::nullopt;
}

// pci.ids lists vendors in ascending order: bisect to a small window, so that a lookup touches a few pages
// of the file instead of scanning up to the vendor (Intel sits three quarters in).
std::pair<size_t, size_t> vendor_window(std::string_view text, uint32_t vendor) {
    size_t lo = 0, hi = text.size();
    while (hi - lo > 16 * 1024) {
        auto at = next_vendor_line(text, lo + (hi - lo) / 2);
        if (!at || at->first >= hi) break;
        if (at->second < vendor) lo = at->first;
        else hi = at->first;
    }
    // The vendor's line starts in [lo, hi]; keep the byte before lo so a "\n" match works at lo.
    size_t from = lo > 0 ? lo - 1 : 0;
    size_t to = std::min(text.size(), hi + 8);
    return {from, to};
}

}  // namespace

PciIdNames parse_pci_ids(std::string_view text, const std::vector<std::pair<uint16_t, uint16_t>>& wanted) {
    PciIdNames out;
    std::vector<uint16_t> vendors;
    for (auto& [v, d] : wanted) vendors.push_back(v);
    std::sort(vendors.begin(), vendors.end());
    vendors.erase(std::unique(vendors.begin(), vendors.end()), vendors.end());

    for (uint16_t v : vendors) {
        // Vendor lines are the only ones starting at column 0 with four hex digits and two blanks.
        std::string key = fmt::format("{:04x}  ", v);
        size_t at = text.starts_with(key) ? 0 : std::string_view::npos;
        if (at == std::string_view::npos) {
            std::string needle = "\n" + key;
            auto [from, to] = vendor_window(text, v);
            auto* hit = static_cast<const char*>(::memmem(text.data() + from, to - from, needle.data(), needle.size()));
            if (!hit) continue;
            at = static_cast<size_t>(hit - text.data()) + 1;
        }
        out.vendors[v] = name_after_id(text, at);
        std::string_view block = vendor_block(text, at);
        for (auto& [wv, wd] : wanted) {
            if (wv != v) continue;
            std::string dkey = fmt::format("\n\t{:04x}  ", wd);
            size_t dh = block.find(dkey);
            if (dh == std::string_view::npos) continue;
            out.devices[{wv, wd}] = name_after_id(block, dh + 2);
        }
    }
    return out;
}


PciIdNames lookup_pci_ids(const Root& root, const std::vector<std::pair<uint16_t, uint16_t>>& wanted) {
    if (wanted.empty()) return {};
    for (const char* path : {"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids"}) {
        // stat() first: it is how a recording root (gpudx gather) learns that the file was used.
        if (!root.exists(path)) continue;
        auto host = root.host_path(path);
        if (!host) continue;
        // Mapped rather than copied: only a few pages around the wanted vendors are ever touched.
        MappedFile file(*host, 64 << 20);
        if (file.ok()) return parse_pci_ids(file.bytes(), wanted);
        // A recorded or unusual file that cannot be mapped: read it through the root.
        if (auto text = root.read_file(path, 16 * 1024 * 1024)) return parse_pci_ids(*text, wanted);
    }
    return {};
}

}  // namespace gpudx
