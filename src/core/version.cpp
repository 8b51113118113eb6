#include "core/version.hpp"

#include <algorithm>
#include <vector>

#include "core/text.hpp"

namespace gpudx {

namespace {

std::vector<std::string_view> components(std::string_view v) {
    v = trim(v);
    if (v.empty()) return {};
    return split(v, '.');
}

int compare_component(std::string_view a, std::string_view b) {
    auto na = parse_uint(a), nb = parse_uint(b);
    if (na && nb) return *na < *nb ? -1 : *na > *nb ? 1 : 0;
    int c = a.compare(b);
    return c < 0 ? -1 : c > 0 ? 1 : 0;
}

}  // namespace

int compare_versions(std::string_view a, std::string_view b) {
    auto ca = components(a), cb = components(b);
    for (size_t i = 0; i < std::min(ca.size(), cb.size()); ++i)
        if (int c = compare_component(ca[i], cb[i]); c != 0) return c;
    return ca.size() < cb.size() ? -1 : ca.size() > cb.size() ? 1 : 0;
}

bool versions_compatible(std::string_view a, std::string_view b) {
    auto ca = components(a), cb = components(b);
    if (ca.empty() || cb.empty()) return false;
    for (size_t i = 0; i < std::min(ca.size(), cb.size()); ++i)
        if (compare_component(ca[i], cb[i]) != 0) return false;
    return true;
}

}  // namespace gpudx
