#include "dashboard/dashboard.h"

namespace gpuledger::dashboard {

const Asset* FindAsset(std::string_view name) {
  for (const Asset& a : Assets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace gpuledger::dashboard
