#include "actors/serve/decode_engine.h"

namespace ssd {

bool emit_slot_token(Slot& slot, int32_t tok) {
  BatchTokenCallback cb;
  if (slot.on_token) cb = [&](size_t, int32_t t) { return slot.on_token(t); };
  return emit_token(slot.req, slot.gen, 0, tok, cb);
}

}  // namespace ssd
