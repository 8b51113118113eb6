#include "render/report_format.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "render/formats.hpp"

namespace gpudx {

bool is_report_format(std::string_view format) {
    return std::find(std::begin(kReportFormats), std::end(kReportFormats), format) != std::end(kReportFormats);
}

bool is_data_format(std::string_view format) { return format == "json" || format == "prom"; }

RenderedReport render_report(const Snapshot& s, const Diagnosis& d, std::string_view format, const RenderOptions& o,
                             const PrometheusOptions& prom) {
    if (format == "json") return {diagnosis_to_json(s, d).dump(2) + "\n", d.exit_code};
    if (format == "prom") return {render_prometheus(s, d, prom), d.exit_code};
    if (format == "slurm") {
        auto reason = slurm_reason(d);
        return {(reason ? reason->format() : std::string()) + "\n", d.exit_code};
    }
    if (format == "npd") {
        auto r = node_problem_detector(d);
        return {r.message + "\n", r.exit_code};
    }
    if (format == "nagios") {
        auto r = nagios(s, d);
        return {r.message + "\n", r.exit_code};
    }
    return {render_diagnosis_text(s, d, o), d.exit_code};
}

}  // namespace gpudx
