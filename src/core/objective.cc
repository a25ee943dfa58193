#include "core/objective.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <utility>

namespace gpuledger {

namespace {

// The enum whose name is `text` among `all`, or an error listing the names.
template <typename E, size_t N, typename NameFn>
Result<E> ParseNamed(std::string_view what, std::string_view text, const std::array<E, N>& all, NameFn name) {
  std::string names;
  for (E e : all) {
    if (text == name(e)) return e;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", name(e));
  }
  return InvalidArgument(fmt::format("{} \"{}\": want one of {}", what, text, names));
}

constexpr std::array kKinds = {ObjectiveKind::kUtilization, ObjectiveKind::kAvailability, ObjectiveKind::kBudget};
constexpr std::array kMeasures = {UtilizationMeasure::kEffective, UtilizationMeasure::kAllocatedEfficiency};
constexpr std::array kActions = {InterventionAction::kNotify, InterventionAction::kHold,
                                 InterventionAction::kReprioritize, InterventionAction::kStop,
                                 InterventionAction::kRequeue};

}  // namespace

std::string_view ObjectiveKindName(ObjectiveKind k) {
  switch (k) {
    case ObjectiveKind::kUtilization: return "utilization";
    case ObjectiveKind::kAvailability: return "availability";
    case ObjectiveKind::kBudget: return "budget";
  }
  return "?";
}

Result<ObjectiveKind> ParseObjectiveKind(std::string_view text) {
  return ParseNamed<ObjectiveKind>("kind", text, kKinds, ObjectiveKindName);
}

std::string ObjectiveScope::ToString() const {
  switch (of) {
    case Of::kFleet: return "fleet";
    case Of::kPool: return "pool:" + name;
    case Of::kTeam: return "team:" + name;
    case Of::kKind: return "kind:" + name;
  }
  return "?";
}

Result<ObjectiveScope> ParseObjectiveScope(std::string_view text) {
  if (text == "fleet") return ObjectiveScope{};
  static constexpr std::pair<std::string_view, ObjectiveScope::Of> kPrefixes[] = {
      {"pool:", ObjectiveScope::Of::kPool}, {"team:", ObjectiveScope::Of::kTeam}, {"kind:", ObjectiveScope::Of::kKind}};
  for (auto [prefix, of] : kPrefixes) {
    if (!text.starts_with(prefix)) continue;
    std::string name(text.substr(prefix.size()));
    if (name.empty()) return InvalidArgument(fmt::format("scope \"{}\": names nothing after \"{}\"", text, prefix));
    if (of == ObjectiveScope::Of::kKind) {
      auto kind = ParseJobKind(name);
      if (!kind.ok()) return kind.status().WithContext(fmt::format("scope \"{}\"", text));
    }
    return ObjectiveScope{of, std::move(name)};
  }
  return InvalidArgument(fmt::format("scope \"{}\": want fleet, pool:NAME, team:NAME or kind:NAME", text));
}

std::string_view UtilizationMeasureName(UtilizationMeasure m) {
  switch (m) {
    case UtilizationMeasure::kEffective: return "effective";
    case UtilizationMeasure::kAllocatedEfficiency: return "allocated_efficiency";
  }
  return "?";
}

Result<UtilizationMeasure> ParseUtilizationMeasure(std::string_view text) {
  return ParseNamed<UtilizationMeasure>("measure", text, kMeasures, UtilizationMeasureName);
}

Result<double> ParsePercent(std::string_view text) {
  auto bad = [&] { return InvalidArgument(fmt::format("\"{}\": want a percentage such as \"65%\" or \"99.5%\"", text)); };
  if (!text.ends_with('%')) return bad();
  std::string_view number = text.substr(0, text.size() - 1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || ptr != number.data() + number.size() || number.empty()) return bad();
  if (!(v >= 0 && v <= 100)) return InvalidArgument(fmt::format("\"{}\": a percentage is within 0..100%", text));
  return v / 100.0;
}

std::string_view InterventionActionName(InterventionAction a) {
  switch (a) {
    case InterventionAction::kNotify: return "notify";
    case InterventionAction::kHold: return "hold";
    case InterventionAction::kReprioritize: return "reprioritize";
    case InterventionAction::kStop: return "stop";
    case InterventionAction::kRequeue: return "requeue";
  }
  return "?";
}

Result<InterventionAction> ParseInterventionAction(std::string_view text) {
  return ParseNamed<InterventionAction>("action", text, kActions, InterventionActionName);
}

std::string ExemptionOf(const std::vector<std::string>& exempt, const Job& job) {
  for (const std::string& e : exempt) {
    auto colon = e.find(':');
    if (colon == std::string::npos) continue;
    std::string_view field(e.data(), colon);
    std::string_view value(e.data() + colon + 1, e.size() - colon - 1);
    const std::string* of = field == "team"      ? &job.team
                            : field == "project" ? &job.project
                            : field == "user"    ? &job.user
                            : field == "job"     ? &job.id
                                                 : nullptr;
    if (of != nullptr && *of == value) return e;
  }
  return "";
}

}  // namespace gpuledger
