#pragma once
// A diagnosis in one of `gpudx diagnose --format`'s formats, with the exit code that format gives: the one
// place that maps a format name to its renderer, for `diagnose`, the agent's /v1/status and `gpudx status`.
#include <span>
#include <string>
#include <string_view>

#include "core/named_enum.hpp"
#include "model/diagnosis.hpp"
#include "model/snapshot.hpp"
#include "render/formats.hpp"
#include "render/report.hpp"

namespace gpudx {

// `gpudx diagnose --format`'s formats, named once: the command line, the agent's /v1/status?format= and its
// error message take the names from this table.
enum class ReportFormat { text, json, prom, slurm, npd, nagios };
inline constexpr EnumName<ReportFormat> kReportFormats[] = {
    {ReportFormat::text, "text"},   {ReportFormat::json, "json"}, {ReportFormat::prom, "prom"},
    {ReportFormat::slurm, "slurm"}, {ReportFormat::npd, "npd"},   {ReportFormat::nagios, "nagios"}};
constexpr std::span<const EnumName<ReportFormat>> enum_names(ReportFormat) { return kReportFormats; }

// json and prom: data with an escaping of their own, written as they are; the others are text for people (and
// the one-line texts of Slurm, node-problem-detector and Nagios), which loses its terminal controls on the way out.
bool is_data_format(ReportFormat format);

struct RenderedReport {
    std::string text;
    int exit_code = 0;  // the diagnosis's (0/1/2/3), or the plugin's for npd and nagios
};
// `prom` carries what the Prometheus format adds beyond the diagnosis (the node's record and class).
RenderedReport render_report(const Snapshot& s, const Diagnosis& d, ReportFormat format, const RenderOptions& o,
                             const PrometheusOptions& prom);
// The same, the findings read from `findings` one at a time (`d`'s own are not read): the agent's, from its pack.
RenderedReport render_report(const Snapshot& s, const Diagnosis& d, FindingsView findings, ReportFormat format,
                             const RenderOptions& o, const PrometheusOptions& prom);

}  // namespace gpudx
