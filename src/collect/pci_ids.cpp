#include "collect/pci_ids.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {
namespace {

// The rest of the line after "xxxx  " (the id and two blanks), trimmed.
std::string name_after_id(std::string_view text, size_t id_pos) {
    size_t start = id_pos + 4;
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    return std::string(trim(text.substr(start, end - start)));
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
            size_t hit = text.find("\n" + key);
            if (hit == std::string_view::npos) continue;
            at = hit + 1;
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
        auto text = root.read_file(path, 16 * 1024 * 1024);
        if (text) return parse_pci_ids(*text, wanted);
    }
    return {};
}

}  // namespace gpudx
