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

Result<Exemption> ParseExemption(std::string_view entry) {
  static constexpr std::pair<std::string_view, Exemption::Of> kForms[] = {
      {"team", Exemption::Of::kTeam},   {"project", Exemption::Of::kProject}, {"user", Exemption::Of::kUser},
      {"job", Exemption::Of::kJob},     {"label", Exemption::Of::kLabel},     {"annotation", Exemption::Of::kAnnotation},
  };
  auto bad = [&] {
    return InvalidArgument(fmt::format(
        "\"{}\": want team:NAME, project:NAME, user:NAME, job:ID, label:KEY=VALUE, label:KEY, "
        "annotation:KEY=VALUE or annotation:KEY",
        entry));
  };
  auto colon = entry.find(':');
  if (colon == std::string_view::npos || colon + 1 == entry.size()) return bad();
  std::string_view field = entry.substr(0, colon), rest = entry.substr(colon + 1);
  for (const auto& [name, of] : kForms) {
    if (field != name) continue;
    Exemption e{.of = of, .name = std::string(rest)};
    if (of == Exemption::Of::kLabel || of == Exemption::Of::kAnnotation) {
      // A key holds no '=' (Kubernetes' key syntax), so the first one ends it.
      if (auto eq = rest.find('='); eq != std::string_view::npos) {
        if (eq == 0) return bad();
        e.name = std::string(rest.substr(0, eq));
        e.value = std::string(rest.substr(eq + 1));
      }
    }
    return e;
  }
  return bad();
}

std::string ExemptionOf(const std::vector<std::string>& exempt, const Job& job) {
  auto has = [](const std::optional<JobMetadata>& m, const Exemption& e) {
    if (!m) return false;
    auto it = m->find(e.name);
    return it != m->end() && (!e.value || it->second == *e.value);
  };
  for (const std::string& entry : exempt) {
    auto e = ParseExemption(entry);
    if (!e.ok()) continue;
    bool match = false;
    switch (e->of) {
      case Exemption::Of::kTeam: match = job.team == e->name; break;
      case Exemption::Of::kProject: match = job.project == e->name; break;
      case Exemption::Of::kUser: match = job.user == e->name; break;
      case Exemption::Of::kJob: match = job.id == e->name; break;
      case Exemption::Of::kLabel: match = has(job.labels, *e); break;
      case Exemption::Of::kAnnotation: match = has(job.annotations, *e); break;
    }
    if (match) return entry;
  }
  return "";
}

}  // namespace gpuledger
