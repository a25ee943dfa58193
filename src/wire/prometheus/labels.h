// Labels and names shared by the Prometheus text format, remote-write and the
// dcgm-exporter mapping: a label is a (name, value) pair, a series' labels are a small
// vector in the order they arrived (remote-write decoding sorts them by name).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuledger::prometheus {

struct Label {
  std::string name;
  std::string value;
  bool operator==(const Label&) const = default;
};
using Labels = std::vector<Label>;

// The label remote-write uses for the metric name.
inline constexpr std::string_view kMetricNameLabel = "__name__";

// Returns the value of the first label called `name`, or nullopt when there is none.
// The view points into `labels` and lives as long as it does.
std::optional<std::string_view> FindLabel(const Labels& labels, std::string_view name);

// Metric names: [a-zA-Z_:][a-zA-Z0-9_:]* (colons are legal; vLLM uses "vllm:").
bool IsValidMetricName(std::string_view name);
// Label names: [a-zA-Z_][a-zA-Z0-9_]*.
bool IsValidLabelName(std::string_view name);
// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool IsValidUtf8(std::string_view text);

// `{a="x",b="y\"z"}` with exposition escapes; "" for an empty set. For messages and the
// writer.
std::string FormatLabels(const Labels& labels);

// Appends `value` to `out` with the label-value escapes of the text format: backslash,
// double quote and line feed become \\, \" and \n.
void AppendEscapedLabelValue(std::string& out, std::string_view value);

}  // namespace gpuledger::prometheus
