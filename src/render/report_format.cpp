#include "render/report_format.hpp"

#include <nlohmann/json.hpp>

#include "render/formats.hpp"

namespace gpudx {

bool is_data_format(ReportFormat format) { return format == ReportFormat::json || format == ReportFormat::prom; }

RenderedReport render_report(const Snapshot& s, const Diagnosis& d, ReportFormat format, const RenderOptions& o,
                             const PrometheusOptions& prom) {
    return render_report(s, d, FindingsView(d.findings), format, o, prom);
}

RenderedReport render_report(const Snapshot& s, const Diagnosis& d, FindingsView findings, ReportFormat format,
                             const RenderOptions& o, const PrometheusOptions& prom) {
    switch (format) {
        case ReportFormat::json: return {diagnosis_json_pieces(s, d, {}, findings).whole() + "\n", d.exit_code};
        case ReportFormat::prom: return {render_prometheus(s, d, findings, prom), d.exit_code};
        case ReportFormat::slurm: {
            auto reason = slurm_reason(with_first_findings(d, findings, kSlurmReasonFindingsRead));
            return {(reason ? reason->format() : std::string()) + "\n", d.exit_code};
        }
        case ReportFormat::npd: {
            auto r = node_problem_detector(d, findings);
            return {r.message + "\n", r.exit_code};
        }
        case ReportFormat::nagios: {
            auto r = nagios(s, d, findings);
            return {r.message + "\n", r.exit_code};
        }
        case ReportFormat::text: break;
    }
    return {diagnosis_text_pieces(s, d, findings, o).whole(), d.exit_code};
}

}  // namespace gpudx
