// defines: DetectAnomalyGuard. While one is alive on a thread, every node records where it was created and
// the first backward step that produces a NaN or Inf gradient throws, naming the op.
//
//   { ember::autograd::DetectAnomalyGuard g; loss.backward(); }  // "log_backward produced nan ..."
#pragma once

namespace ember::autograd {

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard();
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace ember::autograd
