#pragma once
// The HTML pages (docs/report.md): one self-contained file each, inline CSS and SVG drawn here, no script, no
// font or image from anywhere (a Content-Security-Policy in the page forbids every load), readable offline and
// printable. Every text from a node or a file passes through html_escape, and only through it.
#include <string>
#include <string_view>

#include "core/pieced_text.hpp"
#include "model/fleet.hpp"
#include "model/node_page.hpp"

namespace gpudx {

// Text for an HTML text node or a quoted attribute: & < > " ' as entities, control characters shown as ?, invalid
// UTF-8 replaced. The one function every value from outside gpudx goes through.
std::string html_escape(std::string_view text);

// `gpudx report`, the agent's / and the page `gpudx gather` puts beside its capture.
std::string render_node_page_html(const NodePage& page);
// The same page in pieces (core/pieced_text.hpp): the findings drawn one at a time as the pieces are asked for (the
// agent's /, from its pack). `page`, and what it points to, must outlive the pieces.
PiecedText node_page_html_pieces(const NodePage& page);

struct FleetHtmlOptions {
    size_t node_rows = 200;  // most nodes drawn in the nodes-by-checks heat map and each class's lists
    size_t checks = 40;      // most checks (finding ids) in the heat maps, those most nodes share first
};
// `gpudx fleet report --format html`: aggregated per class, so 10,000 nodes make a page of bounded size.
std::string render_fleet_html(const FleetReport& report, const FleetHtmlOptions& o);

}  // namespace gpudx
