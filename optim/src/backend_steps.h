// defines: optim::run_per_device (private to optim/src) — a step's backend arguments handed to each device's backend in
// one call.
#pragma once
#include <algorithm>
#include <vector>

#include "ember/core/backend.h"

namespace ember::optim {

// Calls run(backend, args) once per device among `steps` (each Args has a .param), with that device's arguments in
// their order. One device, the usual case, is one call with the list as it is.
template <class Args, class Run>
void run_per_device(const std::vector<Args>& steps, Run run) {
  std::vector<Device> devices;
  for (const Args& a : steps)
    if (std::find(devices.begin(), devices.end(), a.param.device()) == devices.end())
      devices.push_back(a.param.device());
  if (devices.size() == 1) return run(backend_for(devices[0]), steps);
  for (const Device& d : devices) {
    std::vector<Args> on_d;
    for (const Args& a : steps)
      if (a.param.device() == d) on_d.push_back(a);
    run(backend_for(d), on_d);
  }
}

}  // namespace ember::optim
