// The rounds schedule (schedule.h); no torch headers.
#include "schedule.h"

#include <algorithm>
#include <map>
#include <random>

namespace dbench::driver {

Schedule& schedule() {
  static Schedule s;
  return s;
}

std::string group_of(const std::string& name) {
  const size_t first = name.find('/');
  const size_t second = name.find('/', first + 1);
  if (first == std::string::npos || second == std::string::npos) return name;
  return name.substr(0, first) + name.substr(second);
}

void enrol_rounds(Schedule& s) {
  std::vector<int64_t> calls;
  calls.reserve(s.entries.size());
  for (auto& e : s.entries) calls.push_back(e.calibrate());
  std::vector<std::vector<size_t>> groups;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < s.entries.size(); ++i) {
    const auto [at, fresh] = index.emplace(s.entries[i].group, groups.size());
    if (fresh) groups.emplace_back();
    groups[at->second].push_back(i);
  }
  std::mt19937 rng(s.seed);
  for (int r = 0; r < s.rounds; ++r) {
    std::shuffle(groups.begin(), groups.end(), rng);
    for (auto& g : groups) {
      std::shuffle(g.begin(), g.end(), rng);
      for (const size_t i : g) s.entries[i].enrol(calls[i]);
    }
  }
  s.entries.clear();  // the registrations hold their own copies of the calls and inputs
}

}  // namespace dbench::driver
