// SPDX-License-Identifier: Apache-2.0
#include "engine/layers/layer.h"

namespace mimicfs {

Result<void> Layer::enter(const Call&, Work&) { return {}; }
void Layer::leave(const Call&, Work&, int) {}

OperationReply Layer::dispatch(const Operation& operation, Work& work) {
  return serve_operation(operation, [&](const auto& request) { return pass(request, work); });
}

}  // namespace mimicfs
