// What the server's engine tests (LocalEngine, RemoteEngine) share: the tiny target drafting for
// itself, requests of unequal lengths with the target's own greedy tokens for them (the reference
// every served token must equal), and a driver that admits slots and runs rounds between them as
// the scheduler does, without its threads.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "actors/serve/decode_engine.h"
#include "tests/unit/actors/split_fixture.h"

namespace ssd::test {

struct EngineCase {
  // n requests (staggered_request(i, new_tokens)) and their AR tokens on the tiny target.
  EngineCase(size_t n, int64_t new_tokens)
      : reqs(split::staggered_requests(n, new_tokens)),
        target(*tiny.engine->model, *tiny.engine->kv),
        ar(generate_ar_batch(target, reqs)) {}

  split::TinyTarget tiny;
  std::unique_ptr<Drafter> drafter = tiny.self_drafter();
  std::vector<GenerationRequest> reqs;
  LocalTarget target;
  std::vector<GenerationResult> ar;
};

// Slots 0..n-1 (slot i: id i + 1, request reqs[i]) on `eng`, and the ones running.
class EngineDriver {
 public:
  EngineDriver(DecodeEngine& eng, std::vector<GenerationRequest> reqs) : eng_(eng) {
    slots.resize(reqs.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      slots[i].id = static_cast<int64_t>(i + 1);
      slots[i].req = std::move(reqs[i]);
    }
  }

  // Admits these slots between two rounds; the ones still running after their first token join.
  void admit(std::initializer_list<size_t> which) {
    std::vector<Slot*> joining;
    for (size_t i : which) joining.push_back(&slots[i]);
    eng_.admit(joining);
    for (Slot* s : joining)
      if (s->running) running.push_back(s);
  }
  // One round of every running slot; the ones that ended leave.
  void round() {
    sequence_rounds += static_cast<int64_t>(running.size());
    eng_.round(running);
    std::erase_if(running, [](Slot* s) { return !s->running; });
  }
  // Slot i's client leaves mid-run: the engine gives back what it holds.
  void leave(size_t i) {
    slots[i].running = false;
    eng_.release(slots[i]);
    std::erase(running, &slots[i]);
  }

  std::vector<Slot> slots;
  std::vector<Slot*> running;
  int64_t sequence_rounds = 0;  // one per running slot per round

 private:
  DecodeEngine& eng_;
};

}  // namespace ssd::test
