#include "core/proc_maps.hpp"

#include "core/text.hpp"

namespace gpudx {

std::string_view ProcMapping::file_name() const {
    auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::vector<ProcMapping> parse_proc_mappings(std::string_view text) {
    constexpr std::string_view kDeleted = " (deleted)";
    std::vector<ProcMapping> out;
    for (auto line : split_lines(text)) {
        // The path starts after the fifth field and may hold spaces, so it is what is left, not a sixth field.
        size_t pos = 0;
        for (int field = 0; field < 5 && pos != std::string_view::npos; ++field) {
            pos = line.find_first_not_of(' ', pos);
            if (pos != std::string_view::npos) pos = line.find(' ', pos);
        }
        if (pos == std::string_view::npos) continue;
        ProcMapping m{trim(line.substr(pos))};
        if (m.path.ends_with(kDeleted)) {
            m.path.remove_suffix(kDeleted.size());
            m.deleted = true;
        }
        if (!m.path.empty()) out.push_back(m);
    }
    return out;
}

}  // namespace gpudx
