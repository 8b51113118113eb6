#pragma once
// The fleet report as text and CSV (`gpudx fleet`); its JSON is fleet_report_to_json (model/fleet.hpp).
#include <string>
#include <string_view>

#include "model/fleet.hpp"

namespace gpudx {

struct FleetRenderOptions {
    size_t limit = 50;  // text: most entries shown per list (0 = all)
    bool color = false;
};
std::string render_fleet_text(const FleetReport& r, const FleetRenderOptions& o);
std::string render_fleet_csv(const FleetReport& r);

// One CSV field per RFC 4180: quoted when it holds a comma, quote, CR or LF; quotes doubled.
std::string csv_field(std::string_view s);

}  // namespace gpudx
