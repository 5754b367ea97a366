#include "topology/sim/outcome_trace.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/core/error.h"

namespace ssd::sim {
namespace {

int64_t int_field(const nlohmann::json& j, const char* key, const std::string& where,
                  std::optional<int64_t> dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    SSD_CHECK(dflt.has_value(), "{}: missing field '{}'", where, key);
    return *dflt;
  }
  SSD_CHECK(it->is_number_integer(), "{}: field '{}' must be an integer, got {}", where, key,
            it->dump());
  return it->get<int64_t>();
}

}  // namespace

std::string to_jsonl_line(const OutcomeRecord& r) {
  nlohmann::json j = {{"round", r.round}, {"seq", r.seq},
                      {"k", r.k},         {"accepted", r.accepted},
                      {"bonus_rank", r.bonus_rank}};
  if (r.hit) j["hit"] = *r.hit;
  if (r.prespec) j["prespec"] = *r.prespec;
  if (r.leader) j["leader"] = *r.leader;
  if (r.backup) j["backup"] = *r.backup;
  return j.dump();
}

OutcomeRecord parse_outcome_line(const std::string& line, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {
    fail(fmt::format("{}: not a JSON object: '{}'", where, line.substr(0, 80)));
  }
  SSD_CHECK(j.is_object(), "{}: not a JSON object", where);
  OutcomeRecord r;
  r.round = int_field(j, "round", where, std::nullopt);
  r.seq = static_cast<int32_t>(int_field(j, "seq", where, std::nullopt));
  r.k = static_cast<int32_t>(int_field(j, "k", where, std::nullopt));
  r.accepted = static_cast<int32_t>(int_field(j, "accepted", where, std::nullopt));
  r.bonus_rank = static_cast<int32_t>(int_field(j, "bonus_rank", where, -1));
  SSD_CHECK(r.round >= 0 && r.seq >= 0, "{}: round and seq must be >= 0", where);
  SSD_CHECK(r.k >= 0 && r.k <= 64, "{}: k must be in 0..64 (got {})", where, r.k);
  SSD_CHECK(r.accepted >= 0 && r.accepted <= r.k, "{}: accepted {} is not in 0..k = {}", where,
            r.accepted, r.k);
  SSD_CHECK(r.bonus_rank >= -1, "{}: bonus_rank must be >= -1", where);
  if (auto it = j.find("hit"); it != j.end() && !it->is_null()) {
    SSD_CHECK(it->is_boolean(), "{}: field 'hit' must be true or false", where);
    r.hit = it->get<bool>();
  }
  if (auto it = j.find("prespec"); it != j.end() && !it->is_null()) {
    SSD_CHECK(it->is_boolean(), "{}: field 'prespec' must be true or false", where);
    r.prespec = it->get<bool>();
  }
  if (auto it = j.find("leader"); it != j.end() && !it->is_null()) {
    SSD_CHECK(it->is_boolean(), "{}: field 'leader' must be true or false", where);
    r.leader = it->get<bool>();
    SSD_CHECK(!(*r.leader && r.hit.value_or(false)),
              "{}: a round the leader drafted after cannot be a hit", where);
  }
  if (auto it = j.find("backup"); it != j.end() && !it->is_null()) {
    SSD_CHECK(it->is_boolean(), "{}: field 'backup' must be true or false", where);
    r.backup = it->get<bool>();
    SSD_CHECK(!r.hit.value_or(false) && !r.leader.value_or(false),
              "{}: 'backup' says how the drafter answered a miss; this round {}", where,
              r.hit.value_or(false) ? "was a hit" : "was drafted by the leader");
  }
  return r;
}

std::vector<OutcomeRecord> read_outcome_trace(const std::string& path) {
  std::ifstream in(path);
  SSD_CHECK(in.good(), "cannot open outcome trace '{}'", path);
  std::vector<OutcomeRecord> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    out.push_back(parse_outcome_line(line, fmt::format("{} line {}", path, n)));
  }
  SSD_CHECK(!out.empty(), "outcome trace '{}' has no records", path);
  std::set<std::pair<int64_t, int32_t>> seen;
  for (const OutcomeRecord& r : out)
    SSD_CHECK(seen.insert({r.round, r.seq}).second,
              "outcome trace '{}': round {} of sequence {} appears twice", path, r.round, r.seq);
  return out;
}

void write_outcome_trace(const std::string& path, const std::vector<OutcomeRecord>& records) {
  std::ofstream out(path);
  SSD_CHECK(out.good(), "cannot write outcome trace '{}'", path);
  for (const OutcomeRecord& r : records) out << to_jsonl_line(r) << '\n';
  SSD_CHECK(out.good(), "writing outcome trace '{}' failed", path);
}

TraceSummary summarize(const std::vector<OutcomeRecord>& records) {
  TraceSummary s;
  std::set<int64_t> rounds;
  std::set<int32_t> seqs;
  for (const OutcomeRecord& r : records) {
    rounds.insert(r.round);
    seqs.insert(r.seq);
    ++s.seq_rounds;
    s.tokens += r.accepted + 1;
    if (r.hit) ++(*r.hit ? s.hits : s.misses);
    if (r.leader.value_or(false)) ++s.leader_drafted;
  }
  s.rounds = static_cast<int64_t>(rounds.size());
  s.sequences = static_cast<int32_t>(seqs.size());
  return s;
}

}  // namespace ssd::sim
