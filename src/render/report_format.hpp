#pragma once
// A diagnosis in one of `gpudx diagnose --format`'s formats, with the exit code that format gives: the one
// place that maps a format name to its renderer, for `diagnose`, the agent's /v1/status and `gpudx status`.
#include <string>
#include <string_view>

#include "model/diagnosis.hpp"
#include "model/snapshot.hpp"
#include "render/formats.hpp"
#include "render/report.hpp"

namespace gpudx {

// text, json, prom, slurm, npd, nagios.
inline constexpr std::string_view kReportFormats[] = {"text", "json", "prom", "slurm", "npd", "nagios"};
bool is_report_format(std::string_view format);
// json and prom: data with an escaping of their own, written as they are; the others are text for people (and
// the one-line texts of Slurm, node-problem-detector and Nagios), which loses its terminal controls on the way out.
bool is_data_format(std::string_view format);

struct RenderedReport {
    std::string text;
    int exit_code = 0;  // the diagnosis's (0/1/2/3), or the plugin's for npd and nagios
};
// An unknown format renders as text.
// `prom` carries what the Prometheus format adds beyond the diagnosis (the node's record and class).
RenderedReport render_report(const Snapshot& s, const Diagnosis& d, std::string_view format, const RenderOptions& o,
                             const PrometheusOptions& prom);

}  // namespace gpudx
