#include "render/report_format.hpp"

#include <nlohmann/json.hpp>

#include "render/formats.hpp"

namespace gpudx {

bool is_data_format(ReportFormat format) { return format == ReportFormat::json || format == ReportFormat::prom; }

RenderedReport render_report(const Snapshot& s, const Diagnosis& d, ReportFormat format, const RenderOptions& o,
                             const PrometheusOptions& prom) {
    switch (format) {
        case ReportFormat::json: return {diagnosis_to_json(s, d).dump(2) + "\n", d.exit_code};
        case ReportFormat::prom: return {render_prometheus(s, d, prom), d.exit_code};
        case ReportFormat::slurm: {
            auto reason = slurm_reason(d);
            return {(reason ? reason->format() : std::string()) + "\n", d.exit_code};
        }
        case ReportFormat::npd: {
            auto r = node_problem_detector(d);
            return {r.message + "\n", r.exit_code};
        }
        case ReportFormat::nagios: {
            auto r = nagios(s, d);
            return {r.message + "\n", r.exit_code};
        }
        case ReportFormat::text: break;
    }
    return {render_diagnosis_text(s, d, o), d.exit_code};
}

}  // namespace gpudx
