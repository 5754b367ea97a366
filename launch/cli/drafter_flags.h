// The drafter flags that `ssd generate` and `ssd bench` share, declared once (name, default,
// help) and turned into the DrafterOptions every rank builds its drafter with. A command's
// argument struct holds one DrafterFlags and calls its visit() from its own.
#pragma once

#include <string>

#include "actors/roles/drafter_factory.h"

namespace ssd {

struct DrafterFlags {
  bool online_learning = false;
  std::string domino_head = "on", domino_block = "trim";

  template <class V>
  void visit(V&& v) {
    v(online_learning, "online-learning", "early-exit drafter: train its head online (DVI)");
    v(domino_head, "domino-head", "domino drafter: on, or off for the backbone alone",
      {.choices = {"on", "off"}});
    v(domino_block, "domino-block",
      "domino drafter: trim (only the k MASK rows wanted: the same acceptance, cheaper) or full "
      "(the trained B-1)",
      {.choices = {"full", "trim"}});
  }

  // The options for a drafter whose own models run on `threads` CPU threads.
  DrafterOptions options(int threads) const {
    DrafterOptions o;
    o.online_learning = online_learning;
    o.domino_head = domino_head == "on";
    o.domino_trim = domino_block == "trim";
    o.threads = threads;
    return o;
  }
};

}  // namespace ssd
