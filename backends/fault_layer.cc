#include "backends/fault_layer.h"

namespace mimicfs {

bool FaultLayer::faultable(Op op) {
  switch (op) {
    case Op::kSetattr:
    case Op::kTruncate:
    case Op::kCreate:
    case Op::kMkdir:
    case Op::kSymlink:
    case Op::kLink:
    case Op::kUnlink:
    case Op::kRmdir:
    case Op::kRename:
    case Op::kOpen:
    case Op::kFlush:
    case Op::kRead:
    case Op::kWrite:
    case Op::kFallocate:
    case Op::kPunch:
    case Op::kFsync:
      return true;
    default:
      return false;
  }
}

Result<void> FaultLayer::enter(const Call& call, Work& work) {
  if (powered_off_ && call.op != Op::kGetattr && call.op != Op::kStatfs &&
      call.op != Op::kRelease) {
    return fail(EIO);
  }
  if (rules_.empty() || !faultable(call.op)) return {};
  std::string path = target().path(call.inode);
  if (!call.name.empty()) path = (path == "/" ? "" : path) + "/" + std::string(call.name);
  const FaultInjector::Fault fault = rules_.check(call.op, path);
  work.fault_latency_ns += fault.latency_ns;
  if (fault.error) return fail(fault.error);
  return {};
}

StatsSnapshot FaultLayer::snapshot() {
  StatsSnapshot s = Layer::snapshot();
  s.faults = rules_.to_json();
  s.power = {{"on", powered()}, {"crashes", target().crashes()}};
  return s;
}

}  // namespace mimicfs
