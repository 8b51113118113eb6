#pragma once
// Dotted version strings as drivers, DKMS and libraries write them ("580.159.04", "13.1.80", "13").
#include <string_view>

namespace gpudx {

// <0, 0, >0 like strcmp, component by component: numeric components compare as numbers ("580.95" <
// "580.159"), others as text; a missing component counts as lower ("580" < "580.159.04").
int compare_versions(std::string_view a, std::string_view b);

// One version is the other written with fewer components ("13" and "13.1.80", "580.159" and "580.159.04"):
// they may name the same release, as a soname's major and the file's full version do.
bool versions_compatible(std::string_view a, std::string_view b);

}  // namespace gpudx
